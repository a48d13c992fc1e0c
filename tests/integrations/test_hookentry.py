"""The agent hook adapter in process: event handling, session state, layout parity, hot path.

Background workers are not started here (``spawn_detached`` is replaced by a recorder); the
real processes run in test_hooks_e2e.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers_git import gitdir
from hypothesis import given
from hypothesis import strategies as st

from integrations.model_server import API_KEY, ModelServer, Reply, chat, error
from qmem_git import hookentry
from qmem_git.__main__ import main as qmem_main
from qmem_git.integrations import agents
from qmem_git.settings import build_settings

REPO_ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("click", "dulwich", "requests", "yaml", "filelock", "frontmatter", "psutil")


@pytest.fixture
def project(tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project dir with its runtime dir in tmp; the memory root does not exist yet. Claude
    Code's own auto-memory is off here, so its hooks run in engine mode on the project store
    (``test_claude_companion_*`` below turn it on)."""
    monkeypatch.setenv("QWEN_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "1")
    proj = tmp_path / "proj"
    proj.mkdir()
    return proj


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    calls: list[list[str]] = []

    def record(argv: list[str], cwd: str | None) -> int:
        calls.append(list(argv))
        return 0

    monkeypatch.setattr(agents, "spawn_detached", record)
    return calls


def layout(project: Path) -> tuple[Path, Path]:
    settings = build_settings(os.environ, project=str(project))
    return Path(settings.layout.memory_root), Path(settings.layout.state_dir)


def write_memory(root: Path, rel: str, title: str, body: str, kind: str = "project") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"---\nname: {title}\ndescription: {title}\ntype: {kind}\n---\n\n{body}\n", "utf-8"
    )


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Engine mode for Qwen Code too (its managed memory counts as off)."""
    monkeypatch.setenv("QMEM_MODE", "engine")


@pytest.fixture
def memories(project: Path) -> Path:
    root, _ = layout(project)
    write_memory(root, "project/canary.md", "Canary deploys", "Roll out canary deploys at 5%.")
    write_memory(root, "user/terse.md", "Terse replies", "User prefers terse replies.", "user")
    (root / "MEMORY.md").write_text(
        "- [Canary deploys](project/canary.md) — Canary deploys\n"
        "- [Terse replies](user/terse.md) — Terse replies\n",
        "utf-8",
    )
    return root


def payload(project: Path, event: str, **extra: object) -> bytes:
    data = {"session_id": "sess-1", "transcript_path": "", "cwd": str(project)}
    data["hook_event_name"] = event
    data.update(extra)
    return json.dumps(data).encode()


def run(
    capsys: pytest.CaptureFixture[str], argv: list[str], stdin: bytes
) -> dict[str, object] | None:
    """Run the hook in process; the parsed stdout object, or None when it printed nothing."""
    assert hookentry.main(argv, stdin) == 0
    out = capsys.readouterr().out
    if not out:
        return None
    assert out.endswith("\n") and out.count("\n") == 1, out
    value = json.loads(out)
    assert isinstance(value, dict)
    return value


def context_of(output: dict[str, object] | None, event: str) -> str:
    assert output is not None
    specific = output["hookSpecificOutput"]
    assert isinstance(specific, dict)
    assert set(output) == {"hookSpecificOutput"}
    assert specific["hookEventName"] == event
    context = specific["additionalContext"]
    assert isinstance(context, str)
    assert context.startswith(hookentry.MARKER + "\n")
    return context


def log_text(project: Path) -> str:
    _, state = layout(project)
    path = state / "hook.log"
    return path.read_text("utf-8") if path.exists() else ""


# --------------------------------------------------------------------------- constants, parsing


@pytest.mark.parametrize(
    ("argv", "expected", "problem"),
    [
        (["prompt"], {"event": "prompt"}, None),
        (["--agent", "qwen", "Stop"], {"--agent": "qwen", "event": "Stop"}, None),
        (["--agent=claude", "-q", "session-end"], {"--agent": "claude", "event": "session-end"},
         None),
        (["--project", "/p", "--memory-dir", "/m", "stop"],
         {"--project": "/p", "--memory-dir": "/m", "event": "stop"}, None),
        (["--agent", "gemini", "stop"], None, "unknown agent"),
        (["nonsense"], None, "unknown event"),
        (["stop", "extra"], None, "unexpected argument"),
        (["--frobnicate", "stop"], None, "unexpected argument"),
    ],
)  # fmt: skip
def test_parse_args(argv: list[str], expected: dict[str, str] | None, problem: str | None) -> None:
    opts, found = hookentry.parse_args(argv)
    if problem is None:
        assert found is None and opts == expected
    else:
        assert found is not None and problem in found


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text() | st.floats(allow_nan=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(JSON_VALUES, st.booleans())
def test_loads_agrees_with_json(value: object, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, indent=1 if ascii_only else None)
    assert hookentry.loads(f" \n{text}\r\n") == json.loads(text)


@given(st.text())
def test_dumps_string_is_json(value: str) -> None:
    assert json.loads(hookentry.dumps_string(value)) == value


@pytest.mark.parametrize(
    "raw", [b"", b"   ", b"garbage", b"[1, 2]", b'{"a": 1} trailing', b"\xff\xfe{"]
)
def test_parse_payload_rejects_non_objects(raw: bytes) -> None:
    assert hookentry.parse_payload(raw) is None


def test_parse_payload_accepts_a_bom() -> None:
    assert hookentry.parse_payload('\ufeff{"a": 1}'.encode()) == {"a": 1}


# --------------------------------------------------------------------------- layout parity


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"QWEN_RUNTIME_DIR": "rt"},
        {"QWEN_RUNTIME_DIR": "~/rt", "QWEN_CODE_MEMORY_BASE_DIR": "~/base"},
        {"QWEN_CODE_MEMORY_LOCAL": "1"},
        {"QWEN_CODE_MEMORY_LOCAL": "0", "QWEN_CODE_MEMORY_BASE_DIR": "/abs/base"},
    ],
)
@pytest.mark.parametrize("nested", [False, True])
def test_memory_layout_matches_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], nested: bool
) -> None:
    home = tmp_path / "home dir"
    repo = tmp_path / "my_proj.v2 ☃"
    gitdir(repo).mkdir(parents=True)
    project = repo / "sub" / "pkg" if nested else repo
    project.mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(tmp_path)
    full = {"HOME": str(home), **env}
    expected = build_settings(full, project=str(project)).layout
    got = hookentry.memory_layout(str(project), None, full, str(home))
    assert got == (expected.memory_root, expected.state_dir)


def test_memory_dir_layout_matches_settings(tmp_path: Path) -> None:
    root = str(tmp_path / "mem")
    expected = build_settings({"HOME": str(tmp_path)}, memory_dir=root).layout
    assert hookentry.memory_layout("/x", root, {}, str(tmp_path)) == (
        expected.memory_root,
        expected.state_dir,
    )


# --------------------------------------------------------------------------- prompt


def test_first_prompt_injects_recall_and_index_for_claude(
    capsys: pytest.CaptureFixture[str], project: Path, memories: Path
) -> None:
    data = payload(project, "UserPromptSubmit", prompt="how do canary deploys roll out?")
    out = run(capsys, ["--agent", "claude", "prompt"], data)
    context = context_of(out, "UserPromptSubmit")
    assert "## Memory index" in context  # SessionStart was never delivered (#10373)
    assert "## Relevant memory" in context
    assert "Roll out canary deploys at 5%." in context
    assert context.count(hookentry.MARKER) == 1


def test_no_recall_for_continuations_until_the_next_turn(
    capsys: pytest.CaptureFixture[str], project: Path, memories: Path, spawned: list[list[str]]
) -> None:
    prompt = payload(project, "UserPromptSubmit", prompt="canary deploys?")
    assert (
        run(capsys, ["--agent", "claude", "session-start"], payload(project, "SessionStart"))
        is not None
    )
    first = context_of(run(capsys, ["--agent", "claude", "prompt"], prompt), "UserPromptSubmit")
    assert "## Memory index" not in first  # SessionStart showed it already
    assert run(capsys, ["--agent", "claude", "prompt"], prompt) is None  # a continuation
    run(capsys, ["--agent", "claude", "stop"], payload(project, "Stop", stop_hook_active=False))
    assert run(capsys, ["--agent", "claude", "prompt"], prompt) is not None


def test_submitted_prompt_marks_a_user_turn_and_is_the_query(
    capsys: pytest.CaptureFixture[str], project: Path, memories: Path
) -> None:
    state = {"awaiting": False, "offset": 0, "mode": "engine"}  # as SessionStart decided
    hookentry.write_session(str(layout(project)[1]), "sess-1", state)
    continuation = payload(project, "UserPromptSubmit", prompt="canary deploys")
    assert run(capsys, ["--agent", "qwen", "prompt"], continuation) is None
    turn = payload(
        project,
        "UserPromptSubmit",
        prompt="expanded text about nothing",
        submitted_prompt="canary?",
    )
    context = context_of(run(capsys, ["--agent", "qwen", "prompt"], turn), "UserPromptSubmit")
    assert "Canary deploys" in context
    assert "## Memory index" not in context  # Qwen loads its own MEMORY.md


def test_nothing_relevant_prints_nothing(
    capsys: pytest.CaptureFixture[str], project: Path, memories: Path
) -> None:
    data = payload(project, "UserPromptSubmit", prompt="zebra quantum", submitted_prompt="zebra")
    assert run(capsys, ["--agent", "qwen", "prompt"], data) is None


def test_no_memory_folder_means_no_output_and_no_files(
    capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    assert run(capsys, ["prompt"], payload(project, "UserPromptSubmit", prompt="hi")) is None
    assert not layout(project)[1].exists()


def test_our_marker_never_comes_back(
    capsys: pytest.CaptureFixture[str], project: Path, memories: Path, engine: None
) -> None:
    write_memory(memories, "project/echo.md", "Canary echo", f"{hookentry.MARKER} canary text")
    prompt = f"canary?\n\n{hookentry.MARKER}\n## Relevant memory\nzebra"
    data = payload(project, "UserPromptSubmit", prompt=prompt, submitted_prompt=prompt)
    context = context_of(run(capsys, ["--agent", "qwen", "prompt"], data), "UserPromptSubmit")
    assert context.count(hookentry.MARKER) == 1
    assert "Canary" in context


def test_context_is_capped(
    capsys: pytest.CaptureFixture[str], project: Path, memories: Path, engine: None
) -> None:
    for i in range(5):
        write_memory(memories, f"project/big{i}.md", f"Canary big {i}", "canary rollout " * 600)
    data = payload(
        project, "UserPromptSubmit", prompt="canary rollout", submitted_prompt="x canary"
    )
    context = context_of(run(capsys, ["--agent", "qwen", "prompt"], data), "UserPromptSubmit")
    assert len(context.encode()) <= hookentry.CONTEXT_CAP_BYTES


def test_recall_telemetry_has_no_query_text(
    capsys: pytest.CaptureFixture[str],
    project: Path,
    memories: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("QMEM_TELEMETRY", "1")
    run(capsys, ["prompt"], payload(project, "UserPromptSubmit", prompt="canary secretword"))
    lines = (layout(project)[1] / "telemetry.jsonl").read_text().splitlines()
    event = json.loads(lines[-1])
    assert event["event"] == "qwen-code.memory.recall"
    assert event["query_length"] == len("canary secretword")
    assert "secretword" not in lines[-1]


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelServer]:
    """A chat-completions server on 127.0.0.1 configured through the environment."""
    with ModelServer() as server:
        monkeypatch.setenv("QMEM_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("QMEM_LLM_MODEL", "qwen-test")
        monkeypatch.setenv("DASHSCOPE_API_KEY", API_KEY)
        monkeypatch.setenv("QMEM_LLM_TIMEOUT", "1")
        monkeypatch.setenv("QMEM_TELEMETRY", "1")
        yield server


def last_recall_event(project: Path) -> dict[str, object]:
    lines = (layout(project)[1] / "telemetry.jsonl").read_text().splitlines()
    event = json.loads(lines[-1])
    assert isinstance(event, dict) and event["event"] == "qwen-code.memory.recall"
    return event


def test_a_configured_model_chooses_what_the_prompt_hook_recalls(
    capsys: pytest.CaptureFixture[str],
    project: Path,
    memories: Path,
    model: ModelServer,
    engine: None,
) -> None:
    """Spec §10.1 step 3: the model's choice wins, even over a word match."""
    model.script(chat({"selected_memories": ["user/terse.md"]}))
    data = payload(project, "UserPromptSubmit", prompt="how do canary deploys roll out?")
    context = context_of(run(capsys, ["--agent", "qwen", "prompt"], data), "UserPromptSubmit")
    assert "User prefers terse replies." in context and "Roll out canary" not in context
    assert "canary deploys roll out" in model.requests[0].message("user")
    assert last_recall_event(project)["strategy"] == "model"
    assert API_KEY not in log_text(project)


