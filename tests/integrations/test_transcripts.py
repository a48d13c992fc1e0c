"""Transcript readers on hand-written Qwen Code / Claude Code fixtures (agent-integration §1-§2)."""

from __future__ import annotations

import json
import os
import time
import tracemalloc
from pathlib import Path

import pytest

from qmem_git.core.extract import Message
from qmem_git.errors import UsageError
from qmem_git.integrations import transcripts
from qmem_git.integrations.transcripts import Transcript, clean_user_text, read_transcript

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "transcripts"
QWEN_ROOT = "/home/u/.qwen/projects/-home-u-proj/memory"


def test_qwen_transcript() -> None:
    transcript = read_transcript(str(FIXTURES / "qwen-session.jsonl"), [QWEN_ROOT])
    assert transcript.session_id == "qwen-sess-1"
    assert transcript.bad_lines == 2  # one broken line, one truncated last line
    assert transcript.messages == [
        Message(0, "user", "We always use pnpm here."),  # injected context part dropped
        Message(1, "model", "Noted, saving it.", writes_memory=True),  # thought dropped
        Message(2, "user", "I prefer terse responses."),
        Message(3, "model", "Understood."),  # its memory edit failed
        # 4: user record holding only injected context; 5: thought-only reply
        Message(6, "user", "The latency dashboard is https://grafana.internal/d/api-latency"),
        Message(7, "model", "", writes_memory=True),  # save_memory call, no text
        Message(8, "user", "Please remember that the release freeze starts 2026-03-05"),
        Message(9, "model", "I will keep that in mind."),
    ]


def test_claude_transcript() -> None:
    transcript = read_transcript(str(FIXTURES / "claude-session.jsonl"), [])
    assert transcript.session_id == "claude-sess-1"
    assert transcript.bad_lines == 1
    assert transcript.messages == [
        Message(0, "user", "We always use pnpm here."),
        Message(1, "model", "Noted.", writes_memory=True),  # 3 lines of msg_1; Edit CLAUDE.md
        # 2: command wrapper only
        Message(3, "user", "I prefer terse responses."),  # system-reminder dropped
        Message(4, "model", "Will do."),
        # 5: "[Request interrupted by user…]"
        Message(6, "user", "Please remember that the release freeze starts 2026-03-05"),
        # 7: failed Write with no text
        Message(8, "model", "I could not save that."),
    ]


def test_json_history_file() -> None:
    transcript = read_transcript(str(FIXTURES / "history.json"), ["/tmp/memory"])
    assert transcript == Transcript(
        [
            Message(0, "user", "hello"),
            Message(1, "model", "world"),
            Message(3, "user", "I prefer terse responses."),
        ]
    )


