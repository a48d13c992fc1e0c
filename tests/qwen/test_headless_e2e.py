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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from real_clients import ANSWER, RECALL_TOKEN, HeadlessRun, Rules, count

EXTRACTION_MARKER = "Managed memory has TWO directories"  # Qwen's background extraction
SELECTOR_TOOL = "respond_in_schema"  # Qwen's recall side query answers through this tool
EXTRACTION_SECONDS = 3.0  # how long the model takes to answer Qwen's background extraction


def _frontmatter(name: str, kind: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: {name}\ntype: {kind}\n---\n\n{body}\n"


class QwenRun(HeadlessRun):
    """One finished ``qwen -p`` run."""

    client = "qwen"
    driver = Path(__file__).with_name("headless.py")

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


def _tool_names(body: dict[str, Any]) -> list[str]:
    return [tool.get("function", {}).get("name") for tool in body.get("tools") or []]


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
) -> QwenRun:
    """Set up a project with one remembered memory and the hooks, run ``qwen -p`` once."""
    openai = {"OPENAI_API_KEY": "sk-loopback-test", "OPENAI_MODEL": "loopback-model"}
    hooks = ["--agent", "qwen", *(["--engine"] * engine)]
    run = QwenRun.set_up(tmp, openai, _qwen_settings, *hooks)
    qwen = qwen_package.parents[1] / ".bin" / "qwen"
    args = ["-p", prompt, "--approval-mode", "auto-edit"]
    run.result = run.drive(qwen, args, rules(run.memory_root, run.project), tmp)
    return run


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
def engine_run(qwen_package: Path, tmp_path_factory: pytest.TempPathFactory) -> QwenRun:
    tmp = tmp_path_factory.mktemp("engine")
    return run_headless(tmp, qwen_package, ENGINE_PROMPT, _engine_rules, engine=True)


@pytest.fixture(scope="module")
def engine_write_run(qwen_package: Path, tmp_path_factory: pytest.TempPathFactory) -> QwenRun:
    tmp = tmp_path_factory.mktemp("engine-write")
    rules = _engine_agent_write_rules
    return run_headless(tmp, qwen_package, AGENT_WRITE_PROMPT, rules, engine=True)


@pytest.fixture(scope="module")
def agent_write_run(qwen_package: Path, tmp_path_factory: pytest.TempPathFactory) -> QwenRun:
    tmp = tmp_path_factory.mktemp("companion-write")
    return run_headless(tmp, qwen_package, AGENT_WRITE_PROMPT, _agent_write_rules, engine=False)


@pytest.fixture(scope="module")
def extraction_run(qwen_package: Path, tmp_path_factory: pytest.TempPathFactory) -> QwenRun:
    tmp = tmp_path_factory.mktemp("companion-extract")
    return run_headless(tmp, qwen_package, EXTRACTION_PROMPT, _extraction_rules, engine=False)


def _assert_committed(run: QwenRun, name: str) -> None:
    """The memory file ``name`` is there and committed as it is, after every process of the run
    ended; nothing else is uncommitted, the hook log shows no crash, the repository is sound."""
    written = run.memory_root / name
    assert written.is_file(), run.explain()
    assert run.result["still_running"] == [], run.explain()
    assert run.git("show", f"HEAD:{name}") == written.read_bytes()
    assert run.uncommitted() == [], run.explain()
    assert run.hook_problems() == []
    run.git("fsck", "--strict")


# --------------------------------------------------------------------------- engine mode


def test_engine_run_is_headless_offline_and_qwen_memory_off(engine_run: QwenRun) -> None:
    assert engine_run.result["interfaces"] == ["lo"]
    assert engine_run.result["qwen"]["rc"] == 0, engine_run.explain()
    assert ANSWER in engine_run.result["qwen"]["stdout"], engine_run.explain()
    assert (engine_run.project / "NOTES.txt").read_text("utf-8") == "zebra notes\n"
    # --engine switched Qwen's own memory off: no recall side query, no extraction
    assert engine_run.selector_requests() == []
    assert engine_run.extraction_requests() == []


def test_engine_recall_reaches_each_main_request_exactly_once(engine_run: QwenRun) -> None:
    main = engine_run.main_requests()
    assert len(main) == 2, engine_run.explain()  # the prompt, then the tool-result continuation
    assert [count(body, RECALL_TOKEN) for body in main] == [1, 1]


def test_engine_extraction_is_committed_after_qwen_exits(engine_run: QwenRun) -> None:
    assert engine_run.result["still_running"] == [], engine_run.explain()
    extracts = [op for op in engine_run.operations() if op["op"] == "extract"]
    assert len(extracts) == 1, engine_run.explain()
    added = [c["path"] for c in extracts[0]["changes"] if c["status"] == "A"]
    texts = [engine_run.git("show", f"{extracts[0]['commit']}:{path}") for path in added]
    assert any(b"kestrel9" in text for text in texts), texts
    assert engine_run.uncommitted() == []
    assert engine_run.hook_problems() == []
    engine_run.git("fsck", "--strict")


def test_engine_memory_written_by_the_main_turn_is_committed(engine_write_run: QwenRun) -> None:
    run = engine_write_run
    main = run.main_requests()
    assert len(main) == 2, run.explain()
    assert [count(body, RECALL_TOKEN) for body in main] == [1, 1]
    _assert_committed(run, "project/releases.md")  # Qwen's write_file ran (auto-edit)


# --------------------------------------------------------------------------- companion mode


@pytest.mark.parametrize("scenario", ["agent_write_run", "extraction_run"])
def test_companion_recall_reaches_each_main_request_exactly_once(
    scenario: str, request: pytest.FixtureRequest
) -> None:
    run: QwenRun = request.getfixturevalue(scenario)
    assert run.result["interfaces"] == ["lo"]
    assert run.result["qwen"]["rc"] == 0, run.explain()
    assert len(run.selector_requests()) == 1, "Qwen recalls on its own in companion mode"
    main = run.main_requests()
    assert main, run.explain()
    assert [count(body, RECALL_TOKEN) for body in main] == [1] * len(main)


def test_companion_memory_written_by_the_main_turn_is_committed(
    agent_write_run: QwenRun,
) -> None:
    run = agent_write_run
    _assert_committed(run, "project/releases.md")  # Qwen's write_file ran (auto-edit)


def test_companion_memory_written_by_qwens_extraction_is_committed_after_exit(
    extraction_run: QwenRun,
) -> None:
    run = extraction_run
    assert len(run.extraction_requests()) == 2, run.explain()  # the write, then its result
    _assert_committed(run, "project/staging-host.md")