@pytest.mark.parametrize("reply", [error(500, "down"), chat("not json"), chat({}, delay=3.0)])
def test_a_failing_model_costs_one_short_attempt_then_words_decide(
    capsys: pytest.CaptureFixture[str],
    project: Path,
    memories: Path,
    model: ModelServer,
    reply: Reply,
    engine: None,
) -> None:
    model.script(reply, chat({"selected_memories": ["user/terse.md"]}))
    data = payload(project, "UserPromptSubmit", prompt="how do canary deploys roll out?")
    started = time.monotonic()
    context = context_of(run(capsys, ["--agent", "qwen", "prompt"], data), "UserPromptSubmit")
    assert time.monotonic() - started < 2.5  # QMEM_LLM_TIMEOUT=1: no retry, no 3 s wait
    assert "Roll out canary deploys at 5%." in context
    assert len(model.requests) == 1
    assert last_recall_event(project)["strategy"] == "heuristic"
    assert "used word matching" in log_text(project)
    assert "canary" not in log_text(project)


# --------------------------------------------------------------------------- session start


def test_session_start_in_companion_mode_injects_nothing(
    capsys: pytest.CaptureFixture[str], project: Path, memories: Path
) -> None:
    assert (
        run(capsys, ["--agent", "qwen", "SessionStart"], payload(project, "SessionStart")) is None
    )
    state = hookentry.read_session(str(layout(project)[1]), "sess-1")
    assert state == {"awaiting": True, "mode": "companion"}


