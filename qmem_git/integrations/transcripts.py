"""Read agent transcripts into dialogue messages (spec §7.1, agent-integration §1-§2, notes 1-6).

Three inputs, sniffed per file and per record:
- Qwen Code JSONL (``message.parts``, Gemini content),
- Claude Code JSONL (``message.content``, Anthropic blocks),
- a plain JSON list of ``{role, text}`` (or ``{role, parts}``) items.

JSONL is streamed line by line with a cap on one line's length, so memory stays bounded by what
is kept (dialogue text, capped per message), never by the file size.

Offsets: every user prompt record and every assistant reply (Claude: lines grouped by
``message.id``) is one dialogue item, numbered in file order; items whose text ends up empty are
dropped but keep their number, so offsets never shift when the file grows (spec §7.1).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from qmem_git.core.extract import Message, Role, is_memory_write, messages_from_history
from qmem_git.core.text import normalize_space
from qmem_git.errors import UsageError
from qmem_git.regularfile import open_regular

RECALL_MARKER = "[qmem-git recall]"
MAX_JSON_LIST_BYTES = 50 * 1024 * 1024
MAX_LINE_BYTES = 8 * 1024 * 1024
MAX_MESSAGE_CHARS = 16_000
# Assistant text is only context (facts come from user messages, spec §7.3); a short prefix
# keeps a long session's memory use proportional to its turns rather than its bytes.
MAX_ASSISTANT_CHARS = 500

# Text the agent or a hook injected into a user record; not something the user said.
_INJECTED = re.compile(
    r"<(qwen:user-prompt-submit-context|system-reminder|command-name|command-message"
    r"|command-args|local-command-stdout|local-command-stderr)>.*?(?:</\1>|\Z)",
    re.S,
)
_INTERRUPTED = re.compile(r"\[Request interrupted by user[^\]\n]*\]")
_FAILED_STATUSES = frozenset({"error", "cancelled", "canceled"})
_WHITESPACE = b" \t\r\n"
_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class Transcript:
    """Dialogue messages of one transcript file, its session id and the lines that did not parse."""

    messages: list[Message] = field(default_factory=list)
    session_id: str | None = None
    bad_lines: int = 0


def clean_user_text(text: str) -> str:
    """Drop hook-injected context, command wrappers and our own recall block (notes 3, 4, 6).

    Old Qwen builds appended hook context to the prompt itself, so the prompt text before our
    recall marker is kept and everything from the marker on is dropped.
    """
    text = _INTERRUPTED.sub(" ", _INJECTED.sub(" ", text))
    return cut_recall(text)


def cut_recall(text: str) -> str:
    marker = text.find(RECALL_MARKER)
    return text if marker < 0 else text[:marker]


def read_transcript(path: str, memory_roots: Sequence[str] = ()) -> Transcript:
    """Read a Qwen Code / Claude Code JSONL transcript or a JSON history file."""
    try:
        with open_regular(path) as handle:  # a FIFO or /dev/zero would never end
            if _first_byte(handle) == b"[":
                return _read_json_list(handle, path, memory_roots)
            return _read_jsonl(handle, path, memory_roots)
    except OSError as exc:
        raise UsageError(
            f"{path}: cannot read transcript ({exc.strerror or exc})",
            "pass the agent's session file with --transcript",
        ) from exc


def _first_byte(handle: IO[bytes]) -> bytes:
    """First non-whitespace byte (after a UTF-8 BOM); the handle is rewound."""
    head = handle.read(len(_BOM))
    if head != _BOM:
        handle.seek(0)
    start = handle.tell()
    found = b""
    while chunk := handle.read(4096):
        stripped = chunk.lstrip(_WHITESPACE)
        if stripped:
            found = stripped[:1]
            break
    handle.seek(start)
    return found


def _read_json_list(handle: IO[bytes], path: str, memory_roots: Sequence[str]) -> Transcript:
    """A JSON list of ``{role, text}`` items; loaded whole, so its size is capped."""
    if os.fstat(handle.fileno()).st_size > MAX_JSON_LIST_BYTES:
        raise UsageError(
            f"{path}: JSON history is larger than {MAX_JSON_LIST_BYTES // (1024 * 1024)} MB",
            "pass a JSONL transcript (it is read line by line) or a shorter history",
        )
    try:
        data = json.loads(handle.read().decode("utf-8", errors="replace").lstrip("\ufeff"))
    except ValueError as exc:
        raise UsageError(f"{path}: not valid JSON ({exc})", "pass a JSONL transcript") from exc
    if not isinstance(data, list):
        raise UsageError(f"{path}: expected a JSON list of {{role, text}} items")
    history = [_history_item(item) for item in data]
    messages = []
    for message in messages_from_history(history, memory_roots):
        text = message.text
        text = clean_user_text(text) if message.role == "user" else cut_recall(text)
        cap = MAX_MESSAGE_CHARS if message.role == "user" else MAX_ASSISTANT_CHARS
        text = normalize_space(text)[:cap]
        if text or message.writes_memory:
            messages.append(Message(message.offset, message.role, text, message.writes_memory))
    return Transcript(messages)


def _history_item(item: object) -> dict[str, Any]:
    """One list item as a Gemini-style ``{role, parts}``; unusable items become role-less."""
    if not isinstance(item, Mapping):
        return {}
    role = item.get("role")
    parts = item.get("parts")
    if isinstance(parts, list):
        return {"role": role, "parts": parts}
    content = item.get("content", item.get("text"))
    if isinstance(content, str):
        return {"role": role, "parts": [{"text": content}]}
    if isinstance(content, list):
        texts = [
            b.get("text") for b in content if isinstance(b, Mapping) and b.get("type") == "text"
        ]
        return {"role": role, "parts": [{"text": t} for t in texts if isinstance(t, str)]}
    return {"role": role, "parts": []}


def _read_jsonl(handle: IO[bytes], path: str, memory_roots: Sequence[str]) -> Transcript:
    """A JSONL transcript; a file none of whose lines is a JSON record is not one (exit 2)."""
    reader = _JsonlReader(memory_roots)
    for line in _lines(handle, MAX_LINE_BYTES):
        reader.feed_line(line)
    if reader.bad_lines and not reader.records:
        raise UsageError(
            f"{path} is not a transcript: none of its {reader.bad_lines} line(s) is a JSON record",
            "pass the agent's session file (Qwen Code or Claude Code JSONL) or a JSON list of "
            "{role, text}",
        )
    return reader.result()


def _lines(handle: IO[bytes], limit: int) -> Iterator[bytes | None]:
    """Lines of at most ``limit`` bytes; a longer line is consumed and reported as None."""
    while line := handle.readline(limit + 1):
        if len(line) > limit and not line.endswith(b"\n"):
            while (rest := handle.readline(limit)) and not rest.endswith(b"\n"):
                pass
            yield None
            continue
        yield line


@dataclass
class _Item:
    """A dialogue item being collected; text pieces are kept only up to the per-message cap."""

    role: Role
    pieces: list[str] = field(default_factory=list)
    chars: int = 0
    write_calls: list[str] = field(default_factory=list)

    def add_text(self, text: str) -> None:
        cap = MAX_MESSAGE_CHARS if self.role == "user" else MAX_ASSISTANT_CHARS
        if self.chars >= cap:
            return
        text = normalize_space(text[: 4 * cap])
        if text:
            self.pieces.append(text[: cap - self.chars])
            self.chars += len(self.pieces[-1]) + 1


class _JsonlReader:
    """State of one JSONL read: items so far, uuids seen, calls that failed (notes 1-5)."""

    def __init__(self, memory_roots: Sequence[str]) -> None:
        self.memory_roots = memory_roots
        self.items: list[_Item] = []
        self.claude_replies: dict[str, int] = {}
        self.seen_uuids: set[str] = set()
        self.failed_calls: set[str] = set()
        self.session_id: str | None = None
        self.bad_lines = 0
        self.records = 0  # lines that were JSON objects, whatever their shape

    def feed_line(self, line: bytes | None) -> None:
        if line is None:
            self.bad_lines += 1
            return
        text = line.decode("utf-8", errors="replace").strip().lstrip("\ufeff")
        if not text:
            return
        try:
            record = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than json can go
            self.bad_lines += 1
            return
        if isinstance(record, dict):
            self.records += 1
            try:
                self.feed(record)
            except (TypeError, ValueError, AttributeError, RecursionError):
                self.bad_lines += 1  # a record of an unexpected shape: skipped and counted

    def feed(self, record: dict[str, Any]) -> None:
        uuid = record.get("uuid")
        if isinstance(uuid, str):
            if uuid in self.seen_uuids:
                return
            self.seen_uuids.add(uuid)
        session = record.get("sessionId")
        if self.session_id is None and isinstance(session, str) and session:
            self.session_id = session
        if any(record.get(flag) for flag in ("isSidechain", "isMeta", "isCompactSummary")):
            return
        kind, message = record.get("type"), record.get("message")
        if kind not in ("user", "assistant", "tool_result") or not isinstance(message, Mapping):
            return
        cwd = record.get("cwd") if isinstance(record.get("cwd"), str) else None
        if isinstance(message.get("parts"), list):
            self.feed_qwen(kind, message["parts"], record, cwd)
        elif "content" in message:
            self.feed_claude(kind, message, cwd)

    def feed_qwen(
        self, kind: str, parts: list[Any], record: Mapping[str, Any], cwd: str | None
    ) -> None:
        """Gemini parts: text (minus thoughts), functionCall, functionResponse (§1.2, §1.3)."""
        parts = [p for p in parts if isinstance(p, Mapping)]
        responses = [
            p["functionResponse"] for p in parts if isinstance(p.get("functionResponse"), Mapping)
        ]
        if kind == "tool_result" or responses:
            self.note_qwen_results(responses, record.get("toolCallResult"))
            return
        item = _Item("user" if kind == "user" else "model")
        for part in parts:
            text = part.get("text")
            if isinstance(text, str) and not part.get("thought"):
                item.add_text(clean_user_text(text) if item.role == "user" else cut_recall(text))
            call = part.get("functionCall")
            if item.role == "model" and isinstance(call, Mapping):
                self.note_call(item, call.get("id"), call.get("name"), call.get("args"), cwd)
        self.items.append(item)

    def note_qwen_results(self, responses: list[Mapping[str, Any]], result: object) -> None:
        """A call failed when its response carries ``error`` or its status says so."""
        for response in responses:
            call_id = response.get("id")
            body = response.get("response")
            if isinstance(call_id, str) and isinstance(body, Mapping) and "error" in body:
                self.failed_calls.add(call_id)
        if isinstance(result, Mapping):
            status, call_id = result.get("status"), result.get("callId")
            if isinstance(status, str) and status in _FAILED_STATUSES and isinstance(call_id, str):
                self.failed_calls.add(call_id)

    def feed_claude(self, kind: str, message: Mapping[str, Any], cwd: str | None) -> None:
        """Anthropic blocks: text, thinking, tool_use, tool_result (§2)."""
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            return
        blocks = [b for b in blocks if isinstance(b, Mapping)]
        if kind == "user":
            self.feed_claude_user(blocks)
        elif kind == "assistant":
            self.feed_claude_reply(message.get("id"), blocks, cwd)

    def feed_claude_user(self, blocks: list[Mapping[str, Any]]) -> None:
        results = [b for b in blocks if b.get("type") == "tool_result"]
        for result in results:
            call_id = result.get("tool_use_id")
            if result.get("is_error") and isinstance(call_id, str):
                self.failed_calls.add(call_id)
        if results:
            return
        item = _Item("user")
        for block in blocks:
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                item.add_text(clean_user_text(block["text"]))
        self.items.append(item)

    def feed_claude_reply(
        self, message_id: object, blocks: list[Mapping[str, Any]], cwd: str | None
    ) -> None:
        """One API reply is split over lines sharing ``message.id``; they form one item."""
        if isinstance(message_id, str) and message_id in self.claude_replies:
            item = self.items[self.claude_replies[message_id]]
        else:
            item = _Item("model")
            if isinstance(message_id, str):
                self.claude_replies[message_id] = len(self.items)
            self.items.append(item)
        for block in blocks:
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                item.add_text(cut_recall(block["text"]))
            elif block.get("type") == "tool_use":
                self.note_call(item, block.get("id"), block.get("name"), block.get("input"), cwd)

    def note_call(
        self, item: _Item, call_id: object, name: object, args: object, cwd: str | None
    ) -> None:
        if isinstance(name, str) and is_memory_write(name, args, self.memory_roots, cwd):
            item.write_calls.append(call_id if isinstance(call_id, str) else f"#{len(self.items)}")

    def result(self) -> Transcript:
        messages = []
        for offset, item in enumerate(self.items):
            writes = any(call not in self.failed_calls for call in item.write_calls)
            text = " ".join(item.pieces)[:MAX_MESSAGE_CHARS]
            if text or writes:
                messages.append(Message(offset, item.role, text, writes))
        return Transcript(messages, self.session_id, self.bad_lines)
