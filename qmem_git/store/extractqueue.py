"""One extraction per project across processes, with one trailing request per session.

Spec §7.9 keeps a single trailing request, and "the latest request wins", inside one agent
process, which extracts one session. Across processes each session's request matters: a
process that finds the slot busy leaves its request in ``extract-queue/<key>.json``, where
``key`` names the session (else the transcript), and returns ``queued``. A newer request of the
same session replaces the older one; no session's request replaces another's. The holder
takes the queued requests oldest first when its own is done, and after releasing looks once
more, so a request written in the gap between its last look and its release is never stranded.

A request being run is renamed to ``<key>.json.taken`` and removed once it is done; a holder
killed meanwhile leaves it, and the next holder puts it back in the queue (unless a newer
request of that session is already there).

The slot is a non-blocking flock (``store.locks.TryLock``), not ``filelock``, whose import
alone costs tens of milliseconds on every extraction.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from typing import Any

from qmem_git.store.locks import TryLock
from qmem_git.store.state import read_json_object
from qmem_git.store.workdir import atomic_write

LOCK_FILE = "extract.lock"
QUEUE_DIR = "extract-queue"
LEGACY_QUEUE_FILE = "extract-queue.json"  # the single request of earlier versions
SUFFIX = ".json"
TAKEN = ".taken"


def queue_name(request: dict[str, Any]) -> str:
    """The queue file of ``request``: one per session id, else one per transcript."""
    session = request.get("sessionId")
    key = f"session:{session}" if session else f"transcript:{request.get('transcript')}"
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32] + SUFFIX


def extraction_running(state_dir: str) -> bool:
    """True while some process holds the extraction slot of ``state_dir``."""
    slot = TryLock(os.path.join(state_dir, LOCK_FILE))
    if not slot.acquire():
        return True
    slot.release()
    return False


class ExtractSlot:
    """The per-project extraction slot in the state dir."""

    def __init__(self, state_dir: str) -> None:
        os.makedirs(state_dir, exist_ok=True)
        self._lock = TryLock(os.path.join(state_dir, LOCK_FILE))
        self._dir = os.path.join(state_dir, QUEUE_DIR)
        self._legacy = os.path.join(state_dir, LEGACY_QUEUE_FILE)
        self._taken: str | None = None

    def acquire_or_queue(self, request: dict[str, Any]) -> bool:
        """True when this process now runs extractions; False when the request was queued."""
        if self._acquire():
            return True
        path = os.path.join(self._dir, queue_name(request))
        atomic_write(path, json.dumps(request).encode("utf-8"))
        if not self._acquire():
            return False
        # the holder left between our two attempts: we run our request, so take it back
        # (a newer request of the same session written meanwhile stays queued)
        self._take_back(path, request)
        return True

    def take_queued(self) -> dict[str, Any] | None:
        """The oldest queued request, if any (call while holding the slot); the one taken
        before it counts as done."""
        self._done()
        legacy = _read_and_remove(self._legacy)
        if legacy is not None:
            return legacy
        for path in self._queued():
            taken = path + TAKEN
            try:
                os.rename(path, taken)
            except FileNotFoundError:
                continue
            self._taken = taken
            data = read_json_object(taken)
            if data is not None:
                return data
            self._done()  # unreadable: nothing to run
        return None

    def release(self) -> bool:
        """Release the slot. True when requests were queued after the last look and this
        process took the slot back to run them (call :meth:`take_queued`, then release again)."""
        self._done()
        self._lock.release()
        if not self._queued() and not os.path.exists(self._legacy):
            return False
        return self._acquire()

    def abandon(self) -> None:
        """Release without finishing: a request taken and not done stays for the next holder
        (an interrupted run)."""
        self._taken = None
        self._lock.release()

    def _acquire(self) -> bool:
        if not self._lock.acquire():
            return False
        self._revive_orphans()
        return True

    def _queued(self) -> list[str]:
        """Queued request files, oldest first."""
        try:
            entries = list(os.scandir(self._dir))
        except OSError:
            return []
        found = []
        for entry in entries:
            if entry.name.endswith(SUFFIX) and not entry.name.startswith("."):
                with contextlib.suppress(OSError):
                    found.append((entry.stat().st_mtime_ns, entry.name, entry.path))
        return [path for _, _, path in sorted(found)]

    def _revive_orphans(self) -> None:
        """Requests a killed holder had taken go back to the queue (we hold the slot, so no
        live process is running them)."""
        try:
            names = [name for name in os.listdir(self._dir) if name.endswith(SUFFIX + TAKEN)]
        except OSError:
            return
        for name in names:
            taken = os.path.join(self._dir, name)
            _requeue(taken, taken[: -len(TAKEN)])

    def _take_back(self, path: str, request: dict[str, Any]) -> None:
        taken = path + TAKEN
        try:
            os.rename(path, taken)
        except FileNotFoundError:
            return
        if read_json_object(taken) == request:
            _remove(taken)
        else:
            _requeue(taken, path)

    def _done(self) -> None:
        if self._taken is not None:
            _remove(self._taken)
            self._taken = None


def _requeue(taken: str, path: str) -> None:
    """Put ``taken`` back as ``path`` unless a newer request already is there."""
    try:
        os.link(taken, path)
    except (FileExistsError, FileNotFoundError):
        pass
    except OSError:  # a file system without hard links: a rename, if still free
        if not os.path.exists(path):
            with contextlib.suppress(FileNotFoundError):
                os.replace(taken, path)
    _remove(taken)


def _read_and_remove(path: str) -> dict[str, Any] | None:
    data = read_json_object(path)  # None when missing
    _remove(path)
    return data


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
