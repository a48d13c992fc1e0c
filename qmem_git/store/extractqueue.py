"""One extraction per project across processes, with a single trailing request (spec §7.9).

A process that finds the slot busy leaves its request in ``extract-queue.json`` (the latest
request replaces an earlier one) and returns ``queued``; the running process takes it when it
finishes. After releasing, the holder looks once more, so a request written in the gap
between its last look and its release is never stranded.

The slot is a non-blocking flock (``store.locks.TryLock``), not ``filelock``, whose import
alone costs tens of milliseconds on every extraction.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

from qmem_git.store.locks import TryLock
from qmem_git.store.workdir import atomic_write

LOCK_FILE = "extract.lock"
QUEUE_FILE = "extract-queue.json"


class ExtractSlot:
    """The per-project extraction slot in the state dir."""

    def __init__(self, state_dir: str) -> None:
        os.makedirs(state_dir, exist_ok=True)
        self._lock = TryLock(os.path.join(state_dir, LOCK_FILE))
        self._queue = os.path.join(state_dir, QUEUE_FILE)

    def acquire_or_queue(self, request: dict[str, Any]) -> bool:
        """True when this process now runs extractions; False when the request was queued."""
        if self._try_acquire():
            return True
        atomic_write(self._queue, json.dumps(request).encode("utf-8"))
        # the holder may have released between our attempt and the write: try once more;
        # the queue then holds ours (or a newer request), which the caller's loop will run
        return self._try_acquire()

    def take_queued(self) -> dict[str, Any] | None:
        """Remove and return the queued request, if any (call while holding the slot)."""
        try:
            with open(self._queue, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            data = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._queue)
        return data if isinstance(data, dict) else None

    def release(self) -> dict[str, Any] | None:
        """Release; return a request queued after the last look if we could take it back."""
        self._lock.release()
        if not os.path.exists(self._queue) or not self._try_acquire():
            return None
        request = self.take_queued()
        self._lock.release()
        return request

    def _try_acquire(self) -> bool:
        return self._lock.acquire()
