"""The dream scheduler's gates (spec §8.1) over plain values; the store supplies the probes.

The probes are callables so the expensive ones (listing transcripts, probing the lock holder)
only run when every cheaper gate before them has passed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from qmem_git.core.statefile import parse_iso

DEFAULT_MIN_HOURS = 24
DEFAULT_MIN_SESSIONS = 5
SCAN_THROTTLE = timedelta(minutes=10)
SESSION_FILE = re.compile(r"[0-9a-fA-F-]{32,36}\.jsonl")

DISABLED = "disabled"
SAME_SESSION = "same_session"
MIN_HOURS = "min_hours"
MIN_SESSIONS = "min_sessions"
LOCKED = "locked"
FORCED = "forced"

GateStatus = Literal["proceed", "skipped"]
SessionFiles = Callable[[], list[tuple[str, float]]]
"""Lists ``(file name, mtime in ms)`` of the host's transcript folder."""


@dataclass(frozen=True)
class GateResult:
    """``proceed`` or ``skipped`` with the spec's reason; ``scanned`` = record the scan time."""

    status: GateStatus
    reason: str | None = None
    scanned: bool = False
    sessions: int | None = None

    @property
    def proceed(self) -> bool:
        return self.status == "proceed"


def skipped(reason: str, *, scanned: bool = False, sessions: int | None = None) -> GateResult:
    return GateResult("skipped", reason, scanned, sessions)


def last_dream_at(meta: Mapping[str, Any]) -> datetime | None:
    return parse_iso(meta.get("lastDreamAt"))


def last_dream_ms(meta: Mapping[str, Any]) -> float:
    """``lastDreamAt`` in epoch ms; 0 when never dreamed or unparsable (spec §8.1)."""
    moment = last_dream_at(meta)
    return moment.timestamp() * 1000 if moment else 0.0


def count_sessions(files: Iterable[tuple[str, float]], session_id: str, since_ms: float) -> int:
    """Transcripts named like a session id, not this session's, modified after ``since_ms``."""
    own = f"{session_id}.jsonl"
    return sum(
        1
        for name, mtime_ms in files
        if SESSION_FILE.fullmatch(name) and name != own and mtime_ms > since_ms
    )


def is_throttled(now: datetime, last_scan_at: datetime | None) -> bool:
    """True when transcripts were counted less than 10 minutes ago (a future record is stale)."""
    if last_scan_at is None:
        return False
    elapsed = now - last_scan_at
    return timedelta(0) <= elapsed < SCAN_THROTTLE


def evaluate_gates(
    *,
    enabled: bool,
    meta: Mapping[str, Any],
    session_id: str,
    now: datetime,
    min_hours: float = DEFAULT_MIN_HOURS,
    min_sessions: int = DEFAULT_MIN_SESSIONS,
    last_scan_at: datetime | None,
    session_mtimes: SessionFiles,
    lock_live: Callable[[], bool],
) -> GateResult:
    """The first failing gate of spec §8.1, in order, or ``proceed``."""
    if not enabled:
        return skipped(DISABLED)
    if meta.get("lastDreamSessionId") == session_id:
        return skipped(SAME_SESSION)
    last = last_dream_at(meta)
    if last is not None and (now - last) < timedelta(hours=min_hours):
        return skipped(MIN_HOURS)
    if is_throttled(now, last_scan_at):
        return skipped(MIN_SESSIONS)
    sessions = count_sessions(session_mtimes(), session_id, last_dream_ms(meta))
    if sessions < min_sessions:
        return skipped(MIN_SESSIONS, scanned=True, sessions=sessions)
    if lock_live():
        return skipped(LOCKED, scanned=True, sessions=sessions)
    return GateResult("proceed", None, scanned=True, sessions=sessions)
