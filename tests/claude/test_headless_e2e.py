"""The real Claude Code 2.1.197, headless (``claude -p``), with qmem-git's hooks installed.

Issue 19, Tests, second bullet (engine mode: qmem-git recalls and extracts). Each scenario runs
``claude -p …`` once with an isolated HOME (its ``~/.claude.json`` and ``~/.claude/`` inside it;
telemetry, auto-update and nonessential traffic off), inside a network namespace that has only
loopback, against the scripted Messages API of ``headless.py`` (the only stand-in: the language
model). The driver waits for claude to exit and then for qmem-git's detached hook worker; the
tests then read the requests the model received and the memory repository (``qmem-git log
--json`` and C git).

What Claude Code 2.1.197 does in a headless turn (observed with these scripts and a logging
hook; FACTS-claude-headless.md): SessionStart, UserPromptSubmit, Stop and SessionEnd fire, each
awaited; UserPromptSubmit does not fire again on a tool-result continuation; both hooks' context
reaches the model in one ``system`` message placed after the prompt. A fresh HOME needs no
onboarding or trust settings for ``-p`` with ``ANTHROPIC_API_KEY``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from qmem_git.integrations.agents import INDEX_HEADING, log_path

from .conftest import namespace_prefix

DRIVER = Path(__file__).with_name("headless.py")
RECALL_TOKEN = "quagga7"  # only in the remembered memory's body: once per recall of it
REMEMBERED = "The zebra project builds with pnpm, never npm."
PROMPT = "How do we build the zebra project? We always run the kestrel9 linter first."
ANSWER = "Use pnpm."
# The user's own settings before install-hooks, as Claude Code writes them (2-space JSON and a
# newline): a key qmem-git must keep, a hook of the user's on an event qmem-git also hooks.
USER_SETTINGS: dict[str, Any] = {
    "permissions": {"allow": ["Bash(make test)"], "deny": []},
    "env": {"ZEBRA_NOTE": "zèbre"},
    "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true", "timeout": 5}]}]},
}

Rules = list[dict[str, Any]]


@dataclass
class HeadlessRun:
    """One finished ``claude -p`` run: what the model received and where the memory lives."""

    env: dict[str, str]
    project: Path
    memory_root: Path
    state_dir: Path
    where: dict[str, Any]
    settings: dict[str, bytes]  # Claude's settings.json: "before" and "installed" install-hooks
    result: dict[str, Any]

    @property
    def settings_path(self) -> Path:
        return Path(self.env["HOME"]) / ".claude" / "settings.json"

    def model_requests(self) -> list[dict[str, Any]]:
        """The bodies of every ``POST /v1/messages`` (the main turn and its continuations)."""
        return [
            entry["body"]
            for entry in self.result["requests"]
            if entry["method"] == "POST" and entry["path"].split("?")[0] == "/v1/messages"
        ]

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
            relative = path.relative_to(self.memory_root)
            if ".git" in relative.parts:
                continue
            name = relative.as_posix()
            if name not in committed or self.git("show", f"HEAD:{name}") != path.read_bytes():
                differ.append(name)
        return differ

    def hook_log(self) -> str:
        log = Path(log_path(str(self.state_dir)))
        return log.read_text("utf-8", "replace") if log.exists() else ""

    def hook_problems(self) -> list[str]:
        """Lines of qmem-git's hook log that report a crash or a failed worker step."""
        lines = self.hook_log().splitlines()
        return [line for line in lines if "internal error" in line or " worker " in line]

    def explain(self) -> str:
        """What a failing assertion should show: claude's output, the hook log, the stragglers."""
        claude = self.result["claude"]
        return (
            f"claude exit {claude['rc']} after {claude['seconds']} s\n"
            f"stdout: {claude['stdout'][-800:]}\nstderr: {claude['stderr'][-1500:]}\n"
            f"hook log: {self.hook_log()[-1500:] or '(empty)'}\n"
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


def _env(home: Path) -> dict[str, str]:
    """Only what the run needs: nothing of the caller's HOME, CLAUDE_*, QMEM_* or git config."""
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
        "ANTHROPIC_API_KEY": "sk-ant-loopback-test",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }


