"""The repo-wide writer lock, and how recovery tells a stale git ``.lock`` file from a live one.

Git lock files carry no PID, so staleness is judged by two facts: the file is older than
``STALE_LOCK_SECONDS`` (no git or qmem-git step holds a lock that long, except an editor left
open by a human ``git commit``, hence the extra check for a live git process in the repo), or it
was created while a qmem-git writer that has since died held the writer lock (its "tenure"
marker is still there). Only writers holding ``qmem.lock`` create lock files in our repo, so a
dead writer's lock files are known garbage even when they are seconds old. The tenure starts
as soon as the writer lock is taken (before recovery, whose own commit may be interrupted too)
and inherits the start of a dead predecessor's, so its leftovers stay recognisable. Only then
are ``objects/`` folders searched as well (dulwich leaves ``objects/xx/<id>.lock`` when killed
mid-write); a normal write does not pay for listing thousands of loose objects.

The writer lock itself is an ``flock`` on the repository's ``qmem.lock`` taken with ``fcntl``
directly: ``import filelock`` costs ~40 ms here (logging, inspect, decimal, platform ...),
about a fifth of a whole ``remember`` process, and the kernel releases an flock when its holder
dies, so a crashed writer never blocks the next one. Where ``fcntl`` does not exist (Windows)
``filelock.FileLock`` does the same job. :class:`TryLock` is the same flock taken without
waiting (the per-project extraction slot, ``store.extractqueue``).

The module imports only what taking the lock needs (no ``typing``, ``contextlib``: ~15 ms):
``remember`` takes the lock before its other imports so that its survey starts at once.
"""

from __future__ import annotations

import errno
import os
import time

from qmem_git.core.limits import WRITER_LOCK_NAME
from qmem_git.core.paths import git_dir_of, repository_of
from qmem_git.errors import QmemError, RepoLocked
from qmem_git.store.walk import check_on_main, check_store

TYPE_CHECKING = False  # typing is not imported before the lock is taken
if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import TracebackType
    from typing import Any

    from filelock import FileLock

    from qmem_git.core.paths import Layout

LOCK_NAME = WRITER_LOCK_NAME
TENURE_NAME = "qmem-writer"
STALE_LOCK_SECONDS = 10.0
_SKIP_DIRS = {"objects"}
# some file systems report a held flock as EACCES instead of EWOULDBLOCK
_CONTENDED = frozenset({errno.EACCES, errno.EAGAIN, errno.EWOULDBLOCK})


class Tenure:
    """Who holds (or last held, if it died) the writer lock, and since when.

    ``inherited_ns``: start of a dead writer's tenure this one took over (its leftovers may
    still be on disk when recovery runs), else None.
    """

    __slots__ = ("inherited_ns", "pid", "started_ns")

    def __init__(self, pid: int, started_ns: int, inherited_ns: int | None = None) -> None:
        self.pid = pid
        self.started_ns = started_ns
        self.inherited_ns = inherited_ns

    @property
    def since_ns(self) -> int:
        """Lock files created from this moment on may belong to this tenure."""
        if self.inherited_ns is None:
            return self.started_ns
        return min(self.started_ns, self.inherited_ns)


def lock_path(layout: Layout) -> str:
    return os.path.join(layout.git_dir, LOCK_NAME)


