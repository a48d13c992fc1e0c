"""The real Claude Code 2.1.197, headless (``claude -p``), with qmem-git's hooks installed.

Issue 19, Tests, second bullet: engine mode (``install-hooks --agent claude --engine``:
Claude's auto-memory off, qmem-git recalls and extracts) and companion mode (Claude's
auto-memory on: a memory Claude's model writes with its Write tool is committed in Claude's
folder). Each scenario runs ``claude -p …`` once with an isolated HOME (its
``~/.claude.json`` and ``~/.claude/`` inside it; telemetry, auto-update and nonessential
traffic off), inside a network namespace that has only loopback, against the scripted
Messages API of ``headless.py`` (the only stand-in: the language model). The driver waits for
claude to exit and then for qmem-git's detached hook worker; the tests then read the requests
the model received and the memory repository (``qmem-git log --json`` and C git).

What Claude Code 2.1.197 does in a headless turn (observed with these scripts and a logging
hook; FACTS-claude-headless.md): SessionStart, UserPromptSubmit, Stop and SessionEnd fire, each
awaited; UserPromptSubmit does not fire again on a tool-result continuation; both hooks' context
reaches the model in one ``system`` message placed after the prompt. A fresh HOME needs no
onboarding or trust settings for ``-p`` with ``ANTHROPIC_API_KEY``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from real_clients import ANSWER, RECALL_TOKEN, HeadlessRun, Rules, count

from qmem_git.integrations.agents import INDEX_HEADING

PROMPT = "How do we build the zebra project? We always run the kestrel9 linter first."
# The user's own settings before install-hooks, as Claude Code writes them (2-space JSON and a
# newline): a key qmem-git must keep, a hook of the user's on an event qmem-git also hooks.
USER_SETTINGS: dict[str, Any] = {
    "permissions": {"allow": ["Bash(make test)"], "deny": []},
    "env": {"ZEBRA_NOTE": "zèbre"},
    "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true", "timeout": 5}]}]},
}
CLAUDE_ENV = {
    "ANTHROPIC_API_KEY": "sk-ant-loopback-test",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
}


@dataclasses.dataclass
class ClaudeRun(HeadlessRun):
    """One finished ``claude -p`` run."""

    client = "claude"
    driver = Path(__file__).with_name("headless.py")
    # Claude's settings.json: "before" and "installed" install-hooks
    settings: dict[str, bytes] = dataclasses.field(default_factory=dict)

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


def _claude_format(settings: dict[str, Any]) -> bytes:
    """Settings text as Claude Code writes it (``JSON.stringify(s, null, 2) + "\\n"``)."""
    return (json.dumps(settings, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _user_settings(home: Path) -> None:
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_bytes(_claude_format(USER_SETTINGS))


def run_headless(
    tmp: Path, claude: Path, args: list[str], rules: Rules | None, *install: str
) -> ClaudeRun:
    """A project with one remembered memory and the hooks installed; ``claude -p`` once
    (``rules`` None: the caller drives it)."""
    run = ClaudeRun.set_up(tmp, CLAUDE_ENV, _user_settings, "--agent", "claude", *install)
    run.settings = {"before": _claude_format(USER_SETTINGS)}
    run.settings["installed"] = run.settings_path.read_bytes()
    (tmp / "first").mkdir()
    if rules is not None:
        run.result = run.drive(claude, args, rules, tmp / "first")
    return run


def claude_where(run: ClaudeRun) -> dict[str, Any]:
    """``qmem-git --agent claude where``: Claude's own memory folder for the project."""
    return dict(json.loads(run.qmem("--agent", "claude", "where", "--json")))


def _engine_rules(project: Path) -> Rules:
    """The main turn writes a project file (a tool call, so a continuation follows)."""
    notes = {"file_path": str(project / "NOTES.txt"), "content": "zebra notes\n"}
    return [
        {"when": ["kestrel9"], "unless": ["tool_result"], "times": 1,
         "reply": {"text": "Writing notes.", "tool_uses": [{"name": "Write", "input": notes}]}},
        {"when": ["tool_result"], "reply": {"text": ANSWER}},
    ]  # fmt: skip


