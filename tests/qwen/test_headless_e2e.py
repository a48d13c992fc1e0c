"""The real Qwen Code 0.24.4, headless (``qwen -p``), with qmem-git's hooks installed.

Issue 18, Tests, second bullet. Each scenario runs ``qwen -p … --approval-mode auto-edit`` once
with an isolated HOME (telemetry, usage statistics and auto-update off), inside a network
namespace that has only loopback, against the scripted model server of ``headless.py`` (the only
stand-in: the language model). The driver waits for qwen to exit and then for qmem-git's detached
hook worker; the tests then read the requests the model received and the memory repository
(``qmem-git log --json`` and C git).

What Qwen 0.24.4 does in a headless turn (observed with these scripts and a logging hook):
SessionStart, UserPromptSubmit and Stop fire and are awaited, SessionEnd never fires;
UserPromptSubmit fires again, with an empty prompt, on a tool-result continuation. In companion
mode (its managed auto-memory on) Qwen asks the model which memories to recall before the main
request and, when the main turn wrote no memory itself, runs its background extraction after the
Stop hooks have returned and awaits it before exiting.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import require_tool

DRIVER = Path(__file__).with_name("headless.py")
RECALL_TOKEN = "quagga7"  # only in the remembered memory's body: once per recall of it
REMEMBERED = "The zebra project builds with pnpm, never npm."
EXTRACTION_MARKER = "Managed memory has TWO directories"  # Qwen's background extraction
SELECTOR_TOOL = "respond_in_schema"  # Qwen's recall side query answers through this tool
ANSWER = "Use pnpm."
EXTRACTION_SECONDS = 3.0  # how long the model takes to answer Qwen's background extraction

Rules = list[dict[str, Any]]


def _frontmatter(name: str, kind: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: {name}\ntype: {kind}\n---\n\n{body}\n"


@dataclass
class HeadlessRun:
    """One finished ``qwen -p`` run: what the model received and where the memory lives."""

    env: dict[str, str]
    project: Path
    memory_root: Path
    state_dir: Path
    where: dict[str, Any]
    result: dict[str, Any]

    @property
    def requests(self) -> list[dict[str, Any]]:
        return [entry["body"] for entry in self.result["requests"]]

    def selector_requests(self) -> list[dict[str, Any]]:
        return [body for body in self.requests if _tool_names(body) == [SELECTOR_TOOL]]

    def extraction_requests(self) -> list[dict[str, Any]]:
        return [body for body in self.requests if EXTRACTION_MARKER in json.dumps(body)]

    def main_requests(self) -> list[dict[str, Any]]:
        """The main turn's requests: the first and each continuation after a tool result."""
        side = self.selector_requests() + self.extraction_requests()
        return [body for body in self.requests if body not in side]

    def qmem(self, *args: str) -> str:
        return _qmem(self.env, self.project, *args)

    @property
    def git_dir(self) -> Path:
        """The memory repository's git dir: ``where`` may name it; else beside or in the root."""
        named = self.where.get("git_dir")
        candidates = [Path(named)] if named else []
        root = self.memory_root
        candidates += [root.parent / f"{root.name}.git", root / ".git"]
        return next(path for path in candidates if path.is_dir())

    def git(self, *args: str) -> bytes:
        """C git on the memory repository."""
        done = subprocess.run(
            ["git", "--git-dir", str(self.git_dir), *args],
            capture_output=True,
            env=self.env,
            timeout=60,
            check=True,
        )
        return done.stdout

    def operations(self) -> list[dict[str, Any]]:
        return list(json.loads(self.qmem("log", "--json")))

    def uncommitted(self) -> list[str]:
        """Memory files (any ``*.md`` below the root) whose bytes differ from HEAD's."""
        committed = set(self.git("ls-tree", "-r", "--name-only", "HEAD").decode().splitlines())
        differ = []
        for path in sorted(self.memory_root.rglob("*.md")):
            name = path.relative_to(self.memory_root).as_posix()
            if ".git" in path.relative_to(self.memory_root).parts:
                continue
            if name not in committed or self.git("show", f"HEAD:{name}") != path.read_bytes():
                differ.append(name)
        return differ

    def hook_problems(self) -> list[str]:
        """Lines of qmem-git's hook log that report a crash or a failed worker step."""
        log = self.state_dir / "hook.log"
        lines = log.read_text("utf-8", "replace").splitlines() if log.exists() else []
        return [line for line in lines if "internal error" in line or " worker " in line]

    def explain(self) -> str:
        """What a failing assertion should show: qwen's output, the hook log, the stragglers."""
        qwen = self.result["qwen"]
        log = self.state_dir / "hook.log"
        hook_log = log.read_text("utf-8", "replace") if log.exists() else "(no hook.log)"
        return (
            f"qwen exit {qwen['rc']} after {qwen['seconds']} s\nstdout: {qwen['stdout'][-800:]}\n"
            f"stderr: {qwen['stderr'][-1500:]}\nhook.log: {hook_log[-1500:]}\n"
            f"still running {self.result['settled_seconds']} s after exit: "
            f"{self.result['still_running']}"
        )