def test_json_history_forms(tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    items = [
        {"role": "user", "content": [{"type": "text", "text": "hi there"}, {"type": "image"}]},
        {"role": "assistant", "content": "ok [qmem-git recall] ## Relevant memory"},
        {"role": "user", "text": "<system-reminder>x</system-reminder>"},
        "not an item",
        {"role": "model", "parts": [{"functionCall": {"name": "save_memory", "args": {}}}]},
        {"role": "user", "content": 5},
    ]
    path.write_text("\ufeff  \n" + json.dumps(items), encoding="utf-8")
    assert read_transcript(str(path)).messages == [
        Message(0, "user", "hi there"),
        Message(1, "model", "ok"),
        Message(4, "model", "", True),
    ]


def test_json_history_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2", encoding="utf-8")
    with pytest.raises(UsageError, match="not valid JSON"):
        read_transcript(str(bad))
    big = tmp_path / "big.json"
    big.write_text("[" + " " * 200 + "]", encoding="utf-8")
    monkeypatch.setattr(transcripts, "MAX_JSON_LIST_BYTES", 100)
    with pytest.raises(UsageError, match="larger than"):
        read_transcript(str(big))


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read transcript"):
        read_transcript(str(tmp_path / "nope.jsonl"))


@pytest.mark.parametrize("content", [b"", b"\n\n  \n", b"\xef\xbb\xbf"])
def test_empty_file_is_an_empty_transcript(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(content)
    assert read_transcript(str(path)) == Transcript()


def jsonl(tmp_path: Path, *records: object) -> str:
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n")
    return str(path)


def qwen_user(uuid: str, text: str) -> dict[str, object]:
    return {"uuid": uuid, "type": "user", "message": {"role": "user", "parts": [{"text": text}]}}


def test_non_dict_and_unknown_records_are_ignored_not_bad(tmp_path: Path) -> None:
    path = jsonl(
        tmp_path,
        '"text"',
        "[1, 2]",  # not first: a leading `[` means a JSON history file
        {"type": "progress", "message": {"role": "user", "content": "x"}},
        {"type": "user", "message": "not a mapping"},
        {"type": "user", "message": {"role": "user"}},
        qwen_user("u1", "I prefer terse responses."),
        {"type": "user", "message": {"role": "user", "content": 7}},
    )
    transcript = read_transcript(path)
    assert transcript.bad_lines == 0
    assert transcript.messages == [Message(0, "user", "I prefer terse responses.")]


def test_a_line_nested_deeper_than_json_can_parse_is_skipped_and_counted(tmp_path: Path) -> None:
    path = jsonl(tmp_path, qwen_user("u1", "I prefer terse responses."), "[" * 200_000)
    transcript = read_transcript(path)
    assert transcript.bad_lines == 1
    assert [m.text for m in transcript.messages] == ["I prefer terse responses."]


def test_a_tool_result_status_of_the_wrong_type_is_not_a_crash(tmp_path: Path) -> None:
    result = {"type": "tool_result", "toolCallResult": {"callId": "c1", "status": ["error"]}}
    result["message"] = {"role": "user", "parts": [{"functionResponse": {"id": "c1"}}]}
    path = jsonl(tmp_path, result, qwen_user("u1", "I prefer terse responses."))
    transcript = read_transcript(path)
    assert [m.text for m in transcript.messages] == ["I prefer terse responses."]


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_a_fifo_or_a_device_is_refused_not_read_forever(tmp_path: Path, kind: str) -> None:
    path = kind
    if kind == "fifo":
        path = str(tmp_path / "fifo")
        os.mkfifo(path)
    with pytest.raises(UsageError, match="cannot read transcript \\(not a regular file\\)"):
        read_transcript(path)


def test_invalid_utf8_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(
        json.dumps(qwen_user("u1", "caf\u00e9 is the place")).encode().replace(b"\\u00e9", b"\xff")
        + b"\n"
    )
    assert read_transcript(str(path)).messages[0].text == "caf\ufffd is the place"


def test_overlong_line_is_skipped_and_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transcripts, "MAX_LINE_BYTES", 200)
    path = jsonl(
        tmp_path, qwen_user("u1", "x" * 1000), qwen_user("u2", "I prefer terse responses.")
    )
    transcript = read_transcript(path)
    assert transcript.bad_lines == 1
    assert transcript.messages == [Message(0, "user", "I prefer terse responses.")]


def test_message_text_is_capped(tmp_path: Path) -> None:
    long = "word " * 10_000
    path = jsonl(tmp_path, qwen_user("u1", long), qwen_user("u2", long))
    messages = read_transcript(path).messages
    assert [len(m.text) for m in messages] == [transcripts.MAX_MESSAGE_CHARS] * 2


def test_qwen_call_without_response_counts_and_status_error_does_not(tmp_path: Path) -> None:
    def call(uuid: str, call_id: str) -> dict[str, object]:
        args = {"file_path": QWEN_ROOT + "/user/a.md"}
        part = {"functionCall": {"id": call_id, "name": "write_file", "args": args}}
        return {"uuid": uuid, "type": "assistant", "message": {"role": "model", "parts": [part]}}

    cancelled = {
        "uuid": "t2",
        "type": "tool_result",
        "toolCallResult": {"callId": "c2", "status": "cancelled"},
    }
    cancelled["message"] = {"role": "user", "parts": []}
    path = jsonl(tmp_path, call("a1", "c1"), call("a2", "c2"), cancelled)
    assert [m.writes_memory for m in read_transcript(path, [QWEN_ROOT]).messages] == [True]


def test_claude_relative_memory_path_uses_record_cwd(tmp_path: Path) -> None:
    reply = {
        "type": "assistant",
        "cwd": "/home/u",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t", "name": "Write", "input": {"file_path": "mem/x.md"}}
            ],
        },
    }
    assert read_transcript(jsonl(tmp_path, reply), ["/home/u/mem"]).messages == [
        Message(0, "model", "", True)
    ]


def test_recall_marker_cuts_old_style_appended_context() -> None:
    assert (
        clean_user_text("Use pnpm always\n\n[qmem-git recall]\n## Relevant memory")
        == "Use pnpm always\n\n"
    )
    assert clean_user_text("<system-reminder>unclosed reminder") == " "
    assert clean_user_text("a <command-args>x</command-args> b") == "a   b"


def test_fifty_megabytes_are_read_with_bounded_memory(tmp_path: Path) -> None:
    """A 50 MB transcript of tool-heavy turns: kept text is small, so peak memory must be too."""
    path = tmp_path / "big.jsonl"
    write_big_transcript(path, 50 * 1024 * 1024)
    tracemalloc.start()
    started = time.perf_counter()
    try:
        transcript = read_transcript(str(path), [QWEN_ROOT])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - started < 30
    assert peak < 50 * 1024 * 1024
    assert transcript.bad_lines == 0
    assert len(transcript.messages) > 2000
    assert transcript.messages[0] == Message(0, "user", "Turn 0: I prefer terse responses.")


def write_big_transcript(path: Path, size: int) -> None:
    output = "line of tool output " * 1500  # ~30 KB per tool result
    thought = "thinking " * 200
    written, turn = 0, 0
    with path.open("w", encoding="utf-8") as handle:
        while written < size:
            records = [
                {
                    **qwen_user(f"u{turn}", f"Turn {turn}: I prefer terse responses."),
                    "sessionId": "big",
                },
                {
                    "uuid": f"a{turn}",
                    "type": "assistant",
                    "message": {
                        "role": "model",
                        "parts": [
                            {"text": thought, "thought": True},
                            {"text": "Running the tests now."},
                            {
                                "functionCall": {
                                    "id": f"c{turn}",
                                    "name": "run_shell_command",
                                    "args": {"command": "make"},
                                }
                            },
                        ],
                    },
                },
                {
                    "uuid": f"t{turn}",
                    "type": "tool_result",
                    "message": {
                        "role": "user",
                        "parts": [
                            {
                                "functionResponse": {
                                    "id": f"c{turn}",
                                    "name": "run_shell_command",
                                    "response": {"output": output},
                                }
                            }
                        ],
                    },
                },
            ]
            block = "".join(json.dumps(r) + "\n" for r in records)
            handle.write(block)
            written += len(block)
            turn += 1