@pytest.fixture(scope="module")
def engine_run(claude_exe: Path, tmp_path_factory: pytest.TempPathFactory) -> ClaudeRun:
    tmp = tmp_path_factory.mktemp("claude-engine")
    project = tmp / "proj"
    args = ["-p", PROMPT, "--permission-mode", "acceptEdits"]
    return run_headless(tmp, claude_exe, args, _engine_rules(project), "--engine")


def test_engine_mode_turns_claudes_auto_memory_off(engine_run: ClaudeRun) -> None:
    run = engine_run
    assert json.loads(run.settings["installed"])["autoMemoryEnabled"] is False
    folder = claude_where(run)["memory_root"]
    assert all(count(body, folder) == 0 for body in run.model_requests()), run.explain()
    assert not Path(f"{folder}.git").exists()  # nothing of Claude's to commit


def test_engine_run_is_headless_and_offline(engine_run: ClaudeRun) -> None:
    run = engine_run
    assert run.result["interfaces"] == ["lo"]
    assert run.result["claude"]["rc"] == 0, run.explain()
    assert ANSWER in run.result["claude"]["stdout"], run.explain()
    assert (run.project / "NOTES.txt").read_text("utf-8") == "zebra notes\n", run.explain()
    assert all(body.get("stream") is True for body in run.model_requests())


def test_engine_recall_reaches_each_main_request_exactly_once(engine_run: ClaudeRun) -> None:
    requests = engine_run.model_requests()
    assert len(requests) == 2, engine_run.explain()  # the prompt, then the tool-result turn
    assert [count(body, RECALL_TOKEN) for body in requests] == [1, 1]
    assert [count(body, PROMPT) for body in requests] == [1, 1]
    # the index came at SessionStart; the first prompt's fallback for a lost one (#10373) kept out
    assert [count(body, INDEX_HEADING) for body in requests] == [1, 1]


def test_engine_extraction_is_committed_after_claude_exits(engine_run: ClaudeRun) -> None:
    run = engine_run
    assert run.result["still_running"] == [], run.explain()
    extracts = [op for op in run.operations() if op["op"] == "extract"]
    assert len(extracts) == 1, run.explain()
    added = [c["path"] for c in extracts[0]["changes"] if c["status"] == "A"]
    texts = [run.git("show", f"{extracts[0]['commit']}:{path}") for path in added]
    assert any(b"kestrel9" in text for text in texts), texts
    assert run.uncommitted() == [], run.explain()
    run.git("fsck", "--strict")


def test_engine_hook_log_shows_no_crash(engine_run: ClaudeRun) -> None:
    assert engine_run.hook_problems() == [], engine_run.explain()


# --------------------------------------------------------------------------- the next session

SECOND_PROMPT = "Which linter do we run before building zebra?"


@pytest.fixture(scope="module")
def second_session(
    claude_exe: Path, engine_run: ClaudeRun, tmp_path_factory: pytest.TempPathFactory
) -> ClaudeRun:
    """A second ``claude -p`` in the same HOME and project, after the first one's extraction."""
    assert engine_run.result["still_running"] == [], engine_run.explain()
    out = tmp_path_factory.mktemp("claude-second")
    result = engine_run.drive(claude_exe, ["-p", SECOND_PROMPT], [], out)
    return dataclasses.replace(engine_run, result=result)


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
    second_session: ClaudeRun,
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


# --------------------------------------------------------------------------- companion mode

COMPANION_PROMPT = "Remember: before building zebra we always run the kestrel9 linter."
CLAUDE_MEMORY = """---
name: zebra-linter
description: Run the kestrel9 linter before building zebra
metadata:
  type: project
---

Run the kestrel9 linter before every zebra build.

**Why:** the user said so.
**How to apply:** lint first, then build.
"""
CLAUDE_INDEX = "- [Zebra linter](zebra-linter.md) — kestrel9 before building\n"


