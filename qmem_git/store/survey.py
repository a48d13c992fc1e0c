"""A writer's first look at the work tree: one ``lstat`` per memory file, compared with the index.

Recovery (``store.recovery``) needs, under the writer lock, every memory file with its stat
data, our leftover temp files, the parsed git index and the files whose stat disagrees with
it. At 10,000 files that is ~50 ms of ``lstat`` calls (the kernel's share alone; C git pays the
same) plus ~25 ms of index parsing and comparing.

A command that still has its imports ahead of it (the ``remember`` fast path: dulwich alone is
~50 ms) can :func:`start` the survey in a forked child right after taking the lock, so the two
run on separate cores; the child writes its answer (``marshal``) into memory shared with the
parent and exits. The answer carries the index file's bytes and where each entry starts, not
10,000 parsed entries: the parent's index finds entries by bisecting and writes a change by
splicing (``gitindex.GitIndex.from_base``). This module imports nothing heavy (the index
reader loads in the child), so forking costs the parent ~2 ms. Where ``fork`` is missing, or
the process already runs threads (forking them is unsafe), the survey runs in process, and
the result is the same either way.
"""

from __future__ import annotations

import gc
import marshal
import mmap
import os

from qmem_git.core.limits import INDEX_NAME, MAX_FILE_BYTES

TYPE_CHECKING = False  # imported before the fork: the index reader loads in the child
if TYPE_CHECKING:
    from collections.abc import Sequence

    from qmem_git.store.gitindex import GitIndex

TEMP_MARKER = ".qmem-tmp-"
Stamp = tuple[int, int, int, int]  # a file's lstat: (mtime_ns, size, ino, ctime_ns)


class Survey:
    """``files``: memory file -> (mtime_ns, size), any size (oversized ones get quarantined).

    ``index`` is None when the git index cannot be read (recovery rebuilds it from HEAD);
    ``dirty`` then lists every file. ``gone``: stage-0 index paths with no memory file on
    disk (None when the index cannot be read). ``oversized``: the files over
    ``MAX_FILE_BYTES``. ``links``: symlinks
    outside dot-folders (never followed; recovery quarantines those named like memory files
    or standing for a memory folder). Plain class: it is built on every write.
    """

    def __init__(
        self,
        files: dict[str, tuple[int, int]],
        temp_files: list[str],
        index: GitIndex | None,
        dirty: set[str],
        links: list[str] | None = None,
        gone: set[str] | None = None,
        oversized: list[str] | None = None,
    ) -> None:
        self.files = files
        self.temp_files = temp_files
        self.index = index
        self.dirty = dirty
        self.links = links or []
        self.gone = gone
        self.oversized = oversized or []


def survey(root: str) -> Survey:
    """Scan ``root`` (dot-dirs and symlinks skipped, spec §5) and compare it with the index."""
    from qmem_git.store import gitindex

    stamps, temp_files, links = _scan(root)
    try:
        index: GitIndex | None = gitindex.read_index(os.path.join(root, ".git"))
    except gitindex.IndexUnreadable:
        index = None
    return _survey_of(stamps, temp_files, links, index)


def _survey_of(
    stamps: dict[str, Stamp], temp_files: list[str], links: list[str], index: GitIndex | None
) -> Survey:
    dirty = set(stamps) if index is None else index.stat_dirty(stamps)
    gone = None if index is None else _gone(index, stamps)
    files = {rel: (stamp[0], stamp[1]) for rel, stamp in stamps.items()}
    oversized = [rel for rel, stamp in stamps.items() if stamp[1] > MAX_FILE_BYTES]
    return Survey(files, temp_files, index, dirty, links, gone, oversized)


def _gone(index: GitIndex, stamps: dict[str, Stamp]) -> set[str]:
    return {path for path in index.entries.keys() - stamps.keys() if "\0" not in path}


def _scan(root: str) -> tuple[dict[str, Stamp], list[str], list[str]]:
    """Memory files -> :data:`Stamp`, our temp files, symlinks (the :func:`survey` rules)."""
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
        """The child's survey; a fresh one in process if the child failed for any reason."""
        if self.pid is None or self._shared is None:
            return survey(self.root)
        status = _reap(self.pid)
        self.pid = None
        try:
            if status == 0:
                return _decode(_read_answer(self._shared), self.root)
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


_MAGIC = b"qmem-survey-5\n"
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
    """Room for the child's answer: the index file itself, each file's path and times (~0.6
    bytes per index byte, whose entries hold the same) and the entry offsets, and 1 MiB for
    files the index lacks. Reserving no more than that keeps a process with little address
    space (``ulimit -v``) working; a bigger answer makes the child give up, and the survey
    runs in process."""
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
        data = _encoded(root)
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


_PackedIndex = tuple[int, int, bytes, "str | None", bytes, bytes]
_Files = dict[str, tuple[int, int]]
_Paths = list[str]
_Wire = tuple[
    _Files,
    _Paths,  # temp files
    _Paths,  # links
    _Paths,  # dirty
    "_Paths | None",  # gone
    _Paths,  # oversized
    "_PackedIndex | None",
]


def _encoded(root: str) -> bytes:
    """The child's survey: the index travels as its bytes and entry offsets (version 2/3)."""
    from array import array

    from qmem_git.store import gitindex

    stamps, temp_files, links = _scan(root)
    offsets: list[int] = []
    data = b""
    try:
        index: GitIndex | None
        index, data = gitindex.read_index_data(os.path.join(root, ".git"), offsets)
    except gitindex.IndexUnreadable:
        index = None
    seen = _survey_of(stamps, temp_files, links, index)
    packed: _PackedIndex | None = None
    if index is not None and offsets:
        meta = (index.version, index.mtime_ns, index.checksum, index.head)
        packed = (*meta, data, array("Q", offsets).tobytes())
    gone = None if seen.gone is None else sorted(seen.gone)
    dirty = sorted(seen.dirty)
    wire: _Wire = (seen.files, temp_files, links, dirty, gone, seen.oversized, packed)
    return _MAGIC + marshal.dumps(wire)


def _decode(data: bytes, root: str) -> Survey:
    """The child's answer as a :class:`Survey`; an index it did not send is read here."""
    if not data.startswith(_MAGIC):
        raise ValueError("not a survey")
    from qmem_git.store import gitindex

    files, temp_files, links, dirty, gone, oversized, packed = marshal.loads(data[len(_MAGIC) :])
    if packed is None:  # none, unreadable, or version 4: read here (as the child did)
        try:
            index = gitindex.read_index(os.path.join(root, ".git"))
        except gitindex.IndexUnreadable:
            index = None
    else:
        version, mtime_ns, checksum, head, raw, offsets = packed
        index = gitindex.GitIndex.from_base(raw, _offsets(offsets), version, mtime_ns, checksum)
        index.head = head
    gone_set = None if gone is None else set(gone)
    return Survey(files, temp_files, index, set(dirty), links, gone_set, oversized)


def _offsets(data: bytes) -> Sequence[int]:
    from array import array

    offsets = array("Q")
    offsets.frombytes(data)
    return offsets
