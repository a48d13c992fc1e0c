"""The repo-wide writer lock, and how recovery tells a stale git ``.lock`` file from a live one.

Git lock files carry no PID, so staleness is judged by two facts: the file is older than
``STALE_LOCK_SECONDS`` (no git or qmem-git step holds a lock that long, except an editor left
open by a human ``git commit``, hence the extra check for a live git process in the repo), or it
was created while a qmem-git writer that has since died held the writer lock (its "tenure"
marker is still there). Only writers holding ``qmem.lock`` create lock files in our repo, so a
dead writer's lock files are known garbage even when they are seconds old.

The writer lock itself is an ``flock`` on ``.git/qmem.lock`` taken with ``fcntl`` directly:
``import filelock`` costs ~40 ms here (logging, inspect, decimal, platform ...), about a fifth of
a whole ``remember`` process, and the kernel releases an flock when its holder dies, so a crashed
writer never blocks the next one. Where ``fcntl`` does not exist (Windows) ``filelock.FileLock``
does the same job.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

from qmem_git.core.paths import Layout
from qmem_git.errors import QmemError, RepoLocked

LOCK_NAME = "qmem.lock"
TENURE_NAME = "qmem-writer"
STALE_LOCK_SECONDS = 10.0
_SKIP_DIRS = {"objects"}


@dataclass(frozen=True)
class Tenure:
    """Who holds (or last held, if it died) the writer lock, and since when."""

    pid: int
    started_ns: int


def lock_path(layout: Layout) -> str:
    return os.path.join(layout.memory_root, ".git", LOCK_NAME)


@contextlib.contextmanager
def writer_lock(layout: Layout, timeout: float) -> Iterator[str]:
    """Hold ``<memory_root>/.git/qmem.lock`` (flock); RepoLocked after ``timeout`` seconds."""
    git_dir = os.path.join(layout.memory_root, ".git")
    if not os.path.isdir(git_dir):
        raise QmemError(
            f"{layout.memory_root} is not a qmem-git memory repository",
            hint="run `qmem-git init` first",
        )
    path = lock_path(layout)
    if os.name == "nt":  # pragma: no cover - no fcntl on Windows
        with _filelock(layout, path, timeout):
            yield path
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _flock(fd, timeout, layout)
        yield path
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def _flock(fd: int, timeout: float, layout: Layout) -> None:
    """Poll a non-blocking flock until ``timeout`` (negative = wait forever)."""
    import fcntl

    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if timeout >= 0 and time.monotonic() >= deadline:
                raise _busy(layout, timeout) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.05)


@contextlib.contextmanager
def _filelock(layout: Layout, path: str, timeout: float) -> Iterator[None]:
    from filelock import FileLock, Timeout

    lock = FileLock(path, timeout=timeout, preserve_lock_file=True)
    try:
        lock.acquire()
    except Timeout as exc:
        raise _busy(layout, timeout) from exc
    try:
        yield
    finally:
        lock.release()


def _busy(layout: Layout, timeout: float) -> RepoLocked:
    return RepoLocked(
        f"memory repository {layout.memory_root} is busy: another qmem-git command holds "
        f"{LOCK_NAME} (waited {timeout:g}s)",
        hint="wait for it to finish and retry (the lock is released when that process exits, "
        "even if it crashes)",
    )


def begin_tenure(git_dir: str) -> None:
    """Mark that this process is writing; a crash leaves the mark for the next writer."""
    text = f"{os.getpid()} {_now_ns()}\n"
    with open(os.path.join(git_dir, TENURE_NAME), "w", encoding="ascii") as handle:
        handle.write(text)


def end_tenure(git_dir: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(git_dir, TENURE_NAME))


def read_tenure(git_dir: str) -> Tenure | None:
    try:
        with open(os.path.join(git_dir, TENURE_NAME), encoding="ascii") as handle:
            pid, started = handle.read().split()
        return Tenure(int(pid), int(started))
    except (OSError, ValueError):
        return None


def dead_writer_since(git_dir: str) -> int | None:
    """Start (ns) of a previous writer's tenure that ended without cleanup, i.e. it died."""
    tenure = read_tenure(git_dir)
    if tenure is None or tenure.pid == os.getpid():
        return None
    return tenure.started_ns


def stale_git_locks(
    git_dir: str, dead_since_ns: int | None, now_ns: int | None = None
) -> list[str]:
    """``*.lock`` files under ``.git`` (objects excluded) that no live process can own."""
    now_ns = _now_ns() if now_ns is None else now_ns
    stale: list[str] = []
    for path, mtime_ns in _lock_files(git_dir):
        old = now_ns - mtime_ns > STALE_LOCK_SECONDS * 1e9
        from_dead_writer = dead_since_ns is not None and mtime_ns >= dead_since_ns - 1_000_000_000
        if old or from_dead_writer:
            stale.append(path)
    if stale and git_running_in(os.path.dirname(git_dir)):
        return []
    return stale


def _lock_files(git_dir: str) -> Iterator[tuple[str, int]]:
    stack = [git_dir]
    while stack:
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if not (directory == git_dir and entry.name in _SKIP_DIRS):
                    stack.append(entry.path)
            elif entry.name.endswith(".lock") and entry.path != os.path.join(git_dir, LOCK_NAME):
                with contextlib.suppress(OSError):
                    yield entry.path, entry.stat(follow_symlinks=False).st_mtime_ns


def git_running_in(root: str) -> bool:
    """True when a live ``git`` process works inside ``root`` (it may own a lock file)."""
    import psutil

    root = os.path.realpath(root)
    for proc in psutil.process_iter(["name", "cwd"]):
        name = proc.info.get("name") or ""
        cwd = proc.info.get("cwd") or ""
        is_git = name == "git" or name.startswith("git-")
        inside = cwd == root or cwd.startswith(root + os.sep)
        if is_git and inside and proc.pid != os.getpid():
            return True
    return False


def _now_ns() -> int:
    return time.time_ns()
