"""The hook as the agents run it: recorded payloads piped into ``python -m qmem_git hook``.

Each run is a real process with HOME and QWEN_RUNTIME_DIR in tmp. Background work (extract,
snapshot, dream) runs in the detached worker the hook starts, so its commit is awaited by
polling the memory repository's log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers_git import git_argv, gitdir

from qmem_git.hookentry import MARKER
from qmem_git.settings import build_settings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HOOKS = FIXTURES / "hooks"
POLL_SECONDS = 20.0


class Session:
    """One agent session in a tmp project: payloads filled in, hooks run as processes."""

    def __init__(self, tmp: Path, agent: str, transcript: Path) -> None:
        self.agent = agent
        self.project = tmp / "proj"
        self.project.mkdir()
        self.transcript = tmp / "transcript.jsonl"
        self.transcript.write_bytes(transcript.read_bytes())
        self.env = {
            **os.environ,
            "QWEN_RUNTIME_DIR": str(tmp / "runtime"),
            "QMEM_TELEMETRY": "0",
        }
        if agent == "claude":  # engine mode on the project store (tests/claude: companion)
            self.env["CLAUDE_CODE_DISABLE_AUTO_MEMORY"] = "1"
        layout = build_settings(self.env, project=str(self.project)).layout
        self.memory_root = Path(layout.memory_root)
        self.state_dir = Path(layout.state_dir)

    def payload(self, name: str) -> bytes:
        text = (HOOKS / f"{self.agent}-{name}.json").read_text(encoding="utf-8")
        text = text.replace("{cwd}", str(self.project)).replace(
            "{transcript}", str(self.transcript)
        )
        json.loads(text)  # the fixture stays valid JSON
        return text.encode()

    def hook(self, event: str, stdin: bytes) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "qmem_git", "hook", "--agent", self.agent, event],
            input=stdin,
            capture_output=True,
            cwd=self.project,
            env=self.env,
            timeout=60,
            check=False,
        )

    def qmem(self, *args: str, nothing_matched_ok: bool = False) -> str:
        """stdout of a qmem-git run that must succeed (or, if allowed, match nothing: exit 1)."""
        done = subprocess.run(
            [sys.executable, "-m", "qmem_git", "--project", str(self.project), *args],
            capture_output=True,
            text=True,
            cwd=self.project,
            env=self.env,
            check=False,
        )
        if done.returncode != 0 and not (nothing_matched_ok and done.returncode == 1):
            raise subprocess.CalledProcessError(
                done.returncode, done.args, done.stdout, done.stderr
            )
        return done.stdout

    def messages(self) -> str:
        if not gitdir(self.memory_root).exists():
            return ""
        done = subprocess.run(
            [*git_argv(self.memory_root), "log", "--format=%B"],
            capture_output=True,
            text=True,
            check=False,
            env=self.env,
        )
        return done.stdout

    def wait_for(self, trailer: str, count: int = 1) -> str:
        deadline = time.monotonic() + POLL_SECONDS
        while time.monotonic() < deadline:
            log = self.messages()
            if log.count(trailer) >= count:
                return log
            time.sleep(0.2)
        hook_log = self.state_dir / "hook.log"
        extra = hook_log.read_text() if hook_log.exists() else "(no hook.log)"
        raise AssertionError(f"no {trailer!r} commit after {POLL_SECONDS}s\n{log}\n{extra}")


def context_of(done: subprocess.CompletedProcess[bytes], event: str) -> str:
    """Exit 0 and exactly one JSON object on one line, shaped as note 8 says."""
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode("utf-8")
    assert text.endswith("\n") and text.count("\n") == 1, text
    data = json.loads(text)
    assert list(data) == ["hookSpecificOutput"]
    assert data["hookSpecificOutput"]["hookEventName"] == event
    context = data["hookSpecificOutput"]["additionalContext"]
    assert context.startswith(MARKER + "\n")
    return str(context)


def assert_silent(done: subprocess.CompletedProcess[bytes]) -> None:
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""


@pytest.fixture
def claude(tmp_path: Path) -> Session:
    return Session(tmp_path, "claude", FIXTURES / "transcripts" / "claude-session.jsonl")


@pytest.fixture
def qwen_engine(tmp_path: Path) -> Session:
    session = Session(tmp_path, "qwen", HOOKS / "qwen-transcript.jsonl")
    settings = session.project / ".qwen" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"memory": {"enableManagedAutoMemory": false}}\n')
    return session


def test_claude_session_end_to_end(claude: Session) -> None:
    claude.qmem("remember", "--type", "project", "Canary deploys roll out to 5% first")
    start = context_of(claude.hook("SessionStart", claude.payload("session-start")), "SessionStart")
    assert "## Memory index" in start and "Canary deploys" in start

    prompt = claude.payload("prompt")
    recall = context_of(claude.hook("UserPromptSubmit", prompt), "UserPromptSubmit")
    assert "## Relevant memory" in recall and "Canary deploys roll out to 5% first" in recall
    assert_silent(claude.hook("UserPromptSubmit", prompt))  # not a new user turn

    assert_silent(claude.hook("Stop", claude.payload("stop")))
    log = claude.wait_for("Qmem-Op: extract")
    assert "Qmem-Session: 9e1c2f4a-claude" in log
    assert (claude.memory_root / "user" / "i-prefer-terse-responses.md").exists()

    again = context_of(claude.hook("prompt", prompt), "UserPromptSubmit")  # kebab alias
    assert MARKER not in again[len(MARKER) :]

    assert_silent(claude.hook("session-end", claude.payload("session-end")))
    state = claude.state_dir / "hooks" / "9e1c2f4a-claude.json"
    deadline = time.monotonic() + POLL_SECONDS  # the watcher ends the session, then drops it
    while state.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not state.exists()


def test_claude_stop_hook_active_and_pre_compact(claude: Session) -> None:
    assert_silent(claude.hook("Stop", claude.payload("stop-active")))
    time.sleep(0.5)
    assert claude.messages() == ""
    assert not claude.state_dir.exists()
    assert_silent(claude.hook("PreCompact", claude.payload("pre-compact")))
    claude.wait_for("Qmem-Op: extract")


def test_qwen_engine_session_end_to_end(qwen_engine: Session) -> None:
    session = qwen_engine
    session.qmem("remember", "--type", "project", "Canary deploys roll out to 5% first")
    start = context_of(
        session.hook("SessionStart", session.payload("session-start")), "SessionStart"
    )
    assert "Canary deploys" in start

    first = context_of(
        session.hook("UserPromptSubmit", session.payload("prompt")), "UserPromptSubmit"
    )
    assert "Canary deploys roll out to 5% first" in first
    assert "## Memory index" not in first
    assert_silent(session.hook("UserPromptSubmit", session.payload("prompt-continuation")))
    again = session.hook("UserPromptSubmit", session.payload("prompt"))
    context_of(again, "UserPromptSubmit")  # submitted_prompt marks a real user turn

    assert_silent(session.hook("Stop", session.payload("stop")))
    log = session.wait_for("Qmem-Op: extract")
    assert "Qmem-Session: 5f0c7d2e-qwen" in log
    assert_silent(session.hook("SessionEnd", session.payload("session-end")))


def test_qwen_companion_mode_snapshots_what_qwen_wrote(tmp_path: Path) -> None:
    session = Session(tmp_path, "qwen", HOOKS / "qwen-transcript.jsonl")
    session.qmem("init")
    assert_silent(session.hook("SessionStart", session.payload("session-start")))  # Qwen's own
    written = session.memory_root / "feedback" / "pnpm.md"
    written.parent.mkdir(exist_ok=True)
    written.write_text("---\nname: pnpm\ndescription: Use pnpm\ntype: feedback\n---\n\nUse pnpm.\n")
    assert_silent(session.hook("Stop", session.payload("stop")))
    log = session.wait_for("Qmem-Added: 1")
    assert "feedback/pnpm.md" in log
    assert "Qmem-Op: extract\n" not in log


@pytest.mark.parametrize("stdin", [b"", b"this is not json", b"\x00\xff garbage {"])
def test_garbage_input(claude: Session, stdin: bytes) -> None:
    assert_silent(claude.hook("UserPromptSubmit", stdin))
    assert "unreadable or empty payload" in (claude.state_dir / "hook.log").read_text()


def test_unknown_event(claude: Session) -> None:
    assert_silent(claude.hook("PostToolUse", claude.payload("prompt")))
    assert "unknown event 'PostToolUse'" in (claude.state_dir / "hook.log").read_text()