def test_companion_mode_is_decided_once_and_the_prompt_hook_recalls_nothing(
    capsys: pytest.CaptureFixture[str], project: Path, memories: Path
) -> None:
    """Qwen Code 0.24 recalls before each prompt itself: no memory may reach the model twice.
    The mode SessionStart decided holds for the session (the prompt hook reads no settings)."""
    run(capsys, ["--agent", "qwen", "SessionStart"], payload(project, "SessionStart"))
    (project / ".qwen").mkdir()
    (project / ".qwen" / "settings.json").write_text(
        '{"memory": {"enableManagedAutoMemory": false}}'
    )
    data = payload(project, "UserPromptSubmit", prompt="canary?", submitted_prompt="canary?")
    assert run(capsys, ["--agent", "qwen", "prompt"], data) is None
    other = payload(project, "UserPromptSubmit", prompt="canary?", submitted_prompt="canary?")
    other = other.replace(b'"sess-1"', b'"sess-2"')  # a session SessionStart never announced
    assert "Canary deploys" in context_of(
        run(capsys, ["--agent", "qwen", "prompt"], other), "UserPromptSubmit"
    )
    state = hookentry.read_session(str(layout(project)[1]), "sess-2")
    assert state == {"awaiting": False, "mode": "engine"}  # decided once, for its next prompts


def test_the_prompt_hooks_mode_fallback_reads_settings_without_the_settings_module(
    project: Path, memories: Path
) -> None:
    """No session file (hooks installed mid-session): Qwen Code's setting is read with the
    JSON scanner the hook already has, not hooksettings (json, dataclasses, shlex ...)."""
    (project / ".qwen").mkdir()
    (project / ".qwen" / "settings.json").write_text(
        '{\n  // qmem-git extracts\n  "memory": {"enableManagedAutoMemory": false,},\n}\n'
    )
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from qmem_git.hookentry import main; "
        "main(['--agent', 'qwen', 'prompt']); "
        "print('hooksettings' in sys.modules, 'json' in sys.modules, file=sys.stderr)"
    )
    data = payload(project, "UserPromptSubmit", prompt="canary?", submitted_prompt="canary?")
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, str(REPO_ROOT)],
        input=data,
        capture_output=True,
        env={**os.environ},
        check=True,
    )
    assert done.stderr.decode().split() == ["False", "False"]
    assert b"Canary deploys" in done.stdout  # engine mode: recalled


def test_session_start_drops_week_old_session_files(
    capsys: pytest.CaptureFixture[str], project: Path, memories: Path
) -> None:
    state_dir = str(layout(project)[1])
    for name in ("old", "recent"):
        hookentry.write_session(state_dir, name, {"awaiting": False})
    old = Path(hookentry.session_file(state_dir, "old"))
    stale = time.time() - hookentry.STALE_SESSION_SECONDS - 60
    os.utime(old, (stale, stale))
    run(capsys, ["--agent", "qwen", "SessionStart"], payload(project, "SessionStart"))
    assert not old.exists()
    assert hookentry.read_session(state_dir, "recent") == {"awaiting": False}
    assert hookentry.read_session(state_dir, "sess-1") is not None