class writer_lock:  # used like the function it replaced: `with writer_lock(...) as fd`
    """Hold ``qmem.lock`` in the store's repository (flock); RepoLocked after ``timeout`` s.

    A repository still in the memory folder (``memory/.git``, made by an earlier version) is
    locked there and moved out first (``store.relocate``), then the lock of the new place is
    taken. Entering gives the descriptor that holds the flock (None on Windows, where filelock
    holds it): a child process forked meanwhile must close its copy, or the lock outlives this
    one.
    """

    def __init__(self, layout: Layout, timeout: float) -> None:
        self.layout = layout
        self.timeout = timeout
        self._fd: int | None = None
        self._fallback: FileLock | None = None  # where fcntl is missing (Windows)

    def __enter__(self) -> int | None:
        layout = self.layout
        git_dir = repository_of(layout.memory_root, os.path.exists)
        if not os.path.isdir(git_dir):
            raise QmemError(
                f"{layout.memory_root} is not a qmem-git memory repository",
                hint="run `qmem-git init` first",
            )
        check_store(layout)  # never a lock (or a writer) in a project's repository
        if git_dir != git_dir_of(layout.memory_root):
            move_out(layout, git_dir, self.timeout)
            git_dir = layout.git_dir
            if not os.path.isdir(git_dir):  # not moved (a symlink, ...): nowhere to write
                raise QmemError(
                    f"{layout.memory_root}'s repository could not be moved to {git_dir}",
                    hint="run `qmem-git doctor`",
                )
        check_on_main(git_dir)
        return self.take(os.path.join(git_dir, LOCK_NAME))

    def take(self, path: str) -> int | None:
        """Take the flock on ``path`` (created when missing), waiting up to the timeout."""
        if os.name == "nt":  # pragma: no cover - no fcntl on Windows
            self._fallback = _filelock(self.layout, path, self.timeout)
            return None
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            _flock(fd, self.timeout, self.layout)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return fd

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor releases the flock
        if self._fallback is not None:  # pragma: no cover - Windows only
            self._fallback.release()
            self._fallback = None


def move_out(layout: Layout, legacy: str, timeout: float) -> None:
    """Move a legacy repository (``legacy``, in the memory folder) out of it, holding its
    writer lock, so that a writer of an earlier version waits meanwhile; a writer that moved
    it first wins (``store.relocate``)."""
    lock = writer_lock(layout, timeout)
    try:
        lock.take(os.path.join(legacy, LOCK_NAME))
    except FileNotFoundError:
        return  # moved by another writer since we looked
    try:
        from qmem_git.store.relocate import move_repository

        move_repository(layout.memory_root)
    finally:
        lock.__exit__(None, None, None)


class writer_tenure:  # used like the function it replaced
    """:class:`writer_lock` with this process's tenure marked for as long as it is held.

    The tenure starts right after the lock is taken, before recovery (whose own commit may be
    interrupted too), and its mark is removed before the lock is released. Entering gives
    what :class:`writer_lock` gives.
    """

    def __init__(self, layout: Layout, timeout: float) -> None:
        self._lock = writer_lock(layout, timeout)
        self._git_dir = layout.git_dir

    def __enter__(self) -> int | None:
        lock_fd = self._lock.__enter__()
        try:
            begin_tenure(self._git_dir)
        except BaseException:
            self._lock.__exit__(None, None, None)
            raise
        return lock_fd

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            end_tenure(self._git_dir)
        finally:
            self._lock.__exit__(kind, exc, tb)