def _companion_rules(folder: str) -> Rules:
    """The model saves a memory in Claude's folder with the Write tool, as Claude's own
    auto-memory instructions tell it to (the file, then its line in MEMORY.md)."""
    writes = [
        {
            "name": "Write",
            "input": {"file_path": f"{folder}/zebra-linter.md", "content": CLAUDE_MEMORY},
        },
        {"name": "Write", "input": {"file_path": f"{folder}/MEMORY.md", "content": CLAUDE_INDEX}},
    ]
    return [
        {"when": ["kestrel9"], "unless": ["tool_result"], "times": 1,
         "reply": {"text": "Saving that.", "tool_uses": writes}},
        {"when": ["tool_result"], "reply": {"text": "Saved."}},
    ]  # fmt: skip


@pytest.fixture(scope="module")
def companion_run(claude_exe: Path, tmp_path_factory: pytest.TempPathFactory) -> ClaudeRun:
    """``install-hooks --agent claude`` (Claude's auto-memory stays on), one ``claude -p``."""
    tmp = tmp_path_factory.mktemp("claude-companion")
    run = run_headless(tmp, claude_exe, [], None)
    where = claude_where(run)
    rules = _companion_rules(where["memory_root"])
    run.result = run.drive(claude_exe, ["-p", COMPANION_PROMPT], rules, tmp / "first")
    return dataclasses.replace(run, where={**where, "project_store": run.where})


def test_companion_claudes_folder_is_the_one_qmem_git_names(companion_run: ClaudeRun) -> None:
    """Claude's system prompt points its model at the folder ``--agent claude`` resolves."""
    run = companion_run
    assert run.result["claude"]["rc"] == 0, run.explain()
    requests = run.model_requests()
    assert requests and count(requests[0], run.where["memory_root"]) >= 1, run.explain()
    # Claude's own instructions give its memories the shape qmem-git reads (docs/integrations.md)
    assert count(requests[0], "metadata:\\n  type: user | feedback | project | reference") >= 1, (
        run.explain()
    )
    assert count(requests[0], "`- [Title](file.md) \u2014 hook`") >= 1, run.explain()
    assert run.settings_path.read_bytes() == run.settings["installed"]
    assert "autoMemoryEnabled" not in json.loads(run.settings["installed"])


def test_companion_memory_claude_wrote_is_committed_after_exit(companion_run: ClaudeRun) -> None:
    run = companion_run
    assert run.result["still_running"] == [], run.explain()
    folder = run.memory_root
    assert b"kestrel9" in (folder / "zebra-linter.md").read_bytes(), run.explain()
    log = json.loads(run.qmem("--agent", "claude", "log", "--json"))
    assert [entry["op"] for entry in log] == ["snapshot"], run.explain()
    committed = {change["path"] for change in log[0]["changes"]}
    assert committed == {"MEMORY.md", "zebra-linter.md"}, run.explain()
    assert run.git("show", "HEAD:MEMORY.md") == CLAUDE_INDEX.encode()  # Claude's, as it is
    assert (folder / "MEMORY.md").read_text("utf-8") == CLAUDE_INDEX
    assert run.uncommitted() == [], run.explain()
    run.git("fsck", "--strict")
    assert run.hook_problems() == [], run.explain()


def test_companion_extracts_nothing_into_the_project_store(companion_run: ClaudeRun) -> None:
    run = companion_run
    project_log = json.loads(run.qmem("log", "--json"))
    assert [entry["op"] for entry in project_log] == ["remember", "index"], run.explain()
    recall = json.loads(run.qmem("--agent", "claude", "recall", "kestrel9 linter", "--json"))
    assert recall["selected"] == ["zebra-linter.md"]


# --------------------------------------------------------------------------- uninstall
# Last in the file: it takes the hooks out of the HOME the runs above share.


def test_uninstall_restores_claudes_settings_byte_for_byte(engine_run: ClaudeRun) -> None:
    run = engine_run
    installed = json.loads(run.settings["installed"])
    ours = [event for event, groups in installed["hooks"].items() if "hook --agent" in str(groups)]
    assert {"SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"} <= set(ours)
    assert run.settings_path.read_bytes() == run.settings["installed"]  # claude left it alone
    run.qmem("-q", "install-hooks", "--agent", "claude", "--uninstall")
    assert run.settings_path.read_bytes() == run.settings["before"]