def test_session_start_in_engine_mode_shows_the_index(
    capsys: pytest.CaptureFixture[str], project: Path, memories: Path
) -> None:
    (project / ".qwen").mkdir()
    (project / ".qwen" / "settings.json").write_text(
        '{\n  // qmem-git extracts\n  "memory": {"enableManagedAutoMemory": false,},\n}\n'
    )
    out = run(capsys, ["--agent", "qwen", "session-start"], payload(project, "SessionStart"))
    context = context_of(out, "SessionStart")
    assert "- [Canary deploys](project/canary.md)" in context


def test_a_non_utf8_settings_file_is_logged_and_the_hook_keeps_working(
    capsys: pytest.CaptureFixture[str], project: Path, memories: Path, isolated_home: Path
) -> None:
    """The project's file cannot be read: its setting counts as unset, the user's decides."""
    (project / ".qwen").mkdir()
    (project / ".qwen" / "settings.json").write_bytes(b'{"ui":{"theme":"caf\xe9"}}')
    (isolated_home / ".qwen").mkdir(exist_ok=True)
    (isolated_home / ".qwen" / "settings.json").write_text(
        '{"memory": {"enableManagedAutoMemory": false}}'
    )
    out = run(capsys, ["--agent", "qwen", "session-start"], payload(project, "SessionStart"))
    assert "- [Canary deploys](project/canary.md)" in context_of(out, "SessionStart")
    log = log_text(project)
    assert "settings.json: not UTF-8 text (byte 0xe9 at offset 19)" in log
    assert "internal error" not in log


def test_detect_mode_reports_unreadable_settings(tmp_path: Path) -> None:
    (tmp_path / ".qwen").mkdir()
    (tmp_path / ".qwen" / "settings.json").write_text("{ broken")
    heard: list[str] = []
    assert agents.detect_mode("qwen", {}, str(tmp_path), str(tmp_path / "h"), heard.append) == (
        "companion"
    )
    assert len(heard) == 1 and "not valid JSON" in heard[0]


# --------------------------------------------------------------------------- background events


def transcript(project: Path, name: str = "t.jsonl") -> Path:
    path = project / name
    path.write_text((REPO_ROOT / "tests/fixtures/hooks/qwen-transcript.jsonl").read_text())
    return path


def steps_of(argv: list[str]) -> list[list[str]]:
    assert argv[:3] == [sys.executable, "-m", "qmem_git.integrations.agents"]
    steps = json.loads(argv[5])
    assert isinstance(steps, list)
    return steps


def test_stop_with_a_memory_dir_not_made_yet_makes_it_for_the_worker(
    capsys: pytest.CaptureFixture[str], project: Path, spawned: list[list[str]], tmp_path: Path
) -> None:
    """The worker's qmem-git commands refuse a missing --memory-dir (exit 2); the hook's own
    store is made on first use, as the agent cannot be asked to run init."""
    memory = tmp_path / "fresh" / "memory"
    path = transcript(project)
    data = payload(project, "Stop", transcript_path=str(path), stop_hook_active=False)
    argv = ["--agent", "claude", "--memory-dir", str(memory), "stop"]
    assert run(capsys, argv, data) is None
    assert len(spawned) == 1 and memory.is_dir()
    scope = ["--project", str(project), "--memory-dir", str(memory)]
    assert steps_of(spawned[0])[0][:4] == scope


def watch_of(argv: list[str]) -> dict[str, object]:
    """The watcher settings a worker is started with (after its steps)."""
    assert len(argv) == 7
    watch = json.loads(argv[6])
    assert isinstance(watch, dict)
    return watch


def test_stop_starts_an_extraction_once_per_new_content(
    capsys: pytest.CaptureFixture[str], project: Path, memories: Path, spawned: list[list[str]]
) -> None:
    path = transcript(project)
    data = payload(project, "Stop", transcript_path=str(path), stop_hook_active=False)
    assert run(capsys, ["--agent", "claude", "stop"], data) is None
    assert run(capsys, ["--agent", "claude", "stop"], data) is None  # nothing new
    extract = ["extract", "--transcript", str(path), "--session-id", "sess-1"]
    assert [steps_of(argv) for argv in spawned] == [
        [["--project", str(project), *extract]],
        [],  # no watcher holds the lock here (the recorder starts none): only one is started
    ]
    assert spawned[0][4] == str(agents.CLAUDE_FLUSH_DELAY_S)
    with path.open("a") as handle:
        handle.write("\n")
    run(capsys, ["--agent", "claude", "stop"], data)
    assert len(steps_of(spawned[2])) == 1