def _claude_format(settings: dict[str, Any]) -> bytes:
    """Settings text as Claude Code writes it (``JSON.stringify(s, null, 2) + "\\n"``)."""
    return (json.dumps(settings, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def run_headless(tmp: Path, claude: Path, args: list[str], rules: Rules) -> HeadlessRun:
    """A project with one remembered memory and the hooks installed; ``claude -p`` once."""
    home, project = tmp / "home", tmp / "proj"
    home.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    env = _env(home)
    settings_file = home / ".claude" / "settings.json"
    settings_file.parent.mkdir()
    settings = {"before": _claude_format(USER_SETTINGS)}
    settings_file.write_bytes(settings["before"])
    _qmem(env, project, "-q", "init")
    _qmem(env, project, "-q", "remember", "--type", "project", REMEMBERED, "--why", RECALL_TOKEN)
    _qmem(env, project, "-q", "install-hooks", "--agent", "claude")
    settings["installed"] = settings_file.read_bytes()
    where = json.loads(_qmem(env, project, "where", "--json"))
    memory_root, state_dir = Path(where["memory_root"]), Path(where["state_dir"])
    run = HeadlessRun(env, project, memory_root, state_dir, where, settings, {})
    run.result = drive(run, claude, args, rules, tmp / "first")
    return run


def drive(run: HeadlessRun, claude: Path, args: list[str], rules: Rules, out: Path) -> Any:
    """One ``claude -p`` in ``run``'s HOME and project, through the driver; its result."""
    prefix = namespace_prefix()
    out.mkdir()
    spec = {
        "claude": str(claude),
        "args": args,
        "cwd": str(run.project),
        "env": run.env,
        "rules": rules,
        "settle_timeout": 40,
        "timeout": 90,
        "out": str(out / "result.json"),
    }
    (out / "spec.json").write_text(json.dumps(spec), "utf-8")
    command = [*prefix, sys.executable, str(DRIVER), str(out / "spec.json")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "result.json").read_text("utf-8"))


def _count(body: dict[str, Any], text: str) -> int:
    return json.dumps(body, ensure_ascii=False).count(text)


def _engine_rules(project: Path) -> Rules:
    """The main turn writes a project file (a tool call, so a continuation follows)."""
    notes = {"file_path": str(project / "NOTES.txt"), "content": "zebra notes\n"}
    return [
        {"when": ["kestrel9"], "unless": ["tool_result"], "times": 1,
         "reply": {"text": "Writing notes.", "tool_uses": [{"name": "Write", "input": notes}]}},
        {"when": ["tool_result"], "reply": {"text": ANSWER}},
    ]  # fmt: skip


@pytest.fixture(scope="module")
def engine_run(claude_exe: Path, tmp_path_factory: pytest.TempPathFactory) -> HeadlessRun:
    tmp = tmp_path_factory.mktemp("claude-engine")
    project = tmp / "proj"
    args = ["-p", PROMPT, "--permission-mode", "acceptEdits"]
    return run_headless(tmp, claude_exe, args, _engine_rules(project))


def test_engine_run_is_headless_and_offline(engine_run: HeadlessRun) -> None:
    run = engine_run
    assert run.result["interfaces"] == ["lo"]
    assert run.result["claude"]["rc"] == 0, run.explain()
    assert ANSWER in run.result["claude"]["stdout"], run.explain()
    assert (run.project / "NOTES.txt").read_text("utf-8") == "zebra notes\n", run.explain()
    assert all(body.get("stream") is True for body in run.model_requests())


def test_engine_recall_reaches_each_main_request_exactly_once(engine_run: HeadlessRun) -> None:
    requests = engine_run.model_requests()
    assert len(requests) == 2, engine_run.explain()  # the prompt, then the tool-result turn
    assert [_count(body, RECALL_TOKEN) for body in requests] == [1, 1]
    assert [_count(body, PROMPT) for body in requests] == [1, 1]
    # the index came at SessionStart; the first prompt's fallback for a lost one (#10373) kept out
    assert [_count(body, INDEX_HEADING) for body in requests] == [1, 1]


def test_engine_extraction_is_committed_after_claude_exits(engine_run: HeadlessRun) -> None:
    run = engine_run
    assert run.result["still_running"] == [], run.explain()
    extracts = [op for op in run.operations() if op["op"] == "extract"]
    assert len(extracts) == 1, run.explain()
    added = [c["path"] for c in extracts[0]["changes"] if c["status"] == "A"]
    texts = [run.git("show", f"{extracts[0]['commit']}:{path}") for path in added]
    assert any(b"kestrel9" in text for text in texts), texts
    assert run.uncommitted() == [], run.explain()
    run.git("fsck", "--strict")


def test_engine_hook_log_shows_no_crash(engine_run: HeadlessRun) -> None:
    assert engine_run.hook_problems() == [], engine_run.explain()


# --------------------------------------------------------------------------- the next session

SECOND_PROMPT = "Which linter do we run before building zebra?"


@pytest.fixture(scope="module")
def second_session(
    claude_exe: Path, engine_run: HeadlessRun, tmp_path_factory: pytest.TempPathFactory
) -> HeadlessRun:
    """A second ``claude -p`` in the same HOME and project, after the first one's extraction."""
    assert engine_run.result["still_running"] == [], engine_run.explain()
    out = tmp_path_factory.mktemp("claude-second")
    result = drive(engine_run, claude_exe, ["-p", SECOND_PROMPT], [], out / "run")
    return HeadlessRun(**{**engine_run.__dict__, "result": result})


def _prompt_context(body: dict[str, Any]) -> str:
    """The UserPromptSubmit hook's context as the model got it (Claude labels each hook's)."""
    label = "UserPromptSubmit hook additional context:"
    found = []
    for message in body["messages"]:
        content = message.get("content")
        parts = [{"text": content}] if isinstance(content, str) else content
        for text in (part.get("text") or "" for part in parts):
            if label in text:
                found.append(text[text.index(label) :])
    return "".join(found)


def test_next_session_recalls_what_the_first_one_extracted(
    second_session: HeadlessRun,
) -> None:
    run = second_session
    assert run.result["claude"]["rc"] == 0, run.explain()
    extracts = [op for op in run.operations() if op["op"] == "extract"]
    assert len(extracts) == 1, run.explain()  # "Which linter…" / "OK." is nothing to keep
    added = [c["path"] for c in extracts[0]["changes"] if c["status"] == "A"]
    requests = run.model_requests()
    assert len(requests) == 1, run.explain()
    context = _prompt_context(requests[0])
    assert "kestrel9" in context, run.explain()
    assert [context.count(f"({path})") for path in added] == [1] * len(added)
    assert run.result["still_running"] == [], run.explain()
    assert run.hook_problems() == [], run.explain()


# --------------------------------------------------------------------------- uninstall
# Last in the file: it takes the hooks out of the HOME the runs above share.


def test_uninstall_restores_claudes_settings_byte_for_byte(engine_run: HeadlessRun) -> None:
    run = engine_run
    installed = json.loads(run.settings["installed"])
    ours = [event for event, groups in installed["hooks"].items() if "hook --agent" in str(groups)]
    assert {"SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"} <= set(ours)
    assert run.settings_path.read_bytes() == run.settings["installed"]  # claude left it alone
    run.qmem("-q", "install-hooks", "--agent", "claude", "--uninstall")
    assert run.settings_path.read_bytes() == run.settings["before"]
