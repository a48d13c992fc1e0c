"""Extraction bookkeeping: transcript messages, cursor slice, memory-write turns, meta (spec §7).

Pure: the transcript reader (``integrations.transcripts``) and ``ops.extract`` do the I/O.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Literal, TypeVar

from qmem_git.core.paths import is_inside
from qmem_git.core.statefile import iso_ms
from qmem_git.core.text import normalize_space

Role = Literal["user", "model"]

SKIP_MEMORY_TOOL = "memory_tool"
SYSTEM_MESSAGE_PREFIX = "Managed auto-memory updated: "

# agent-integration §1.4 (Qwen Code) and §2 (Claude Code): tools that write files.
_FILE_WRITE_TOOLS = frozenset(
    {"write_file", "edit", "replace", "create_file", "Write", "Edit", "MultiEdit", "NotebookEdit"}
)
_PATH_ARGS = ("file_path", "path", "target_file", "notebook_path")
_MEMORY_FILE_NAMES = frozenset({"CLAUDE.md", "CLAUDE.local.md"})
# Memory folders recognised by shape, wherever the agent's home is (Qwen user/team tiers,
# Qwen's managed memory, Claude's auto-memory and rules).
_MEMORY_DIR_SHAPES = re.compile(
    r"/\.qwen/(?:memories|team-memory)(?:/|$)"
    r"|/\.qwen/projects/[^/]+/memory(?:/|$)"
    r"|/\.claude/projects/[^/]+/memory(?:/|$)"
    r"|(?:^|/)\.claude/rules(?:/|$)"
)


@dataclass(frozen=True)
class Message:
    """One dialogue message (spec §7.1); ``offset`` is its index in the normalised history.

    ``writes_memory`` marks an assistant message that issued a successful memory write; such a
    message is kept even when it has no text, so the turn it belongs to can be skipped.
    """

    offset: int
    role: Role
    text: str
    writes_memory: bool = False


def is_memory_path(path: str, memory_roots: Sequence[str], cwd: str | None = None) -> bool:
    """Whether a path an agent tool writes is a memory file (agent-integration §1.4, §2)."""
    path = path.replace("\\", "/")
    if cwd and not posixpath.isabs(path):
        path = posixpath.join(cwd.replace("\\", "/"), path)
    path = posixpath.normpath(path)
    if posixpath.basename(path) in _MEMORY_FILE_NAMES or _MEMORY_DIR_SHAPES.search(path):
        return True
    return any(root and is_inside(root.replace("\\", "/"), path) for root in memory_roots)


def is_memory_write(
    name: str, args: object, memory_roots: Sequence[str], cwd: str | None = None
) -> bool:
    """Whether a tool call writes memory; a wrapped ``tool_call{name, arguments}`` is unwrapped."""
    if name == "tool_call" and isinstance(args, Mapping):
        inner_name, inner_args = args.get("name"), args.get("arguments")
        if isinstance(inner_args, str):
            inner_args = _loads(inner_args)
        return isinstance(inner_name, str) and is_memory_write(
            inner_name, inner_args, memory_roots, cwd
        )
    if name == "save_memory":
        return True
    if not isinstance(args, Mapping):
        return False
    if name == "manage_memory":
        return args.get("action") == "remember"
    if name not in _FILE_WRITE_TOOLS:
        return False
    target = next((args[k] for k in _PATH_ARGS if isinstance(args.get(k), str)), None)
    return target is not None and is_memory_path(target, memory_roots, cwd)


def _loads(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return None


def messages_from_history(
    history: Sequence[Mapping[str, Any]], memory_roots: Sequence[str] = ()
) -> list[Message]:
    """Spec §7.1 over a Gemini-style history (``{role, parts}`` items); offset = raw index.

    Thought parts are not dialogue. An item holding tool responses is the assistant side of the
    turn: it becomes an empty ``model`` message when it records a memory write, else it is dropped.
    """
    calls: dict[str, int] = {}
    failed: set[str] = set()
    writes: set[int] = set()
    for index, item in enumerate(history):
        for part in _parts(item):
            _note_history_part(part, index, memory_roots, calls, failed, writes)
    writes |= {index for call_id, index in calls.items() if call_id not in failed}
    messages = []
    for index, item in enumerate(history):
        message = _history_message(index, item, index in writes)
        if message is not None:
            messages.append(message)
    return messages


def _parts(item: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    parts = item.get("parts")
    if isinstance(parts, list):
        return [part for part in parts if isinstance(part, Mapping)]
    text = item.get("text")
    return [{"text": text}] if isinstance(text, str) else []


def _note_history_part(
    part: Mapping[str, Any],
    index: int,
    memory_roots: Sequence[str],
    calls: dict[str, int],
    failed: set[str],
    writes: set[int],
) -> None:
    """Record memory-write calls (by id) and the responses that report a failure (§7.9 step 1)."""
    call = part.get("functionCall")
    if isinstance(call, Mapping) and is_memory_write(
        str(call.get("name")), call.get("args"), memory_roots
    ):
        call_id = call.get("id")
        calls[call_id if isinstance(call_id, str) else f"#{index}:{len(calls)}"] = index
    response = part.get("functionResponse")
    if isinstance(response, Mapping):
        ok = not response_failed(response.get("response"))
        call_id = response.get("id")
        if not ok and isinstance(call_id, str):
            failed.add(call_id)
        if ok and response.get("name") == "save_memory":
            writes.add(index)


def response_failed(response: object) -> bool:
    """A Qwen function response reports failure with an ``error`` key (agent-integration §1.3)."""
    return isinstance(response, Mapping) and "error" in response


def _history_message(index: int, item: Mapping[str, Any], writes: bool) -> Message | None:
    parts = _parts(item)
    if any("functionResponse" in part for part in parts):
        return Message(index, "model", "", True) if writes else None
    role = item.get("role")
    if role not in ("user", "model", "assistant"):
        return None
    text = normalize_space(
        "".join(p["text"] for p in parts if isinstance(p.get("text"), str) and not p.get("thought"))
    )
    if not text and not writes:
        return None
    return Message(index, "user" if role == "user" else "model", text, writes)


def cursor_start(cursor: Mapping[str, Any], session_id: str | None) -> int:
    """Where this session resumes; a different session restarts from 0 (spec §7.2)."""
    offset = cursor.get("processedOffset")
    same = cursor.get("sessionId") == session_id and session_id is not None
    if same and isinstance(offset, int) and not isinstance(offset, bool) and offset > 0:
        return offset
    return 0


def slice_messages(
    messages: Sequence[Message], cursor: Mapping[str, Any], session_id: str | None
) -> tuple[list[Message], int]:
    """Messages not yet processed and the next ``processedOffset`` (spec §7.2).

    The next offset is one past the last message's offset. The source counts kept messages
    instead (§15 quirk 1); that re-sends earlier messages once an item was dropped — and a
    re-sent message would bring back a memory forgotten in between — so we do not copy it.
    Both agree on every clean history.
    """
    start = cursor_start(cursor, session_id)
    selected = [message for message in messages if message.offset >= start]
    next_offset = messages[-1].offset + 1 if messages else 0
    return selected, next_offset


def drop_memory_turns(messages: Sequence[Message]) -> tuple[list[Message], bool]:
    """Leave out user messages whose turn wrote memory (agent-integration §4 rule 1, note 5).

    A turn is a user message and every message after it up to the next user message. Returns the
    remaining messages and whether every user message was left out for that reason (at least one
    existed), which is the run-level ``memory_tool`` skip of spec §7.9 step 1.
    """
    skipped: set[int] = set()
    current_user: int | None = None
    for message in messages:
        if message.role == "user":
            current_user = message.offset
        elif message.writes_memory and current_user is not None:
            skipped.add(current_user)
    kept = [m for m in messages if not (m.role == "user" and m.offset in skipped)]
    users = sum(1 for m in messages if m.role == "user")
    return kept, users > 0 and len(skipped) == users


def system_message(touched_topics: Iterable[str]) -> str | None:
    """``Managed auto-memory updated: user.md, reference.md``; None when nothing was touched."""
    topics = list(touched_topics)
    if not topics:
        return None
    return SYSTEM_MESSAGE_PREFIX + ", ".join(f"{topic}.md" for topic in topics)


def extraction_meta_updates(
    touched_topics: Sequence[str], session_id: str | None, now: datetime
) -> dict[str, Any]:
    """meta.json fields an extraction sets (spec §3.2); merge with ``statefile.update_fields``."""
    stamp = iso_ms(now)
    updates: dict[str, Any] = {"updatedAt": stamp, "lastExtractionAt": stamp}
    if session_id:
        updates["lastExtractionSessionId"] = session_id
    updates["lastExtractionTouchedTopics"] = list(touched_topics)
    updates["lastExtractionStatus"] = "updated" if touched_topics else "noop"
    return updates


def next_cursor(session_id: str | None, next_offset: int, now: datetime) -> dict[str, Any]:
    """The cursor written after every non-skipped run (spec §7.2)."""
    cursor: dict[str, Any] = {}
    if session_id is not None:
        cursor["sessionId"] = session_id
    cursor["processedOffset"] = next_offset
    cursor["updatedAt"] = iso_ms(now)
    return cursor


def skipped_cursor(session_id: str | None, now: datetime) -> dict[str, Any]:
    """The cursor reported by a skipped run; it is never written (spec §7.9)."""
    cursor: dict[str, Any] = {}
    if session_id is not None:
        cursor["sessionId"] = session_id
    cursor["updatedAt"] = iso_ms(now)
    return cursor


RequestT = TypeVar("RequestT")

SCHEDULE_STARTED = "started"
SCHEDULE_QUEUED = "queued"
SCHEDULE_ALREADY_RUNNING = "already_running"


@dataclass
class ExtractQueue(Generic[RequestT]):
    """Per-project scheduling state of spec §7.9 steps 2-3: one run, at most one trailing request.

    Pure state only; the caller runs the work and persists or shares this state as it needs.
    ``external`` means a run is marked running by someone this runtime does not know about.
    """

    running: bool = False
    external: bool = False
    trailing: RequestT | None = None

    def submit(self, request: RequestT) -> str:
        """``started`` (caller runs it now), ``queued`` (latest wins) or ``already_running``."""
        if self.running and self.external:
            return SCHEDULE_ALREADY_RUNNING
        if self.running:
            self.trailing = request
            return SCHEDULE_QUEUED
        self.running = True
        return SCHEDULE_STARTED

    def finish(self) -> RequestT | None:
        """End the current run; the trailing request, if any, is started and returned."""
        request, self.trailing = self.trailing, None
        self.running = request is not None
        self.external = False
        return request
