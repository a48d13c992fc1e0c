"""The dream's ``consolidation.lock``, the session-scan throttle record and transcript listing.

Lock format: the holder's decimal PID on the first line, then its process start time
(``psutil.Process.create_time()``). Qwen Code reads the lock with ``parseInt(content.trim())``,
which stops at the newline, so both tools see the same holder; a JSON lock would read as "no PID"
there and be deleted as stale. We also accept Qwen Code's plain PID and a JSON
``{"pid": …, "started": …}`` object. The start time lets us tell a reused PID from the holder.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import TracebackType

from qmem_git.core.statefile import dumps_state, iso_ms, parse_iso
from qmem_git.store.state import read_json_object
from qmem_git.store.workdir import atomic_write

LOCK_NAME = "consolidation.lock"
SCAN_RECORD_NAME = "dream-scan.json"
STALE_AFTER = timedelta(hours=1)
START_TOLERANCE_S = 1.0
"""``create_time`` derives from the boot time, which can shift by a second between readings."""


@dataclass(frozen=True)
class LockOwner:
    """Who holds the lock: PID and, when recorded, the process start time (epoch seconds)."""

    pid: int
    started: float | None = None


def lock_path(state_dir: str) -> str:
    return os.path.join(state_dir, LOCK_NAME)


def parse_lock(content: str) -> LockOwner | None:
    """Owner from ``<pid>[\\n<started>]`` or JSON; None for anything else (garbage)."""
    text = content.strip()
    if text.startswith("{"):
        return _parse_json_lock(text)
    tokens = text.split()
    if not 1 <= len(tokens) <= 2 or not _is_decimal(tokens[0]):
        return None
    started = _parse_float(tokens[1]) if len(tokens) == 2 else None
    if len(tokens) == 2 and started is None:
        return None
    return _owner(int(tokens[0]), started)


def _parse_json_lock(text: str) -> LockOwner | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    pid, started = data.get("pid"), data.get("started")
    if not isinstance(pid, int) or isinstance(pid, bool):
        return None
    if started is not None and (isinstance(started, bool) or not isinstance(started, int | float)):
        return None
    return _owner(pid, float(started) if started is not None else None)


def _owner(pid: int, started: float | None) -> LockOwner | None:
    return LockOwner(pid, started) if pid > 0 else None


def _is_decimal(token: str) -> bool:
    return token.isascii() and token.isdigit()


def _parse_float(token: str) -> float | None:
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def render_lock(owner: LockOwner) -> str:
    if owner.started is None:
        return f"{owner.pid}\n"
    return f"{owner.pid}\n{owner.started:.6f}\n"


def current_owner() -> LockOwner:
    """This process as a lock owner."""
    import psutil  # deferred: the gate path only needs it when a lock exists (~25 ms import)

    pid = os.getpid()
    return LockOwner(pid, psutil.Process(pid).create_time())


def owner_is_alive(owner: LockOwner) -> bool:
    """The PID runs and, when a start time is recorded, it is the same process (not a reuse)."""
    import psutil

    try:
        process = psutil.Process(owner.pid)
        started = process.create_time()
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True  # it exists; we cannot verify it, so do not break a lock we cannot judge
    return owner.started is None or abs(started - owner.started) <= START_TOLERANCE_S


def lock_is_live(state_dir: str, now: datetime) -> bool:
    """Spec §8.3: a fresh lock whose holder runs is live; any other lock is removed as stale."""
    path = lock_path(state_dir)
    try:
        info = os.stat(path)
        with open(path, "rb") as handle:
            content = handle.read(4096).decode("utf-8", errors="replace")
    except OSError:
        return False
    age = now.timestamp() - info.st_mtime
    if age <= STALE_AFTER.total_seconds():
        owner = parse_lock(content)
        if owner is not None and owner_is_alive(owner):
            return True
    _remove_if_unchanged(path, info)
    return False


def _remove_if_unchanged(path: str, seen: os.stat_result) -> None:
    """Delete the stale lock we judged, not one another process has created since."""
    try:
        info = os.stat(path)
        if (info.st_ino, info.st_mtime_ns) == (seen.st_ino, seen.st_mtime_ns):
            os.unlink(path)
    except FileNotFoundError:
        pass


class ConsolidationLock:
    """A held ``consolidation.lock``; leaving the ``with`` block always releases it."""

    def __init__(self, path: str, owner: LockOwner) -> None:
        self.path = path
        self.owner = owner

    def is_held(self) -> bool:
        try:
            with open(self.path, encoding="utf-8", errors="replace") as handle:
                return parse_lock(handle.read(4096)) == self.owner
        except OSError:
            return False

    def release(self) -> None:
        """Delete the lock file if it is still ours (idempotent)."""
        if self.is_held():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)

    def __enter__(self) -> ConsolidationLock:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def try_acquire(state_dir: str, now: datetime) -> ConsolidationLock | None:
    """Take the lock by exclusive create (spec §8.2); None when it is held (``locked``)."""
    lock_is_live(state_dir, now)  # clears a stale lock first
    os.makedirs(state_dir, exist_ok=True)
    path = lock_path(state_dir)
    owner = current_owner()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return None
    try:
        os.write(fd, render_lock(owner).encode("ascii"))
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    os.close(fd)
    return ConsolidationLock(path, owner)


def read_last_scan(state_dir: str) -> datetime | None:
    """When transcripts were last counted (any process); None when never or unreadable."""
    data = read_json_object(os.path.join(state_dir, SCAN_RECORD_NAME))
    return None if data is None else parse_iso(data.get("lastSessionScanAt"))


def record_scan(state_dir: str, now: datetime) -> None:
    """Remember the scan time so the 10-minute throttle holds across processes."""
    text = dumps_state({"lastSessionScanAt": iso_ms(now)})
    atomic_write(os.path.join(state_dir, SCAN_RECORD_NAME), text.encode("utf-8"))


def list_session_files(chats_dir: str) -> list[tuple[str, float]]:
    """``(name, mtime_ms)`` of every entry in the transcript folder; unstat-able ones skipped."""
    try:
        entries = list(os.scandir(chats_dir))
    except OSError:
        return []
    found: list[tuple[str, float]] = []
    for entry in entries:
        try:
            info = entry.stat()
        except OSError:
            continue
        found.append((entry.name, info.st_mtime_ns / 1_000_000))
    return found
