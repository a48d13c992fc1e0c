"""A writer's first look at the work tree: one ``lstat`` per memory file, compared with the index.

Recovery (``store.recovery``) needs, under the writer lock, every memory file with its stat
data, our leftover temp files, the parsed git index and the files whose stat disagrees with
it. At 10,000 files that is ~50 ms of ``lstat`` calls (the kernel's share alone; C git pays the
same) plus ~25 ms of index parsing and comparing.

A command that still has its imports ahead of it (the ``remember`` fast path: dulwich alone is
~50 ms) can :func:`start` the scan in a forked child right after taking the lock, so the two
run on separate cores; the child writes the stat data (``marshal``) into memory shared with
the parent and exits. The parent parses the index and compares once its imports are done:
the scan is the longer half, and the child's answer is smaller without the index. This module
imports nothing heavy (the index reader loads when it is needed), so forking costs the parent
~2 ms. Where ``fork`` is missing, or the process already runs threads (forking them is
unsafe), the scan runs in process, and the result is the same either way.
"""

from __future__ import annotations

import gc
import marshal
import mmap
import os

from qmem_git.core.limits import INDEX_NAME

TYPE_CHECKING = False  # imported before the fork: the index reader loads when needed
if TYPE_CHECKING:
    from qmem_git.store.gitindex import GitIndex

TEMP_MARKER = ".qmem-tmp-"
Stamp = tuple[int, int, int, int]  # a file's lstat: (mtime_ns, size, ino, ctime_ns)


class Survey:
    """``files``: memory file -> :data:`Stamp`, any size (oversized ones get quarantined).

    ``index`` is None when the git index cannot be read (recovery rebuilds it from HEAD);
    ``dirty`` then lists every file. ``links``: symlinks outside dot-folders (never followed;
    recovery quarantines those named like memory files or standing for a memory folder).
    Plain class: it is built on every write.
    """

    def __init__(
        self,
        files: dict[str, Stamp],
        temp_files: list[str],
        index: GitIndex | None,
        dirty: set[str],
        links: list[str] | None = None,
    ) -> None:
        self.files = files
        self.temp_files = temp_files
        self.index = index
        self.dirty = dirty
        self.links = links or []


def survey(root: str) -> Survey:
    """Scan ``root`` (dot-dirs and symlinks skipped, spec §5) and compare it with the index."""
    return _compared(root, *_scan(root))


def _compared(
    root: str, files: dict[str, Stamp], temp_files: list[str], links: list[str]
) -> Survey:
    """The survey of a scan: the index read now, and the files whose stat disagrees with it."""
    index = _read_index(root)
    dirty = set(files) if index is None else index.stat_dirty(files)
    return Survey(files, temp_files, index, dirty, links)


def _read_index(root: str) -> GitIndex | None:
    from qmem_git.store import gitindex

    try:
        return gitindex.read_index(os.path.join(root, ".git"))
    except gitindex.IndexUnreadable:
        return None


def _scan(root: str) -> tuple[dict[str, Stamp], list[str], list[str]]:
    files: dict[str, Stamp] = {}
    temp_files: list[str] = []
    links: list[str] = []
    stack = [("", root)]
    while stack:
        prefix, directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:  # hot: one pass per writer over every memory file
            name = entry.name
            if name.endswith(".md") and entry.is_file(follow_symlinks=False):
                if name != INDEX_NAME or not prefix:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:  # removed between listing and stat
                        continue
                    files[prefix + name] = (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)
            elif entry.is_dir(follow_symlinks=False):
                if name[0] != ".":
                    stack.append((prefix + name + "/", entry.path))
            elif entry.is_symlink():
                if name[0] != ".":
                    links.append(prefix + name)
            elif TEMP_MARKER in name:
                temp_files.append(entry.path)
    return files, temp_files, links


