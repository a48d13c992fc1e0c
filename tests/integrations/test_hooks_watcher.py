"""Headless sessions end to end: a stand-in agent process runs the hooks, writes memory the way
Qwen Code's background extraction does (truncate, then write, seconds after Stop), and exits
without SessionEnd, as ``qwen -p`` does. Everything it wrote must be committed, nothing half
written ever, by one watcher; the session-end steps (push-sync, dream) run after it exits.

The quiet window and the grace period are shortened with ``QMEM_WATCH_QUIET`` and
``QMEM_WATCH_GRACE``; every check reads the memory repository with C git.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from qmem_git.hookentry import MARKER, session_file
from qmem_git.integrations import agents
from qmem_git.settings import build_settings
from qmem_git.store.remotes import create_bare_repository

HERE = Path(__file__).resolve().parent
AGENT = HERE / "standin_agent.py"
TRANSCRIPT = HERE.parent / "fixtures" / "hooks" / "qwen-transcript.jsonl"
SESSION = "5f0c7d2e-qwen"
QUIET, GRACE = 1.0, 1.0
STOP_BUDGET_S = 1.0  # the hook returns in ~0.1 s; generous for a loaded machine


class Store:
    """A project with a memory store, and a bare remote (not yet added), in tmp."""

    def __init__(self, tmp: Path, env: dict[str, str]) -> None:
        self.tmp = tmp
        self.project = tmp / "proj"
        self.project.mkdir()
        self.env = {**env, "QWEN_RUNTIME_DIR": str(tmp / "runtime")}
        self.env.update(QMEM_WATCH_QUIET=str(QUIET), QMEM_WATCH_GRACE=str(GRACE))
        layout = build_settings(self.env, project=str(self.project)).layout
        self.root, self.state = Path(layout.memory_root), Path(layout.state_dir)
        self.bare = tmp / "remote.git"
        create_bare_repository(str(self.bare))
        self.qmem("init")

    def add_remote(self) -> dict[str, object]:
        """The agent script's action that adds the remote mid-session, as a user would: the
        session-end push is then due, with no pull-sync from SessionStart racing the writes."""
        qmem = [sys.executable, "-m", "qmem_git", "--project", str(self.project)]
        return {"run": [*qmem, "remote", "add", "origin", str(self.bare)]}

    def qmem(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "qmem_git", "--project", str(self.project), *args],
            capture_output=True,
            text=True,
            env=self.env,
            check=True,
        )
        return done.stdout

    def git(self, *args: str, repo: Path | None = None, check: bool = True) -> str:
        """C git on the memory repository (wherever its git dir lives), or on ``repo``."""
        if repo is None:
            inside = self.root / ".git"
            git_dir = inside if inside.exists() else Path(f"{self.root}.git")
            where = [f"--git-dir={git_dir}", f"--work-tree={self.root}"]
        else:
            where = [f"--git-dir={repo}"]
        done = subprocess.run(
            ["git", *where, *args], capture_output=True, text=True, check=check, env=self.env
        )
        return done.stdout

    def payload(self, event: str, **extra: object) -> dict[str, object]:
        return {
            "session_id": SESSION,
            "transcript_path": str(self.project / "transcript.jsonl"),
            "cwd": str(self.project),
            "hook_event_name": event,
            **extra,
        }

    def run_agent(self, script: list[dict[str, object]], shell: bool = False) -> dict[str, object]:
        """Run the stand-in agent to its end; its results (pid, each hook's run)."""
        hook = [sys.executable, "-m", "qmem_git", "hook", "--agent", "qwen"]
        if shell:  # as Qwen Code runs hooks: `bash -c`, here a compound command (not exec'd)
            hook = ["/bin/sh", "-c", " ".join(hook) + ' "$0"; true']
        results = self.tmp / "agent-results.json"
        config = {"command": hook, "cwd": str(self.project), "script": script}
        config["results"] = str(results)
        env = {**self.env, "QWEN_PROJECT_DIR": str(self.project)}
        subprocess.run(
            [sys.executable, str(AGENT), json.dumps(config)], env=env, check=True, timeout=120
        )
        data = json.loads(results.read_text())
        assert isinstance(data, dict)
        return data

    def log(self) -> str:
        path = self.state / "hook.log"
        return path.read_text() if path.exists() else "(no hook.log)"

    def wait(self, what: str, condition: Callable[[], bool], seconds: float = 40.0) -> None:
        deadline = time.monotonic() + seconds
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not after {seconds}s\n{self.log()}")
            time.sleep(0.1)

    def watcher_gone(self) -> bool:
        return not _locked(self.state / "hooks" / "watcher.lock")

    def session_gone(self) -> bool:
        return not Path(session_file(str(self.state), SESSION)).exists()

    def pushed(self) -> bool:
        remote = self.git("rev-parse", "-q", "--verify", "main", repo=self.bare, check=False)
        return remote.strip() == self.git("rev-parse", "HEAD").strip()


def _locked(path: Path) -> bool:
    """True while some process holds the watcher lock ``path``."""
    return path.exists() and agents.watcher_running(str(path.parent))


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path, dict(os.environ))


