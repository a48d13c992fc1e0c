"""Extraction bookkeeping (spec §7.1, §7.2, §7.8, §7.9, §3.2); checklist items 30-32, 44-47."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from qmem_git.core.extract import (
    ExtractQueue,
    Message,
    cursor_start,
    drop_memory_turns,
    extraction_meta_updates,
    is_memory_path,
    is_memory_write,
    messages_from_history,
    next_cursor,
    skipped_cursor,
    slice_messages,
    system_message,
)
from qmem_git.core.statefile import dumps_state, initial_meta, update_fields

NOW = datetime(2026, 4, 2, 9, 0, tzinfo=timezone.utc)
ROOT = "/home/u/.qwen/projects/-home-u-proj/memory"


def text_item(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"text": text}]}


HISTORY = [
    text_item("user", "hello"),
    text_item("model", "world"),
    text_item("user", "I prefer terse responses."),
]


def test_slice_resumes_at_cursor_of_same_session() -> None:  # checklist 30
    messages = messages_from_history(HISTORY)
    selected, next_offset = slice_messages(
        messages, {"sessionId": "session-1", "processedOffset": 2}, "session-1"
    )
    assert selected == [Message(2, "user", "I prefer terse responses.")]
    assert next_offset == 3


def test_other_session_restarts_from_zero() -> None:  # checklist 31
    messages = messages_from_history(HISTORY)
    selected, next_offset = slice_messages(
        messages, {"sessionId": "other", "processedOffset": 2}, "session-1"
    )
    assert [m.offset for m in selected] == [0, 1, 2]
    assert next_offset == 3


def test_empty_items_are_dropped_and_offsets_kept() -> None:  # checklist 32
    history = [
        text_item("user", "hello"),
        text_item("model", "   "),
        {"role": "model", "parts": []},
        text_item("system", "ignored role"),
        text_item("user", "I prefer terse responses."),
    ]
    messages = messages_from_history(history)
    assert [(m.offset, m.role) for m in messages] == [(0, "user"), (4, "user")]


def test_history_text_is_concatenated_without_thoughts() -> None:
    item = {
        "role": "model",
        "parts": [{"text": "a  b"}, {"text": "plan", "thought": True}, {"text": "\nc"}],
    }
    assert messages_from_history([item]) == [Message(0, "model", "a b c")]


@pytest.mark.parametrize(
    ("cursor", "session", "start"),
    [
        ({"updatedAt": "1970-01-01T00:00:00.000Z"}, "s", 0),
        ({"sessionId": "s", "processedOffset": 5}, "s", 5),
        ({"sessionId": "s", "processedOffset": "5"}, "s", 0),
        ({"sessionId": "s", "processedOffset": True}, "s", 0),
        ({"sessionId": "s", "processedOffset": -1}, "s", 0),
        ({"processedOffset": 5}, None, 0),
    ],
)
def test_cursor_start(cursor: dict[str, Any], session: str | None, start: int) -> None:
    assert cursor_start(cursor, session) == start


def test_second_run_over_same_history_has_nothing_new() -> None:  # checklist 44 (pure half)
    messages = messages_from_history(HISTORY[:2])
    _, next_offset = slice_messages(messages, {}, "s")
    cursor = next_cursor("s", next_offset, NOW)
    selected, again = slice_messages(messages, cursor, "s")
    assert selected == [] and again == 2 and cursor["processedOffset"] == 2


def test_next_offset_is_one_past_the_last_kept_offset() -> None:
    messages = messages_from_history(
        [text_item("user", "hello"), text_item("model", ""), text_item("user", "x")]
    )
    assert slice_messages(messages, {}, "s")[1] == 3
    assert slice_messages([], {}, "s") == ([], 0)


def test_system_message() -> None:  # checklist 45 (message)
    assert system_message(["user"]) == "Managed auto-memory updated: user.md"
    assert (
        system_message(["user", "reference"])
        == "Managed auto-memory updated: user.md, reference.md"
    )
    assert system_message([]) is None


def test_meta_updates_after_touching_run() -> None:  # checklist 45 (meta)
    meta = initial_meta(datetime(2026, 4, 1, 8, 0, tzinfo=timezone.utc))
    updated = update_fields(meta, extraction_meta_updates(["user"], "session-1", NOW))
    assert list(updated) == [
        "version",
        "createdAt",
        "updatedAt",
        "lastExtractionAt",
        "lastExtractionSessionId",
        "lastExtractionTouchedTopics",
        "lastExtractionStatus",
    ]
    assert updated["createdAt"] == "2026-04-01T08:00:00.000Z"
    assert updated["updatedAt"] == updated["lastExtractionAt"] == "2026-04-02T09:00:00.000Z"
    assert updated["lastExtractionStatus"] == "updated"
    assert updated["lastExtractionTouchedTopics"] == ["user"]
    assert updated["lastExtractionSessionId"] == "session-1"
    assert dumps_state(updated).endswith('"lastExtractionStatus": "updated"\n}\n')


def test_meta_updates_after_noop_run() -> None:
    updates = extraction_meta_updates([], None, NOW)
    assert updates["lastExtractionStatus"] == "noop"
    assert updates["lastExtractionTouchedTopics"] == []
    assert "lastExtractionSessionId" not in updates


def test_cursors() -> None:
    assert next_cursor("s", 4, NOW) == {
        "sessionId": "s",
        "processedOffset": 4,
        "updatedAt": "2026-04-02T09:00:00.000Z",
    }
    assert skipped_cursor("s", NOW) == {"sessionId": "s", "updatedAt": "2026-04-02T09:00:00.000Z"}
    assert skipped_cursor(None, NOW) == {"updatedAt": "2026-04-02T09:00:00.000Z"}


# --- memory writes (§7.9 step 1, agent-integration §1.4, §2) -----------------------------------


def test_save_memory_response_marks_the_turn() -> None:  # checklist 46
    history = [
        text_item("user", "I prefer terse responses."),
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "save_memory", "response": {"output": "ok"}}}],
        },
    ]
    messages = messages_from_history(history)
    assert messages[-1] == Message(1, "model", "", True)
    kept, all_skipped = drop_memory_turns(messages)
    assert all_skipped and [m.role for m in kept] == ["model"]


def write_call(path: str, name: str = "write_file", key: str = "file_path") -> dict[str, Any]:
    return {"role": "model", "parts": [{"functionCall": {"name": name, "args": {key: path}}}]}


def test_write_file_inside_memory_root_marks_the_turn() -> None:  # checklist 47
    history = [text_item("user", "I prefer terse responses."), write_call(ROOT + "/user/terse.md")]
    messages = messages_from_history(history, [ROOT])
    assert drop_memory_turns(messages)[1] is True


def test_write_file_outside_memory_root_does_not() -> None:  # checklist 47
    history = [
        text_item("user", "I prefer terse responses."),
        write_call("/home/u/proj/src/main.py"),
    ]
    messages = messages_from_history(history, [ROOT])
    assert messages == [Message(0, "user", "I prefer terse responses.")]
    assert drop_memory_turns(messages) == (messages, False)


def test_failed_memory_write_does_not_mark_the_turn() -> None:
    history = [
        text_item("user", "I prefer terse responses."),
        {
            "role": "model",
            "parts": [
                {"functionCall": {"id": "c1", "name": "edit", "args": {"path": ROOT + "/a.md"}}}
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"id": "c1", "name": "edit", "response": {"error": "no"}}}
            ],
        },
    ]
    assert drop_memory_turns(messages_from_history(history, [ROOT]))[1] is False


def test_only_the_turn_that_wrote_memory_is_skipped() -> None:
    messages = [
        Message(0, "user", "We always use pnpm here."),
        Message(1, "model", "Saved.", writes_memory=True),
        Message(2, "user", "I prefer terse responses."),
        Message(3, "model", "Ok."),
    ]
    kept, all_skipped = drop_memory_turns(messages)
    assert [m.offset for m in kept] == [1, 2, 3]
    assert all_skipped is False


def test_write_before_first_user_message_belongs_to_an_earlier_turn() -> None:
    messages = [Message(4, "model", "", True), Message(5, "user", "I prefer terse responses.")]
    assert drop_memory_turns(messages) == (messages, False)


def test_no_user_messages_is_not_a_memory_tool_skip() -> None:
    assert drop_memory_turns([]) == ([], False)
    assert drop_memory_turns([Message(0, "model", "", True)])[1] is False


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("save_memory", {"fact": "x"}, True),
        ("save_memory", None, True),
        ("manage_memory", {"action": "remember"}, True),
        ("manage_memory", {"action": "forget"}, False),
        ("write_file", {"file_path": ROOT + "/user/a.md"}, True),
        ("create_file", {"target_file": ROOT}, True),
        ("replace", {"path": ROOT + "/../memory/x.md"}, True),
        ("replace", {"path": ROOT + "-other/x.md"}, False),
        ("read_file", {"file_path": ROOT + "/user/a.md"}, False),
        ("write_file", {"file_path": 3}, False),
        ("write_file", "not a mapping", False),
        ("Write", {"file_path": "/home/u/proj/CLAUDE.md"}, True),
        ("Edit", {"file_path": "/home/u/proj/sub/CLAUDE.local.md"}, True),
        ("MultiEdit", {"file_path": "/home/u/proj/.claude/rules/style.md", "edits": []}, True),
        (
            "NotebookEdit",
            {"notebook_path": "/home/u/.claude/projects/-home-u-proj/memory/n.ipynb"},
            True,
        ),
        ("Write", {"file_path": "/home/u/proj/README.md"}, False),
        ("Write", {"file_path": "C:\\Users\\me\\proj\\CLAUDE.md"}, True),
        ("write_file", {"file_path": "/home/u/.qwen/memories/pinned/a.md"}, True),
        ("write_file", {"file_path": "/repo/.qwen/team-memory/a.md"}, True),
        (
            "tool_call",
            {"name": "write_file", "arguments": '{"file_path": "' + ROOT + '/a.md"}'},
            True,
        ),
        ("tool_call", {"name": "write_file", "arguments": {"file_path": "/tmp/a.md"}}, False),
        ("tool_call", {"name": "save_memory", "arguments": "not json"}, True),
    ],
)
def test_is_memory_write(name: str, args: object, expected: bool) -> None:
    assert is_memory_write(name, args, [ROOT]) is expected


def test_relative_paths_resolve_against_cwd() -> None:
    assert is_memory_path("memory/user/a.md", [ROOT], cwd=ROOT.rsplit("/", 1)[0])
    assert not is_memory_path("src/a.md", [ROOT], cwd="/home/u/proj")
    assert is_memory_path(".claude/rules/a.md", [])


# --- scheduler state (§7.9 steps 2-3) ----------------------------------------------------------


def test_externally_running_project_is_already_running() -> None:  # checklist 48
    queue: ExtractQueue[str] = ExtractQueue(running=True, external=True)
    assert queue.submit("h1") == "already_running"
    assert queue.trailing is None


def test_trailing_request_latest_wins_and_runs_once() -> None:  # checklist 49
    queue: ExtractQueue[str] = ExtractQueue()
    assert queue.submit("first") == "started"
    assert queue.submit("second") == "queued"
    assert queue.submit("third") == "queued"
    assert queue.finish() == "third"
    assert queue.running
    assert queue.finish() is None
    assert not queue.running
    assert queue.submit("fourth") == "started"
