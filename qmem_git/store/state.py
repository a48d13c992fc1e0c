"""Machine-local state files next to the memory root: scaffold, meta.json, cursor (spec §3)."""

from __future__ import annotations

import contextlib
import json
import os
from datetime import datetime
from typing import Any

from qmem_git.core.index import build_index
from qmem_git.core.limits import CURSOR_NAME, META_NAME, SESSIONS_NAME
from qmem_git.core.paths import Layout
from qmem_git.core.statefile import EPOCH_ISO, dumps_state, initial_cursor, initial_meta, iso_ms
from qmem_git.errors import InvalidMemoryFile
from qmem_git.store.walk import check_store
from qmem_git.store.workdir import atomic_write, index_path

META = META_NAME
CURSOR = CURSOR_NAME


def ensure_scaffold(layout: Layout, now: datetime) -> list[str]:
    """Create the memory root, an empty MEMORY.md, meta.json and the cursor; never overwrite.

    Another project's folder is refused first (``walk.check_store``)."""
    root = layout.memory_root
    check_store(layout)
    os.makedirs(root, exist_ok=True)
    os.makedirs(layout.state_dir, exist_ok=True)  # its own folder for the user tier
    created = []
    files = {
        index_path(layout.memory_root): build_index([]).text,
        layout.state_file(META): dumps_state(initial_meta(now)),
        layout.state_file(CURSOR): dumps_state(initial_cursor(now)),
    }
    for path, text in files.items():
        if _create_exclusive(path, text.encode("utf-8")):
            created.append(path)
    return created


def _create_exclusive(path: str, data: bytes) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return True


def read_json_object(path: str) -> dict[str, Any] | None:
    """A JSON object from a state file; None when missing, unreadable or not an object."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_meta(layout: Layout) -> dict[str, Any] | None:
    """meta.json as a dict; None when missing or corrupt (metadata is best effort, spec §3.2)."""
    return read_json_object(layout.state_file(META))


def load_meta(state_dir: str) -> dict[str, Any]:
    """meta.json of a state dir; missing or corrupt reads as empty (spec §3.2: best effort)."""
    return read_json_object(os.path.join(state_dir, META)) or {}


def update_meta(layout: Layout, changes: dict[str, Any], now: datetime) -> None:
    """Merge ``changes`` into meta.json, bumping ``updatedAt``; silently skipped when corrupt."""
    meta = read_meta(layout)
    if meta is None:
        return
    meta.update(changes)
    meta["updatedAt"] = iso_ms(now)
    with contextlib.suppress(OSError):
        atomic_write(layout.state_file(META), dumps_state(meta).encode("utf-8"))


def read_cursor(layout: Layout) -> dict[str, Any]:
    """The extraction cursor; missing reads as the epoch, malformed JSON is an error (§3.3)."""
    path = layout.state_file(CURSOR)
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return {"updatedAt": EPOCH_ISO}
    except (OSError, ValueError) as exc:
        raise InvalidMemoryFile(
            f"{path}: extraction cursor is not valid JSON ({exc})",
            "delete the file to restart extraction from the beginning of the session",
        ) from exc
    if not isinstance(data, dict):
        raise InvalidMemoryFile(f"{path}: extraction cursor is not a JSON object", "delete it")
    return data


def write_cursor(layout: Layout, cursor: dict[str, Any]) -> None:
    atomic_write(layout.state_file(CURSOR), dumps_state(cursor).encode("utf-8"))


# --- where each recent session was read up to -------------------------------------------------

SESSIONS = SESSIONS_NAME
SESSIONS_KEPT = 64


def session_cursor(layout: Layout, session_id: str | None) -> dict[str, Any]:
    """The cursor to extract ``session_id`` from.

    extract-cursor.json holds one session (spec §7.2, shared with Qwen Code), so a session read
    before another one would restart from its first message, and a memory forgotten in between
    would come back. ``extract-sessions.json`` (ours) remembers the offset of the last
    ``SESSIONS_KEPT`` sessions; a session it knows resumes there. This departs from §7.2 (and
    checklist 31) for those sessions only; one it does not know starts from 0 as there.
    """
    cursor = read_cursor(layout)
    if session_id is None or cursor.get("sessionId") == session_id:
        return cursor
    known = _read_sessions(layout).get(session_id)
    if isinstance(known, dict) and type(known.get("processedOffset")) is int:
        return {"sessionId": session_id, "processedOffset": known["processedOffset"]}
    return cursor


def record_session(layout: Layout, cursor: dict[str, Any]) -> None:
    """Add the cursor just written to ``extract-sessions.json`` (best effort: it is a cache)."""
    session, offset = cursor.get("sessionId"), cursor.get("processedOffset")
    if not isinstance(session, str) or type(offset) is not int:
        return
    sessions = _read_sessions(layout)
    sessions.pop(session, None)
    sessions[session] = {"processedOffset": offset, "updatedAt": cursor.get("updatedAt")}
    kept = dict(list(sessions.items())[-SESSIONS_KEPT:])  # insertion order: oldest first
    data = dumps_state({"version": 1, "sessions": kept}).encode("utf-8")
    with contextlib.suppress(OSError):
        atomic_write(layout.state_file(SESSIONS), data)


def _read_sessions(layout: Layout) -> dict[str, Any]:
    data = read_json_object(layout.state_file(SESSIONS))
    sessions = data.get("sessions") if data is not None and data.get("version") == 1 else None
    return dict(sessions) if isinstance(sessions, dict) else {}