def _qmem(env: dict[str, str], project: Path, *args: str) -> str:
    """stdout of a qmem-git run that must succeed."""
    done = subprocess.run(
        [sys.executable, "-m", "qmem_git", "--project", str(project), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=project,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _tool_names(body: dict[str, Any]) -> list[str]:
    return [tool.get("function", {}).get("name") for tool in body.get("tools") or []]


def _namespace_prefix() -> list[str]:
    """``unshare -n`` (root) or ``unshare -rn`` (a user namespace), checked by bringing lo up."""
    require_tool(shutil.which("node") is not None, "node (apt-get install nodejs)")
    require_tool(shutil.which("unshare") is not None, "unshare (util-linux)")
    require_tool(shutil.which("ip") is not None, "ip (apt-get install iproute2)")
    prefix = ["unshare", "-n"] if os.geteuid() == 0 else ["unshare", "-rn"]
    probe = subprocess.run([*prefix, "ip", "link", "set", "lo", "up"], capture_output=True)
    what = f"a network namespace ({' '.join(prefix)}): {probe.stderr.decode(errors='replace')}"
    require_tool(probe.returncode == 0, what)
    return prefix


def _env(home: Path) -> dict[str, str]:
    """Only what the run needs: nothing of the caller's HOME, QWEN_*, QMEM_* or git config."""
    venv_bin = os.path.dirname(sys.executable)
    return {
        "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Test Author",
        "GIT_AUTHOR_EMAIL": "author@example.com",
        "GIT_COMMITTER_NAME": "Test Author",
        "GIT_COMMITTER_EMAIL": "author@example.com",
        "QMEM_TELEMETRY": "0",
        "NO_COLOR": "1",
        "OPENAI_API_KEY": "sk-loopback-test",
        "OPENAI_MODEL": "loopback-model",
    }


def _qwen_settings(home: Path) -> None:
    """Qwen talks to the OpenAI-compatible server; no telemetry, statistics or update check."""
    settings = {
        "security": {"auth": {"selectedType": "openai"}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"enableAutoUpdate": False},
    }
    (home / ".qwen").mkdir(parents=True)
    (home / ".qwen" / "settings.json").write_text(json.dumps(settings), "utf-8")


def run_headless(
    tmp: Path,
    qwen_package: Path,
    prompt: str,
    rules: Callable[[Path, Path], Rules],
    *,
    engine: bool,
) -> HeadlessRun:
    """Set up a project with one remembered memory and the hooks, run ``qwen -p`` once."""
    prefix = _namespace_prefix()
    home, project = tmp / "home", tmp / "proj"
    home.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    env = _env(home)
    _qwen_settings(home)
    _qmem(env, project, "-q", "init")
    _qmem(env, project, "-q", "remember", "--type", "project", REMEMBERED, "--why", RECALL_TOKEN)
    _qmem(env, project, "-q", "install-hooks", "--agent", "qwen", *(["--engine"] * engine))
    where = json.loads(_qmem(env, project, "where", "--json"))
    memory_root = Path(where["memory_root"])
    spec = {
        "qwen": str(qwen_package.parents[1] / ".bin" / "qwen"),
        "args": ["-p", prompt, "--approval-mode", "auto-edit"],
        "cwd": str(project),
        "env": env,
        "rules": rules(memory_root, project),
        "settle_timeout": 40,
        "timeout": 90,
        "out": str(tmp / "result.json"),
    }
    (tmp / "spec.json").write_text(json.dumps(spec), "utf-8")
    command = [*prefix, sys.executable, str(DRIVER), str(tmp / "spec.json")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp / "result.json").read_text("utf-8"))
    return HeadlessRun(env, project, memory_root, Path(where["state_dir"]), where, result)


def _count(body: dict[str, Any], text: str) -> int:
    return json.dumps(body, ensure_ascii=False).count(text)


# --------------------------------------------------------------------------- scenarios

ENGINE_PROMPT = "How do we build the zebra project? We always run the kestrel9 linter first."
AGENT_WRITE_PROMPT = "How do we build the zebra project? Note that releases go out on Fridays."
EXTRACTION_PROMPT = "How do we build the zebra project? The staging host is called ocelot3."


def _engine_rules(memory_root: Path, project: Path) -> Rules:
    """The main turn writes a project file (a tool call, so a continuation follows)."""
    del memory_root
    notes = {"file_path": str(project / "NOTES.txt"), "content": "zebra notes\n"}
    call = {"name": "write_file", "arguments": notes}
    return [
        {"when": ["kestrel9"], "unless": ["tool_call_id"], "times": 1,
         "reply": {"content": "Writing notes.", "tool_calls": [call]}},
        {"when": ["tool_call_id"], "reply": {"content": ANSWER}},
    ]  # fmt: skip


def _engine_agent_write_rules(memory_root: Path, project: Path) -> Rules:
    """The main turn saves a memory file into qmem-git's store with write_file."""
    rules = _agent_write_rules(memory_root, project)
    return rules[1:]  # Qwen's own recall is off: no selector query to answer


def _agent_write_rules(memory_root: Path, project: Path) -> Rules:
    """Qwen recalls by model; the main turn saves a memory file with write_file."""
    del project
    content = _frontmatter(
        "Releases on Fridays", "project", "Zebra releases go out on Fridays (lynx5)."
    )
    call = {"file_path": str(memory_root / "project" / "releases.md"), "content": content}
    return [
        {"when": ["Available memories:"], "select_listed": True, "reply": {}},
        {"when": ["Fridays"], "unless": ["tool_call_id", EXTRACTION_MARKER], "times": 1,
         "reply": {"content": "Saving that.", "tool_calls": [
             {"name": "write_file", "arguments": call}]}},
        {"when": ["tool_call_id"], "reply": {"content": ANSWER}},
    ]  # fmt: skip


def _extraction_rules(memory_root: Path, project: Path) -> Rules:
    """Qwen recalls by model; its background extraction saves a memory file.

    A real model takes seconds to answer the extraction: so does this one, so that the write
    comes after whatever qmem-git's Stop hook started has looked at the folder.
    """
    del project
    content = _frontmatter("Staging host", "project", "The staging host is ocelot3.")
    call = {"file_path": str(memory_root / "project" / "staging-host.md"), "content": content}
    return [
        {"when": ["Available memories:"], "select_listed": True, "reply": {}},
        {"when": [EXTRACTION_MARKER], "times": 1, "delay": EXTRACTION_SECONDS,
         "reply": {"tool_calls": [{"name": "write_file", "arguments": call}]}},
        {"when": ["ocelot3"], "unless": ["tool_call_id"], "reply": {"content": ANSWER}},
    ]  # fmt: skip


@pytest.fixture(scope="module")
def engine_run(qwen_package: Path, tmp_path_factory: pytest.TempPathFactory) -> HeadlessRun:
    tmp = tmp_path_factory.mktemp("engine")
    return run_headless(tmp, qwen_package, ENGINE_PROMPT, _engine_rules, engine=True)


@pytest.fixture(scope="module")
def engine_write_run(qwen_package: Path, tmp_path_factory: pytest.TempPathFactory) -> HeadlessRun:
    tmp = tmp_path_factory.mktemp("engine-write")
    rules = _engine_agent_write_rules
    return run_headless(tmp, qwen_package, AGENT_WRITE_PROMPT, rules, engine=True)


@pytest.fixture(scope="module")
def agent_write_run(qwen_package: Path, tmp_path_factory: pytest.TempPathFactory) -> HeadlessRun:
    tmp = tmp_path_factory.mktemp("companion-write")
    return run_headless(tmp, qwen_package, AGENT_WRITE_PROMPT, _agent_write_rules, engine=False)


@pytest.fixture(scope="module")
def extraction_run(qwen_package: Path, tmp_path_factory: pytest.TempPathFactory) -> HeadlessRun:
    tmp = tmp_path_factory.mktemp("companion-extract")
    return run_headless(tmp, qwen_package, EXTRACTION_PROMPT, _extraction_rules, engine=False)


# --------------------------------------------------------------------------- engine mode


def test_engine_run_is_headless_offline_and_qwen_memory_off(engine_run: HeadlessRun) -> None:
    assert engine_run.result["interfaces"] == ["lo"]
    assert engine_run.result["qwen"]["rc"] == 0, engine_run.explain()
    assert ANSWER in engine_run.result["qwen"]["stdout"], engine_run.explain()
    assert (engine_run.project / "NOTES.txt").read_text("utf-8") == "zebra notes\n"
    # --engine switched Qwen's own memory off: no recall side query, no extraction
    assert engine_run.selector_requests() == []
    assert engine_run.extraction_requests() == []


def test_engine_recall_reaches_each_main_request_exactly_once(engine_run: HeadlessRun) -> None:
    main = engine_run.main_requests()
    assert len(main) == 2, engine_run.explain()  # the prompt, then the tool-result continuation
    assert [_count(body, RECALL_TOKEN) for body in main] == [1, 1]


def test_engine_extraction_is_committed_after_qwen_exits(engine_run: HeadlessRun) -> None:
    assert engine_run.result["still_running"] == [], engine_run.explain()
    extracts = [op for op in engine_run.operations() if op["op"] == "extract"]
    assert len(extracts) == 1, engine_run.explain()
    added = [c["path"] for c in extracts[0]["changes"] if c["status"] == "A"]
    texts = [engine_run.git("show", f"{extracts[0]['commit']}:{path}") for path in added]
    assert any(b"kestrel9" in text for text in texts), texts
    assert engine_run.uncommitted() == []
    assert engine_run.hook_problems() == []
    engine_run.git("fsck", "--strict")


def test_engine_memory_written_by_the_main_turn_is_committed(engine_write_run: HeadlessRun) -> None:
    run = engine_write_run
    main = run.main_requests()
    assert len(main) == 2, run.explain()
    assert [_count(body, RECALL_TOKEN) for body in main] == [1, 1]
    written = run.memory_root / "project" / "releases.md"
    assert written.is_file(), run.explain()  # Qwen's write_file ran (auto-edit)
    assert run.result["still_running"] == [], run.explain()
    assert run.git("show", "HEAD:project/releases.md") == written.read_bytes()
    assert run.uncommitted() == [], run.explain()
    assert run.hook_problems() == []
    run.git("fsck", "--strict")


# --------------------------------------------------------------------------- companion mode


@pytest.mark.parametrize("scenario", ["agent_write_run", "extraction_run"])
def test_companion_recall_reaches_each_main_request_exactly_once(
    scenario: str, request: pytest.FixtureRequest
) -> None:
    run: HeadlessRun = request.getfixturevalue(scenario)
    assert run.result["interfaces"] == ["lo"]
    assert run.result["qwen"]["rc"] == 0, run.explain()
    assert len(run.selector_requests()) == 1, "Qwen recalls on its own in companion mode"
    main = run.main_requests()
    assert main, run.explain()
    assert [_count(body, RECALL_TOKEN) for body in main] == [1] * len(main)


def test_companion_memory_written_by_the_main_turn_is_committed(
    agent_write_run: HeadlessRun,
) -> None:
    run = agent_write_run
    written = run.memory_root / "project" / "releases.md"
    assert written.is_file(), run.explain()  # Qwen's write_file ran (auto-edit)
    assert run.result["still_running"] == [], run.explain()
    assert run.git("show", "HEAD:project/releases.md") == written.read_bytes()
    assert run.uncommitted() == [], run.explain()
    assert run.hook_problems() == []
    run.git("fsck", "--strict")


def test_companion_memory_written_by_qwens_extraction_is_committed_after_exit(
    extraction_run: HeadlessRun,
) -> None:
    run = extraction_run
    assert len(run.extraction_requests()) == 2, run.explain()  # the write, then its result
    written = run.memory_root / "project" / "staging-host.md"
    assert written.is_file(), run.explain()
    assert run.result["still_running"] == [], run.explain()
    assert run.uncommitted() == [], run.explain()
    assert run.git("show", "HEAD:project/staging-host.md") == written.read_bytes()
    assert run.hook_problems() == []
    run.git("fsck", "--strict")