def memory(name: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: {name}\ntype: project\n---\n\n{body}\n"


def pieces(text: str, count: int = 3) -> list[str]:
    step = -(-len(text) // count)
    return [text[i : i + step] for i in range(0, len(text), step)]


def blobs_ever_committed(store: Store) -> dict[str, set[str]]:
    """Every content each ``*.md`` path had in any commit of the repository."""
    seen: dict[str, set[str]] = {}
    for commit in store.git("rev-list", "--all").split():
        for line in store.git("ls-tree", "-r", commit).splitlines():
            meta, path = line.split("\t", 1)
            if path.endswith(".md") and path != "MEMORY.md":
                seen.setdefault(path, set()).add(store.git("cat-file", "blob", meta.split()[2]))
    return seen


@pytest.mark.parametrize("shell", [False, True], ids=["direct", "through-a-shell"])
def test_companion_headless_session_commits_what_qwen_wrote_after_stop(
    store: Store, shell: bool
) -> None:
    store.qmem("remember", "--type", "project", "Canary deploys roll out to 5% first")
    first = memory("Release freeze", "The release freeze starts 2026-03-05. " * 8)
    second = memory("Build tool", "Builds use pnpm, never npm. " * 8)
    final = memory("Release freeze", "The release freeze starts 2026-03-12 instead. " * 8)
    freeze, build = store.root / "project" / "freeze.md", store.root / "project" / "build.md"
    turn = [
        {"hook": "SessionStart", "payload": store.payload("SessionStart", source="startup")},
        {"hook": "UserPromptSubmit", "payload": store.payload(
            "UserPromptSubmit", prompt="canary deploys?", submitted_prompt="canary deploys?")},
        {"hook": "Stop", "payload": store.payload("Stop", stop_hook_active=False)},
    ]  # fmt: skip
    script = [
        *turn,
        {"write": str(freeze), "pieces": pieces(first), "pause": 0.3},
        {"write": str(build), "pieces": pieces(second), "pause": 0.3},
        {"sleep": QUIET + 3.0},  # the watcher commits this turn while the agent lives on
        store.add_remote(),
        *turn[1:],
        {"write": str(freeze), "pieces": pieces(final), "pause": 0.3},
    ]
    result = store.run_agent(script, shell=shell)
    hooks = result["hooks"]
    assert isinstance(hooks, list) and all(run["code"] == 0 for run in hooks)
    assert [run["stdout"] for run in hooks] == ["", "", "", "", ""]  # Qwen recalls itself
    stops = [run["seconds"] for run in hooks if run["event"] == "Stop"]
    assert max(stops) < STOP_BUDGET_S, stops

    store.wait("session ended", lambda: store.session_gone() and store.watcher_gone())
    assert store.git("show", "HEAD:project/freeze.md") == final
    assert store.git("show", "HEAD:project/build.md") == second
    committed = blobs_ever_committed(store)
    assert committed["project/freeze.md"] <= {first, final}  # never a piece of one
    assert committed["project/build.md"] == {second}
    assert first in committed["project/freeze.md"]  # committed within the session, not at exit
    assert store.git("status", "--porcelain") == ""
    assert store.pushed(), store.log()  # the session's end without SessionEnd: pushed
    log = store.log()
    assert log.count("watcher: watching") == 1, log
    assert log.count(f"session {SESSION} ended (its agent has gone): snapshot, sync") == 1, log
    assert "exit " not in log


def test_engine_headless_session_extracts_then_dreams_and_pushes_after_exit(
    store: Store,
) -> None:
    store.env["QMEM_MODE"] = "engine"
    store.qmem("remember", "--type", "project", "Canary deploys roll out to 5% first")
    (store.project / "transcript.jsonl").write_bytes(TRANSCRIPT.read_bytes())
    script = [
        {"hook": "SessionStart", "payload": store.payload("SessionStart", source="startup")},
        {"hook": "UserPromptSubmit", "payload": store.payload(
            "UserPromptSubmit", prompt="canary deploys?", submitted_prompt="canary deploys?")},
        {"hook": "Stop", "payload": store.payload("Stop", stop_hook_active=False)},
        store.add_remote(),
    ]  # fmt: skip
    result = store.run_agent(script)
    hooks = result["hooks"]
    assert isinstance(hooks, list) and all(run["code"] == 0 for run in hooks)
    recall = json.loads(hooks[1]["stdout"])["hookSpecificOutput"]["additionalContext"]
    assert recall.startswith(MARKER) and "Canary deploys roll out to 5% first" in recall
    assert hooks[2]["seconds"] < STOP_BUDGET_S

    store.wait("session ended", lambda: store.session_gone() and store.watcher_gone())
    messages = store.git("log", "--format=%B")
    assert messages.count("Qmem-Op: extract") == 1, messages  # the final extraction: nothing new
    assert f"Qmem-Session: {SESSION}" in messages
    assert (store.state / "dream-scan.json").exists()  # the session-end dream ran (and skipped)
    assert store.pushed(), store.log()
    log = store.log()
    assert log.count("watcher: watching") == 1, log
    ended = f"session {SESSION} ended (its agent has gone): extract, dream, sync"
    assert log.count(ended) == 1, log


def test_session_end_before_exit_ends_the_session_once(store: Store) -> None:
    """An interactive session: SessionEnd fires, then the agent exits. The watcher ends the
    session once, on SessionEnd, not a second time when it sees the agent gone."""
    written = memory("Build tool", "Builds use pnpm, never npm.")
    script = [
        {"hook": "SessionStart", "payload": store.payload("SessionStart", source="startup")},
        {"hook": "Stop", "payload": store.payload("Stop", stop_hook_active=False)},
        {"write": str(store.root / "project" / "build.md"), "pieces": [written]},
        store.add_remote(),
        {"hook": "SessionEnd", "payload": store.payload("SessionEnd", reason="prompt_input_exit")},
        {"sleep": QUIET + 0.5},
    ]
    store.run_agent(script)
    store.wait("session ended", lambda: store.session_gone() and store.watcher_gone())
    log = store.log()
    assert log.count(f"watcher: session {SESSION} ended (SessionEnd): snapshot, sync") == 1, log
    assert "ended (its agent has gone)" not in log
    assert store.git("show", "HEAD:project/build.md") == written
    assert store.pushed()


def test_a_watcher_killed_by_sigkill_is_replaced_and_only_one_runs(store: Store) -> None:
    """The test run is the agent here (it stays alive): a Stop starts the watcher, kill -9
    takes it down, the next Stop starts one again, and a Stop while one runs starts none."""
    lock = store.state / "hooks" / "watcher.lock"

    def stop() -> None:
        done = subprocess.run(
            [sys.executable, "-m", "qmem_git", "hook", "--agent", "qwen", "stop"],
            input=json.dumps(store.payload("Stop", stop_hook_active=False)).encode(),
            capture_output=True,
            cwd=store.project,
            env=store.env,
            check=True,
        )
        assert done.stdout == b""

    def holder() -> int:
        store.wait("a watcher", lambda: _locked(lock) and lock.read_text().strip().isdigit())
        return int(lock.read_text())

    stop()
    first = holder()
    os.kill(first, signal.SIGKILL)
    store.wait("the lock is free", lambda: not _locked(lock))
    stop()
    second = holder()
    assert second != first
    stop()
    time.sleep(1.0)
    assert holder() == second
    assert store.log().count("watcher: watching") == 2, store.log()
    written = memory("Build tool", "Builds use pnpm, never npm.")
    (store.root / "project").mkdir(exist_ok=True)
    (store.root / "project" / "build.md").write_text(written)
    store.wait("committed", lambda: "project/build.md" in store.git("ls-tree", "-r", "HEAD"))
    assert store.git("show", "HEAD:project/build.md") == written


def test_companion_session_commits_what_qwen_wrote_into_the_user_tier(store: Store) -> None:
    """Qwen Code's extraction routes user and feedback memories to ``<base>/memories``: once
    ``--tier user init`` made that store, the watcher commits it as it goes quiet, and the
    session's end takes its last snapshot and pushes it to its own remote."""
    user_bare = store.tmp / "user-remote.git"
    create_bare_repository(str(user_bare))
    store.qmem("--tier", "user", "init", "--remote", str(user_bare))
    user = store.tmp / "runtime" / "memories"
    user_git = Path(f"{user}.git")
    tea = memory("Tea", "The user always wants green tea. " * 8)
    terse = memory("Terse", "The user wants terse replies. " * 8)
    build = memory("Build tool", "Builds use pnpm, never npm.")
    script = [
        {"hook": "SessionStart", "payload": store.payload("SessionStart", source="startup")},
        {"hook": "Stop", "payload": store.payload("Stop", stop_hook_active=False)},
        {"write": str(user / "feedback" / "tea.md"), "pieces": pieces(tea), "pause": 0.3},
        {"sleep": QUIET + 3.0},  # the watcher commits the user tier while the agent lives on
        {"write": str(user / "user" / "terse.md"), "pieces": pieces(terse), "pause": 0.3},
        {"write": str(store.root / "project" / "build.md"), "pieces": [build]},
    ]
    store.run_agent(script)
    store.wait("session ended", lambda: store.session_gone() and store.watcher_gone())
    assert store.git("show", "HEAD:feedback/tea.md", repo=user_git) == tea
    assert store.git("show", "HEAD:user/terse.md", repo=user_git) == terse
    assert store.git("show", "HEAD:project/build.md") == build
    first = store.git("log", "--format=%H", "--", "feedback/tea.md", repo=user_git).split()
    later = store.git("log", "--format=%H", "--", "user/terse.md", repo=user_git).split()
    assert first[-1] != later[-1]  # tea.md was committed within the session, on its own
    remote = store.git("rev-parse", "main", repo=user_bare).strip()
    assert remote == store.git("rev-parse", "HEAD", repo=user_git).strip(), store.log()
    subprocess.run(["git", "--git-dir", str(user_git), "fsck", "--strict"], check=True)
    log = store.log()
    ended = f"session {SESSION} ended (its agent has gone): snapshot, snapshot --tier user, sync"
    assert log.count(ended + " --tier user") == 1, log
    assert "exit " not in log