def _flock(fd: int, timeout: float, layout: Layout) -> None:
    """Poll a non-blocking flock until ``timeout`` (negative = wait forever)."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while not _try_flock(fd):
        if timeout >= 0 and time.monotonic() >= deadline:
            raise _busy(layout, timeout)
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _try_flock(fd: int) -> bool:
    """Take an exclusive flock on ``fd`` without waiting; False when another holder has it."""
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in _CONTENDED:
            return False
        raise
    return True


class TryLock:
    """An exclusive lock on the file ``path``, taken without waiting (flock; filelock on Windows).

    The file is created when missing and stays in place on release (waiters share its inode);
    the kernel releases the flock when the holder dies. Not reentrant: :meth:`acquire` while
    held returns True and one :meth:`release` frees it.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        self._fallback: Any = None  # filelock.FileLock where fcntl is missing

    @property
    def held(self) -> bool:
        return self._fd is not None or (self._fallback is not None and self._fallback.is_locked)

    def acquire(self) -> bool:
        """True when this process now holds the lock; False when another one does."""
        if self.held:
            return True
        if os.name == "nt":  # pragma: no cover - no fcntl on Windows
            return self._acquire_fallback()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            taken = _try_flock(fd)
        except BaseException:
            os.close(fd)
            raise
        if not taken:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        """Give the lock up (closing the descriptor releases the flock); no-op when not held."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
        elif self._fallback is not None and self._fallback.is_locked:  # pragma: no cover
            self._fallback.release()

    def _acquire_fallback(self) -> bool:  # pragma: no cover - Windows only
        from filelock import FileLock, Timeout

        if self._fallback is None:
            self._fallback = FileLock(self.path)
        try:
            self._fallback.acquire(timeout=0)
        except Timeout:
            return False
        return True


def _filelock(layout: Layout, path: str, timeout: float) -> FileLock:  # pragma: no cover
    """A held ``filelock.FileLock`` on ``path`` (the caller releases it)."""
    from filelock import FileLock, Timeout

    lock = FileLock(path, timeout=timeout, preserve_lock_file=True)
    try:
        lock.acquire()
    except Timeout as exc:
        raise _busy(layout, timeout) from exc
    return lock


def _busy(layout: Layout, timeout: float) -> RepoLocked:
    return RepoLocked(
        f"memory repository {layout.memory_root} is busy: another qmem-git command holds "
        f"{LOCK_NAME} (waited {timeout:g}s)",
        hint="wait for it to finish and retry (the lock is released when that process exits, "
        "even if it crashes)",
    )


def begin_tenure(git_dir: str) -> int | None:
    """Mark that this process is writing; a crash leaves the mark for the next writer.

    Returns (and records in the mark) the start of a dead writer's tenure, as
    :func:`dead_writer_since` reported it before this call.
    """
    inherited = dead_writer_since(git_dir)
    text = f"{os.getpid()} {time.time_ns()} {'-' if inherited is None else inherited}\n"
    path = os.path.join(git_dir, TENURE_NAME)
    # temp + rename: a writer killed mid-write must not leave an empty mark, which would hide
    # the dead predecessor it inherited from
    with open(path + ".tmp", "w", encoding="ascii") as handle:
        handle.write(text)
    os.replace(path + ".tmp", path)
    return inherited


def end_tenure(git_dir: str) -> None:
    try:  # noqa: SIM105 - contextlib is not imported by this module
        os.unlink(os.path.join(git_dir, TENURE_NAME))
    except FileNotFoundError:
        pass


def read_tenure(git_dir: str) -> Tenure | None:
    try:
        with open(os.path.join(git_dir, TENURE_NAME), encoding="ascii") as handle:
            fields = handle.read().split()
        pid, started = int(fields[0]), int(fields[1])
        inherited = fields[2] if len(fields) > 2 else "-"
        return Tenure(pid, started, None if inherited == "-" else int(inherited))
    except (OSError, ValueError, IndexError):
        return None


def dead_writer_since(git_dir: str) -> int | None:
    """Start (ns) of a writer's tenure that ended without cleanup, i.e. it died.

    Under the writer lock, a mark of another process is a dead writer's; our own mark reports
    the dead tenure it took over (recovery runs after :func:`begin_tenure`).
    """
    tenure = read_tenure(git_dir)
    if tenure is None:
        return None
    if tenure.pid == os.getpid():
        return tenure.inherited_ns
    return tenure.since_ns


def stale_git_locks(git_dir: str, dead_since_ns: int | None) -> list[str]:
    """``*.lock`` files under ``.git`` that no live process can own (``objects/`` searched only
    after a dead writer)."""
    now_ns = time.time_ns()
    stale: list[str] = []
    for path, mtime_ns in _lock_files(git_dir, objects=dead_since_ns is not None):
        old = now_ns - mtime_ns > STALE_LOCK_SECONDS * 1e9
        from_dead_writer = dead_since_ns is not None and mtime_ns >= dead_since_ns - 1_000_000_000
        if old or from_dead_writer:
            stale.append(path)
    if stale and git_running_in(os.path.dirname(git_dir)):
        return []
    return stale


def _lock_files(git_dir: str, objects: bool) -> Iterator[tuple[str, int]]:
    """``*.lock`` files under ``.git`` but ``qmem.lock``; ``objects/`` only when asked."""
    skip = set() if objects else _SKIP_DIRS
    stack = [git_dir]
    while stack:
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if not (directory == git_dir and entry.name in skip):
                    stack.append(entry.path)
            elif entry.name.endswith(".lock") and entry.path != os.path.join(git_dir, LOCK_NAME):
                try:
                    mtime_ns = entry.stat(follow_symlinks=False).st_mtime_ns
                except OSError:
                    continue
                yield entry.path, mtime_ns


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