def test_stop_records_the_session_for_the_watcher(
    capsys: pytest.CaptureFixture[str],
    project: Path,
    memories: Path,
    spawned: list[list[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("QMEM_WATCH_QUIET", "0.5")
    monkeypatch.setenv("QMEM_WATCH_GRACE", "nonsense")  # the default instead
    data = payload(project, "Stop", stop_hook_active=False)
    assert run(capsys, ["--agent", "qwen", "stop"], data) is None
    root, state_dir = layout(project)
    state = hookentry.read_session(str(state_dir), "sess-1")
    assert state is not None
    assert state["mode"] == "companion" and state["ended"] is False
    assert state["agent_pid"] == agents.agent_process(os.getppid())  # run in process here
    assert state["scope"] == ["--project", str(project)]
    assert steps_of(spawned[0]) == []  # companion mode: the watcher snapshots, nothing else
    watch = watch_of(spawned[0])
    assert watch["memory_root"] == str(root) and watch["companion"] is True
    assert watch["sessions_dir"] == str(state_dir / "hooks")
    assert (watch["quiet"], watch["grace"]) == (0.5, 5.0)


def test_stop_hook_active_does_nothing(
    capsys: pytest.CaptureFixture[str], project: Path, memories: Path, spawned: list[list[str]]
) -> None:
    data = payload(project, "Stop", transcript_path=str(transcript(project)), stop_hook_active=True)
    assert run(capsys, ["--agent", "claude", "stop"], data) is None
    assert spawned == []
    assert hookentry.read_session(str(layout(project)[1]), "sess-1") is None


def test_session_end_hands_the_end_to_the_watcher(
    capsys: pytest.CaptureFixture[str],
    project: Path,
    memories: Path,
    spawned: list[list[str]],
    engine: None,
) -> None:
    state_dir = str(layout(project)[1])
    hookentry.write_session(state_dir, "sess-1", {"awaiting": True, "offset": 0})
    path = transcript(project)
    data = payload(project, "SessionEnd", transcript_path=str(path))
    run(capsys, ["--agent", "qwen", "session-end"], data)
    assert steps_of(spawned[0]) == []  # the watcher runs the end steps, once
    state = hookentry.read_session(state_dir, "sess-1")
    assert state is not None and state["ended"] is True and state["mode"] == "engine"
    assert state["transcript"] == str(path) and state["session"] == "sess-1"


def test_session_end_without_a_session_id_runs_the_end_steps_itself(
    capsys: pytest.CaptureFixture[str],
    project: Path,
    memories: Path,
    spawned: list[list[str]],
    engine: None,
) -> None:
    path = transcript(project)
    data = json.loads(payload(project, "SessionEnd", transcript_path=str(path)))
    del data["session_id"]
    run(capsys, ["--agent", "qwen", "session-end"], json.dumps(data).encode())
    base = ["--project", str(project)]
    assert steps_of(spawned[0]) == [
        [*base, "extract", "--transcript", str(path)],
        [*base, "dream", "--transcripts-dir", str(path.parent)],
    ]


def test_empty_transcript_path_is_found_in_the_qwen_chats_dir(
    capsys: pytest.CaptureFixture[str],
    project: Path,
    memories: Path,
    spawned: list[list[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("QMEM_MODE", "engine")
    chats = Path(build_settings(os.environ, project=str(project)).chats_dir)
    chats.mkdir(parents=True)
    path = transcript(project)
    path.rename(chats / "sess-1.jsonl")
    run(capsys, ["--agent", "qwen", "pre-compact"], payload(project, "PreCompact"))
    assert steps_of(spawned[0])[0][3:5] == ["--transcript", str(chats / "sess-1.jsonl")]


def test_empty_transcript_path_is_found_in_claude_projects(
    capsys: pytest.CaptureFixture[str],
    project: Path,
    memories: Path,
    spawned: list[list[str]],
    isolated_home: Path,
) -> None:
    folder = isolated_home / ".claude" / "projects" / "-some-where"
    folder.mkdir(parents=True)
    transcript(project).rename(folder / "sess-1.jsonl")
    run(capsys, ["--agent", "claude", "stop"], payload(project, "Stop"))
    assert steps_of(spawned[0])[0][4] == str(folder / "sess-1.jsonl")


def test_missing_transcript_is_logged(
    capsys: pytest.CaptureFixture[str], project: Path, memories: Path, spawned: list[list[str]]
) -> None:
    run(capsys, ["--agent", "claude", "stop"], payload(project, "Stop"))
    assert [steps_of(argv) for argv in spawned] == [[]]  # only the watcher, for the session end
    assert "no transcript found" in log_text(project)


# --------------------------------------------------------------------------- failures


@pytest.mark.parametrize("stdin", [b"", b"not json", b"[]", b'{"cwd": 1}'])
def test_garbage_input_prints_nothing_and_logs(
    capsys: pytest.CaptureFixture[str],
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    stdin: bytes,
) -> None:
    monkeypatch.chdir(project)
    assert run(capsys, ["--agent", "claude", "prompt"], stdin) is None
    if stdin == b'{"cwd": 1}':
        return  # an object without usable fields: a prompt with nothing to recall
    assert "ignored: unreadable or empty payload" in log_text(project)


def test_unknown_event_is_logged_without_prompt_text(
    capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    data = payload(project, "Notification", prompt="top secret words")
    assert run(capsys, ["--agent", "claude", "notification"], data) is None
    text = log_text(project)
    assert "unknown event 'notification'" in text
    assert "top secret" not in text


def test_event_name_may_come_from_the_payload(
    capsys: pytest.CaptureFixture[str], project: Path, memories: Path, engine: None
) -> None:
    data = payload(project, "UserPromptSubmit", prompt="canary?", submitted_prompt="canary?")
    assert run(capsys, ["--agent", "qwen"], data) is not None


def test_a_crash_is_logged_and_exits_zero(
    capsys: pytest.CaptureFixture[str], project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(hook: hookentry.Hook, env: object) -> None:
        raise RuntimeError("kaput")

    monkeypatch.setitem(hookentry.HANDLERS, "Stop", boom)
    assert run(capsys, ["stop"], payload(project, "Stop")) is None
    assert "internal error RuntimeError: kaput at test_hookentry.py" in log_text(project)


def test_log_is_capped(tmp_path: Path) -> None:
    path = str(tmp_path / "hook.log")
    for _ in range(40):
        agents.append_log(path, "x" * 100, cap=1000)
    assert os.path.getsize(path) <= 1000
    assert os.path.getsize(path + ".1") <= 1000


def test_main_dispatches_hook_with_global_options(
    capsys: pytest.CaptureFixture[str],
    project: Path,
    memories: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    other = project.parent / "elsewhere"
    other.mkdir()
    data = json.dumps({"session_id": "s", "cwd": str(other), "prompt": "canary?"}).encode()
    monkeypatch.setattr(sys, "stdin", _Stdin(data))
    assert qmem_main(["--project", str(project), "hook", "--agent", "claude", "prompt"]) == 0
    assert "Canary deploys" in capsys.readouterr().out


class _Stdin:
    def __init__(self, data: bytes) -> None:
        import io

        self.buffer = io.BytesIO(data)

    def isatty(self) -> bool:
        return False


# --------------------------------------------------------------------------- worker, modes


def test_worker_logs_a_failing_step(tmp_path: Path) -> None:
    log = tmp_path / "hook.log"
    steps = [["-q", "--memory-dir", str(tmp_path / "m"), "no-such-command"]]
    code = agents.worker_main([str(log), "0", json.dumps(steps)])
    assert code == 2
    assert "worker no-such-command: exit 2:" in log.read_text()


def test_worker_logs_the_warnings_of_a_step_that_succeeds(tmp_path: Path) -> None:
    """A memory holding a credential is left out of the snapshot, which exits 0: its warning
    still reaches the hook log."""
    memory = tmp_path / "memory"
    memory.mkdir()
    scope = ["--memory-dir", str(memory)]
    subprocess.run([sys.executable, "-m", "qmem_git", *scope, "init"], check=True)
    token = "ghp_" + "a1B2c3D4e5" * 3 + "abcdef"
    write_memory(memory, "project/token.md", "Deploy token", f"The deploy token is {token}.")
    log = tmp_path / "hook.log"
    assert agents.worker_main([str(log), "0", json.dumps([[*scope, "snapshot"]])]) == 0
    text = log.read_text()
    assert "worker snapshot: warning: project/token.md" in text, text
    assert token not in text


def test_worker_names_every_step_by_its_command() -> None:
    scope = ["--project", "/p", "--memory-dir", "/m"]
    steps = agents.worker_steps("SessionEnd", agents.ENGINE, scope, "/t.jsonl", "s1", sync=True)
    assert [agents.command_name(step) for step in steps] == ["extract", "dream", "sync"]
    companion = agents.worker_steps("SessionEnd", agents.COMPANION, scope, None, "s1")
    assert [agents.command_name(step) for step in companion] == ["snapshot"]
    assert agents.command_name(["-q", "--project", "/p"]) == "step"


@pytest.mark.parametrize(
    ("agent", "env", "project_settings", "user_settings", "expected"),
    [
        ("claude", {}, None, None, "companion"),
        ("claude", {"CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1"}, None, None, "engine"),
        ("claude", {"CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1", "QMEM_MODE": "companion"}, None,
         None, "companion"),
        ("qwen", {}, None, None, "companion"),
        ("qwen", {"QMEM_MODE": "engine"}, None, None, "engine"),
        ("qwen", {}, None, '{"memory": {"enableManagedAutoMemory": false}}', "engine"),
        ("qwen", {}, '{"memory": {"enableManagedAutoMemory": true}}',
         '{"memory": {"enableManagedAutoMemory": false}}', "companion"),
        ("qwen", {}, "{ broken", '{"memory.enableManagedAutoMemory": false}', "engine"),
    ],
)  # fmt: skip
def test_detect_mode(
    tmp_path: Path,
    agent: str,
    env: dict[str, str],
    project_settings: str | None,
    user_settings: str | None,
    expected: str,
) -> None:
    home, proj = agent_settings(tmp_path, ".qwen", project_settings, user_settings)
    assert agents.detect_mode(agent, env, str(proj), str(home)) == expected


def agent_settings(
    tmp_path: Path, folder: str, project_settings: str | None, user_settings: str | None
) -> tuple[Path, Path]:
    """(home, project) with the agent's settings.json in ``folder`` of each, where given."""
    home, proj = tmp_path / "home", tmp_path / "proj"
    for base, text in ((proj, project_settings), (home, user_settings)):
        if text is not None:
            (base / folder).mkdir(parents=True)
            (base / folder / "settings.json").write_text(text)
    return home, proj


@pytest.mark.parametrize(
    ("env", "project_settings", "user_settings", "expected"),
    [
        ({}, None, '{"autoMemoryEnabled": false}', "engine"),
        ({}, '{"autoMemoryEnabled": true}', '{"autoMemoryEnabled": false}', "companion"),
        ({"CLAUDE_CODE_DISABLE_AUTO_MEMORY": "0"}, None, '{"autoMemoryEnabled": false}',
         "companion"),
        ({"CLAUDE_CODE_DISABLE_AUTO_MEMORY": "true"}, None, None, "engine"),
        ({"QMEM_MODE": "engine"}, None, None, "engine"),
    ],
)  # fmt: skip
def test_detect_mode_follows_claudes_auto_memory_switch(
    tmp_path: Path,
    env: dict[str, str],
    project_settings: str | None,
    user_settings: str | None,
    expected: str,
) -> None:
    home, proj = agent_settings(tmp_path, ".claude", project_settings, user_settings)
    assert agents.detect_mode("claude", env, str(proj), str(home)) == expected


def test_detect_agent() -> None:
    assert hookentry.detect_agent({"QWEN_PROJECT_DIR": "/p"}, "") == "qwen"
    assert hookentry.detect_agent({}, "/home/u/.qwen/projects/x/chats/s.jsonl") == "qwen"
    assert hookentry.detect_agent({}, "/home/u/.claude/projects/x/s.jsonl") == "claude"
    assert hookentry.detect_agent({"CLAUDE_PROJECT_DIR": "/p"}, "") == "claude"


# --------------------------------------------------------------------------- hot path


def test_prompt_hook_keeps_heavy_and_slow_modules_out(project: Path, memories: Path) -> None:
    """ARCHITECTURE §6: the prompt hook loads neither heavy packages nor json/re/dataclasses."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from qmem_git.hookentry import main; "
        "main(['--agent', 'claude', 'prompt']); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in sys.argv[2].split(',')), "
        "file=sys.stderr)"
    )
    watched = ",".join((*HEAVY, "json", "re", "dataclasses", "typing", "socket", "subprocess"))
    data = payload(project, "UserPromptSubmit", prompt="canary deploys?")
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, str(REPO_ROOT), watched],
        input=data,
        capture_output=True,
        env={**os.environ},
        check=True,
    )
    assert done.stderr.decode().strip() == "[]"
    assert b"Canary deploys" in done.stdout


def test_a_payload_without_session_id_keeps_no_state(
    capsys: pytest.CaptureFixture[str], project: Path, memories: Path, spawned: list[list[str]]
) -> None:
    data = json.dumps({"cwd": str(project), "prompt": "canary?"}).encode()
    assert run(capsys, ["prompt"], data) is not None
    assert run(capsys, ["prompt"], data) is not None  # no state to tell turns apart: recall
    assert not (layout(project)[1] / "hooks").exists()


def test_session_file_names_are_safe(tmp_path: Path) -> None:
    state = str(tmp_path)
    assert hookentry.session_file(state, "../../etc/passwd") == f"{state}/hooks/_.._etc_passwd.json"
    assert hookentry.session_file(state, "...") == f"{state}/hooks/_.json"


def test_hook_help_falls_through_to_click(capsys: pytest.CaptureFixture[str]) -> None:
    from qmem_git import hookentry as entry

    called: list[list[str]] = []
    original = entry.main
    try:
        entry.main = lambda argv, stdin=None: called.append(argv) or 0  # type: ignore[assignment]
        qmem_main(["hook", "--help"])
    finally:
        entry.main = original
    assert called == []  # click answered (or reported the command) instead


def test_marker_matches_the_transcript_reader() -> None:
    from qmem_git.integrations import transcripts

    assert hookentry.MARKER == transcripts.RECALL_MARKER


# --------------------------------------------------------------------------- a misbehaving model


_PEAK_REPORTER = (
    "import sys\n"
    "from qmem_git.__main__ import main\n"
    "code = main(sys.argv[1:])\n"
    "with open('/proc/self/status') as status:\n"
    "    peak = [line.split()[1] for line in status if line.startswith('VmHWM:')]\n"
    "sys.stderr.write(f'peak-kib={peak[0] if peak else 0}\\n')\n"
    "sys.exit(code)\n"
)


def run_hook_process(project: Path) -> tuple[int, bytes, float, int]:
    """The prompt hook as a real process: (exit code, stdout, seconds, peak RSS in KiB).

    The peak is the process's own VmHWM (Linux): the rusage of a child also counts the memory
    of the parent it was forked from, which is the whole test run here.
    """
    data = payload(project, "UserPromptSubmit", prompt="how do canary deploys roll out?")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_REPORTER, "hook", "--agent", "claude", "prompt"],
        input=data,
        capture_output=True,
        env={**os.environ},
        cwd=project,
        timeout=120,
        check=False,
    )
    seconds = time.monotonic() - started
    peak = [line for line in done.stderr.decode().splitlines() if line.startswith("peak-kib=")]
    return done.returncode, done.stdout, seconds, int(peak[-1].split("=")[1]) if peak else 0


def test_a_trickling_model_cannot_hold_the_prompt_hook(
    project: Path, memories: Path, model: ModelServer
) -> None:
    """One byte every 0.2 s never trips a 1 s read timeout; the hook's deadline (2 + 1 s) does."""
    model.script(chat({"selected_memories": ["user/terse.md"]}, trickle=0.2))  # ~60 s in all
    code, out, seconds, _ = run_hook_process(project)
    assert code == 0
    assert seconds < 6
    assert b"Roll out canary deploys at 5%." in out  # word matching answered instead
    assert "used word matching" in log_text(project)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads VmHWM (Linux)")
def test_a_huge_model_answer_does_not_blow_up_the_prompt_hook(
    project: Path, memories: Path, model: ModelServer
) -> None:
    model.script(chat({"selected_memories": []}, padding=256 * 1024 * 1024, content_length=False))
    code, out, _, peak_kib = run_hook_process(project)
    assert code == 0
    assert 0 < peak_kib < 120 * 1024, f"peak RSS {peak_kib // 1024} MiB"  # ~45 MiB; was > 500
    assert b"Roll out canary deploys at 5%." in out  # the answer was refused: words decided


def test_the_session_end_dream_counts_the_agents_own_transcripts(tmp_path: Path) -> None:
    """Claude Code keeps transcripts in ~/.claude/projects/<p>/, not in Qwen Code's chats
    folder: the worker's dream counts the folder of the session's transcript."""
    transcripts = tmp_path / "claude" / "projects" / "-p"
    steps = agents.worker_steps(
        "SessionEnd", agents.ENGINE, [], str(transcripts / "s1.jsonl"), "s1"
    )
    dream = next(step for step in steps if "dream" in step)
    assert dream[dream.index("--transcripts-dir") + 1] == str(transcripts)
    memory = tmp_path / "memory"
    memory.mkdir()  # --memory-dir must exist
    transcripts.mkdir(parents=True)
    for number in range(6):
        (transcripts / f"{number:08d}-0000-4000-8000-000000000000.jsonl").write_text("{}\n")
    base = [sys.executable, "-m", "qmem_git", "--json", "--memory-dir", str(memory), "dream"]
    qwen_only = subprocess.run(base, capture_output=True, text=True, check=True)
    assert json.loads(qwen_only.stdout)["skipped_reason"] == "min_sessions"
    (tmp_path / "dream-scan.json").unlink(missing_ok=True)  # the 10-minute scan throttle
    counted = subprocess.run(
        [*base, "--transcripts-dir", str(transcripts)], capture_output=True, text=True, check=True
    )
    assert json.loads(counted.stdout)["status"] != "skipped", counted.stdout


def test_an_endless_payload_is_read_only_up_to_its_cap(tmp_path: Path) -> None:
    """``</dev/zero`` on stdin: the hook stops at 16 MiB and exits 0 quietly, never filling RAM."""
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_REPORTER, "hook", "--agent", "claude", "prompt"],
        stdin=open("/dev/zero", "rb"),  # noqa: SIM115 - closed with the process
        capture_output=True,
        env={**os.environ},
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    peak = [line for line in done.stderr.decode().splitlines() if line.startswith("peak-kib=")]
    assert done.returncode == 0 and done.stdout == b""
    assert int(peak[-1].split("=")[1]) < 200 * 1024  # KiB: the cap, not the stream


@pytest.mark.parametrize("event", ["SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"])
def test_a_project_folder_that_does_not_exist_gets_no_store(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, spawned: list[list[str]], event: str
) -> None:
    gone = tmp_path / "removed-project"
    data = payload(gone, event, prompt="how do canary deploys roll out?")
    assert run(capsys, ["--agent", "claude", event], data) is None
    assert spawned == []  # no background extract, snapshot or dream for it
    root, state = layout(gone)
    assert not root.exists() and not state.exists()  # not even a hook.log


def test_qwen_prompt_recall_also_reads_the_user_tier(
    capsys: pytest.CaptureFixture[str], project: Path, memories: Path, engine: None, tmp_path: Path
) -> None:
    user = tmp_path / "runtime" / "memories"  # <base>/memories, base = QWEN_RUNTIME_DIR here
    write_memory(user, "user/tea.md", "Green tea", "Always brew green tea for the user.", "user")
    data = payload(project, "UserPromptSubmit", prompt="what tea should I brew?")
    context = context_of(run(capsys, ["--agent", "qwen", "prompt"], data), "UserPromptSubmit")
    assert "Always brew green tea for the user." in context
    claude = run(capsys, ["--agent", "claude", "prompt"], data)  # Claude has no user tier
    assert claude is None or "green tea" not in context_of(claude, "UserPromptSubmit")


# --------------------------------------------------------------------------- Claude companion


def test_claude_companion_hooks_watch_claudes_own_folder(
    capsys: pytest.CaptureFixture[str],
    project: Path,
    spawned: list[list[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Claude's auto-memory on: no recall, no index, no extraction; the worker watches and
    snapshots Claude's folder, through ``--agent claude``, and its state sits beside it."""
    monkeypatch.delenv("CLAUDE_CODE_DISABLE_AUTO_MEMORY")
    claude = build_settings(os.environ, project=str(project), agent="claude").layout
    Path(claude.memory_root).mkdir(parents=True)
    assert run(capsys, ["session-start"], payload(project, "SessionStart")) is None
    assert run(capsys, ["prompt"], payload(project, "UserPromptSubmit", prompt="hi")) is None
    path = transcript(project)
    stop = payload(project, "Stop", transcript_path=str(path), stop_hook_active=False)
    assert run(capsys, ["--agent", "claude", "stop"], stop) is None
    end = payload(project, "SessionEnd", transcript_path=str(path), reason="other")
    assert run(capsys, ["--agent", "claude", "session-end"], end) is None
    assert [steps_of(argv) for argv in spawned] == [[], []]  # the watcher's work, no extract
    watch = json.loads(spawned[0][-1])
    assert watch["memory_root"] == claude.memory_root
    assert watch["companion"] is True
    assert watch["scope"] == ["--project", str(project), "--agent", "claude"]
    session = json.loads(Path(claude.state_dir, "hooks", "sess-1.json").read_text())
    assert session["mode"] == "companion" and session["ended"] is True
    assert not Path(layout(project)[1]).exists()  # nothing in Qwen's project store
    steps = agents.worker_steps("SessionEnd", "companion", watch["scope"], None, "sess-1")
    assert steps == [["--project", str(project), "--agent", "claude", "snapshot"]]


# --------------------------------------------------------------------------- the user tier


def test_qwen_hooks_hand_the_user_tier_to_the_worker_once_it_is_set_up(
    capsys: pytest.CaptureFixture[str],
    project: Path,
    memories: Path,
    spawned: list[list[str]],
    tmp_path: Path,
) -> None:
    """Qwen Code writes user and feedback memories into ``<base>/memories``: the watcher
    snapshots that store too, once ``--tier user init`` made it; until then nothing is made."""
    user = tmp_path / "runtime" / "memories"
    stop = payload(project, "Stop", stop_hook_active=False)
    assert run(capsys, ["--agent", "qwen", "stop"], stop) is None
    assert json.loads(spawned[-1][-1])["others"] == []
    assert not user.exists() and not Path(f"{user}.git").exists()
    assert not Path(f"{user}.qmem").exists()
    done = subprocess.run(
        [sys.executable, "-m", "qmem_git", "--project", str(project), "--tier", "user", "init"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    end = payload(project, "SessionEnd", reason="other").replace(b"sess-1", b"")
    assert run(capsys, ["--agent", "qwen", "session-end"], end) is None  # no id: steps at once
    scope = ["--project", str(project), "--tier", "user"]
    watch = json.loads(spawned[-1][-1])
    assert watch["others"] == [{"root": str(user), "scope": scope}]
    assert [*scope, "snapshot"] in steps_of(spawned[-1])
    claude = payload(project, "Stop", stop_hook_active=False)
    assert run(capsys, ["--agent", "claude", "stop"], claude) is None
    assert json.loads(spawned[-1][-1])["others"] == []  # Claude Code has no user tier


def test_session_end_steps_snapshot_and_push_each_other_store() -> None:
    scope, user = ["--project", "/p"], ["--project", "/p", "--tier", "user"]
    steps = agents.worker_steps(
        "SessionEnd", agents.COMPANION, scope, None, "s1", True, [(user, True)]
    )
    names = ["snapshot", "sync", "snapshot --tier user", "sync --tier user"]
    assert [agents.command_name(step) for step in steps] == names
    assert steps[2] == [*user, "snapshot"]
    after_a_turn = agents.worker_steps(
        "Stop", agents.COMPANION, scope, None, "s1", False, [(user, True)]
    )
    assert after_a_turn == []  # the watcher's, once the folders are quiet