class Pending:
    """A survey running in a child process (or not started: :meth:`result` runs it here).

    The child writes its answer into ``shared``, an anonymous shared mapping made before the
    fork (its pages cost memory only once written): a pipe would stall the child on its 64 KiB
    buffer until the parent, still busy importing, starts to read. Only a child that exited
    with status 0 is believed.
    """

    def __init__(self, root: str, pid: int | None = None, shared: mmap.mmap | None = None) -> None:
        self.root = root
        self.pid = pid  # the child's, None when not forked (or already reaped)
        self._shared = shared

    @property
    def forked(self) -> bool:
        return self.pid is not None

    def result(self) -> Survey:
        """The child's scan compared with the index read here; made here in full if the
        child failed for any reason."""
        if self.pid is None or self._shared is None:
            return survey(self.root)
        index = _read_index(self.root)  # while the child may still be scanning
        status = _reap(self.pid)
        self.pid = None
        try:
            if status == 0:
                files, temp_files, links = _decode(_read_answer(self._shared))
                dirty = set(files) if index is None else index.stat_dirty(files)
                return Survey(files, temp_files, index, dirty, links)
        except (EOFError, ValueError, TypeError, MemoryError):  # not a whole answer, or no room
            pass
        finally:
            self.close()
        return survey(self.root)

    def close(self) -> None:
        """Stop a child whose answer is no longer wanted, reap it, free the shared pages."""
        if self.pid is not None:
            import signal  # not at the top: it imports enum (~5 ms), and this path is rare

            try:  # noqa: SIM105 - contextlib is not imported by this module
                os.kill(self.pid, signal.SIGKILL)  # it holds nothing: the lock fd was closed
            except ProcessLookupError:
                pass
            _reap(self.pid)
            self.pid = None
        if self._shared is not None:
            self._shared.close()
            self._shared = None


_MAGIC = b"qmem-scan-3\n"
_LENGTH = 8  # the answer's size, little-endian, ahead of the answer itself


def start(root: str, parent_only: tuple[int, ...] = ()) -> Pending:
    """Begin :func:`survey` in a forked child when that is safe; collect with ``result()``.

    ``parent_only``: descriptors the child closes at once (the writer lock: an inherited
    ``flock`` descriptor would keep the lock alive if the parent died first).
    """
    if not hasattr(os, "fork") or _threads_running():
        return Pending(root)
    try:
        shared = mmap.mmap(-1, _shared_size(root))
    except OSError:  # no address space to spare: survey here instead
        return Pending(root)
    try:
        pid = os.fork()
    except OSError:  # out of processes or memory: survey here instead
        shared.close()
        return Pending(root)
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        _child(root, shared, parent_only)
    return Pending(root, pid, shared)


def _shared_size(root: str) -> int:
    """Room for the child's answer: each file's path and stat (~1.1 bytes per index byte, whose
    entries hold the same), and 1 MiB for files the index lacks. Reserving no more than that
    keeps a process with little address space (``ulimit -v``) working; a bigger answer makes
    the child give up, and the survey runs in process."""
    try:
        index_bytes = os.stat(os.path.join(root, ".git", "index")).st_size
    except OSError:
        index_bytes = 0
    return 2 * index_bytes + (1 << 20)


def _child(root: str, shared: mmap.mmap, close_fds: tuple[int, ...]) -> None:
    """Survey, answer, exit without running the parent's cleanup (atexit, buffered stdio)."""
    code = 1
    try:
        gc.disable()  # a collection would touch (and so copy) every page the parent shares
        for fd in close_fds:
            os.close(fd)
        data = _encoded(_scan(root))
        if _LENGTH + len(data) <= len(shared):
            shared[_LENGTH : _LENGTH + len(data)] = data
            shared[:_LENGTH] = len(data).to_bytes(_LENGTH, "little")
            code = 0
    finally:
        os._exit(code)


def _read_answer(shared: mmap.mmap) -> bytes:
    size = int.from_bytes(shared[:_LENGTH], "little")
    if _LENGTH + size > len(shared):
        raise ValueError("not a survey")
    return shared[_LENGTH : _LENGTH + size]


def _reap(pid: int) -> int | None:
    """Wait for the child; its exit code (None when a signal ended it or it is not ours)."""
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return None
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else None


def _threads_running() -> bool:
    import sys

    threading = sys.modules.get("threading")
    return threading is not None and threading.active_count() > 1


_Scan = tuple[dict[str, Stamp], list[str], list[str]]


def _encoded(scan: _Scan) -> bytes:
    return _MAGIC + marshal.dumps(scan)


def _decode(data: bytes) -> _Scan:
    if not data.startswith(_MAGIC):
        raise ValueError("not a survey")
    files, temp_files, links = marshal.loads(data[len(_MAGIC) :])
    return files, temp_files, links
