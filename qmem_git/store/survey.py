"""A writer's first look at the work tree: one ``lstat`` per memory file, compared with the index.

Recovery (``store.recovery``) needs, under the writer lock, every memory file with its stat
data, our leftover temp files, the git index and the files whose stat disagrees with it. At
10,000 files that is ~50 ms of ``lstat`` calls (the kernel's share alone; C git pays the same).
The comparison is made against the stat record the last writer left (``store.statrecord``,
each file's full ``lstat`` data, packed folder by folder): each folder's scan is packed the same
way, so an unchanged folder costs two byte-string comparisons. Only when another program wrote
the index since is it parsed, entry by entry (~30 ms), and the record written anew.

A command that still has its imports ahead of it (the ``remember`` fast path: dulwich alone is
~50 ms) can :func:`start` the survey in a forked child right after taking the lock, so the two
run on separate cores; the child writes its answer (``marshal``) into memory shared with the
parent and exits. The answer names the record it was compared with and what differs from it,
not 10,000 files: the parent loads the record and reads the index itself, and its index finds
entries by bisecting the file's bytes (``gitindex.GitIndex.from_base``). This module imports
nothing heavy (the index reader loads in the child), so forking costs the parent ~2 ms. Where
``fork`` is missing, or the process already runs threads (forking them is unsafe), the survey
runs in process, and the result is the same either way.
"""

from __future__ import annotations

import gc
import marshal
import mmap
import os
import struct

from qmem_git.core.limits import INDEX_NAME, MAX_FILE_BYTES, MAX_SCANNED_DOCUMENTS
from qmem_git.store.relocate import repository

TYPE_CHECKING = False  # imported before the fork: the index reader loads in the child
if TYPE_CHECKING:
    from qmem_git.store.gitindex import GitIndex
    from qmem_git.store.statrecord import Folders, Record, Stamp

TEMP_MARKER = ".qmem-tmp-"
NEWEST = 2 * MAX_SCANNED_DOCUMENTS  # the newest files a writer ranks first (store.workdir)
# what the child compares with: (index trailer, index mtime_ns, its stat record or None)
Known = tuple[bytes, int, "Record | None"]


class Survey:
    """``files``: memory file -> its lstat :data:`~qmem_git.store.gitindex.Stamp` (mtime_ns,
    size, ino, ctime_ns), any size (oversized ones are held back).

    ``index`` is None when the git index cannot be read (recovery rebuilds it from HEAD);
    ``dirty`` then lists every file. ``gone``: stage-0 index paths with no memory file on
    disk (None when the index cannot be read). ``oversized``: the files over
    ``MAX_FILE_BYTES``. ``cut``: the mtime_ns of the :data:`NEWEST`-th newest file MEMORY.md
    may be built from (all but MEMORY.md and the oversized), None when there are no more;
    ``store.workdir`` ranks only the files from it on. ``links``: symlinks
    outside dot-folders (never followed; recovery reports those named like memory files
    or standing for a memory folder). Plain class: it is built on every write.
    """

    def __init__(
        self,
        files: dict[str, Stamp],
        temp_files: list[str],
        index: GitIndex | None,
        dirty: set[str],
        links: list[str] | None = None,
        gone: set[str] | None = None,
        oversized: list[str] | None = None,
        cut: int | None = None,
    ) -> None:
        self.files = files
        self.temp_files = temp_files
        self.index = index
        self.dirty = dirty
        self.links = links or []
        self.gone = gone
        self.oversized = oversized or []
        self.cut = cut


def survey(root: str) -> Survey:
    """Scan ``root`` (dot-dirs and symlinks skipped, spec §5) and compare it with the index."""
    from qmem_git.store import gitindex

    git_dir = repository(root)
    known = _known(root)
    seen = _scan(root, _racy_from(known))
    files = seen.files()
    index = _read_ahead(root, known)
    if index is not None and index.recorded is not None:
        changed, gone = differences(index.recorded, seen)
    else:
        try:
            offsets: list[int] = []
            index = gitindex.read_index_data(git_dir, offsets)[0]
        except gitindex.IndexUnreadable:
            dirty = set(files)
            return Survey(files, seen.temp_files, None, dirty, seen.links, None, seen.oversized)
        changed, gone = _compared(index, files, git_dir, offsets, quiet=True)
    cut, dirty = _cut(seen), set(changed)
    return Survey(files, seen.temp_files, index, dirty, seen.links, gone, seen.oversized, cut)


def _racy_from(known: Known | None) -> int:
    """The mtime from which a file is racily clean: the index file's (none: no file is)."""
    return (known[1] if known is not None else 0) or (1 << 64)


def differences(recorded: Folders, seen: _Scan) -> tuple[dict[str, Stamp], set[str]]:
    """(changed, gone) of a scan against the stat record's folders: changed = the files whose
    stamp differs or is not known, or that are racily clean (see :func:`_scan`), with their
    stamps; gone = recorded paths the scan did not find."""
    from qmem_git.store import statrecord

    changed = dict(seen.racy)
    gone: set[str] = set()
    for prefix, (names, flat) in seen.folders.items():
        entry = recorded.get(prefix)
        if entry is not None and entry[0] == "\0".join(names):
            try:
                if entry[1] == statrecord.pack(flat):
                    continue  # the usual case: two comparisons made in C
            except struct.error:  # a time the record cannot hold: compared one by one
                pass
        known = statrecord.folder_stamps(entry) if entry is not None else {}
        for number, name in enumerate(names):
            stamp = tuple(flat[4 * number : 4 * number + 4])
            if known.pop(name, None) != stamp:
                changed[prefix + name] = stamp  # type: ignore[assignment]  # four ints
        gone.update(prefix + name for name in known)
    for prefix in recorded.keys() - seen.folders.keys():
        gone.update(prefix + name for name in recorded[prefix][0].split("\0"))
    return changed, gone


def _compared(
    index: GitIndex, stamps: dict[str, Stamp], git_dir: str, offsets: list[int], *, quiet: bool
) -> tuple[dict[str, Stamp], set[str]]:
    """(changed, gone) the long way, entry by entry; the stamps found clean are recorded with
    the index at once, so the next survey is a comparison of packed folders even if nothing
    is written. ``offsets``: where the index's entries start and end (empty: not known)."""
    from qmem_git.store import statrecord

    dirty = index.stat_dirty(stamps)
    index.adopt_stamps(stamps, dirty)
    assert index.stamps is not None
    try:
        index.recorded = statrecord.write(git_dir, index.checksum, index.stamps, offsets=offsets)
    except OSError:
        if not quiet:
            raise
    return {path: stamps[path] for path in dirty}, index.stamps.keys() - stamps.keys()


class _Scan:
    """What :func:`_scan` found: per folder prefix, its memory files in listing order and their
    stamps as one flat list (four ints each, as ``statrecord.pack`` takes them); our temp
    files (full paths), symlinks, and the files racily clean (with their stamps) or over
    ``MAX_FILE_BYTES`` among them."""

    __slots__ = ("folders", "links", "oversized", "racy", "temp_files")

    def __init__(self) -> None:
        self.folders: dict[str, tuple[list[str], list[int]]] = {}
        self.temp_files: list[str] = []
        self.links: list[str] = []
        self.racy: list[tuple[str, Stamp]] = []
        self.oversized: list[str] = []

    def files(self) -> dict[str, Stamp]:
        """Every memory file found -> its stamp."""
        files: dict[str, Stamp] = {}
        for prefix, (names, flat) in self.folders.items():
            stamps = zip(*[iter(flat)] * 4, strict=True)
            files.update(zip([prefix + name for name in names], stamps, strict=True))
        return files


_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _scan(root: str, racy_ns: int) -> _Scan:
    """Every memory file's lstat, dot-folders and symlinks skipped, and our temp files.

    A file whose mtime is not older than ``racy_ns`` (the index file's) is racily clean: an
    edit in the same clock tick as the index write is invisible to stat, so git hashes such
    files. Each folder is listed through a descriptor, so that each ``lstat`` resolves one
    name instead of the whole path (~15% of the scan); a folder is opened without following
    a symlink (one put in its place since it was listed is skipped), the root as given.
    """
    seen = _Scan()
    odd: list[tuple[str, Stamp]] = []
    stack: list[tuple[str, str, int]] = [("", root, 0)]  # (prefix, folder, open flag)
    while stack:
        prefix, directory, follow = stack.pop()
        listed = _listing(directory, follow)
        if listed is None:
            continue
        fd, entries = listed
        try:
            _take(seen, odd, entries, prefix, directory, racy_ns, stack)
        finally:
            if fd >= 0:
                os.close(fd)
    seen.racy = [(path, stamp) for path, stamp in odd if stamp[0] >= racy_ns]
    seen.oversized = [path for path, stamp in odd if stamp[1] > MAX_FILE_BYTES]
    return seen


def _cut(seen: _Scan) -> int | None:
    """:attr:`Survey.cut` of a scan (ranking 10,000 times costs ~2 ms: a forked survey does it
    while the parent still imports)."""
    mtimes: list[int] = []
    for _, flat in seen.folders.values():
        mtimes += flat[0::4]
    left_out = set(seen.oversized)  # an oversized MEMORY.md is named once, not twice
    if INDEX_NAME in seen.folders.get("", ((), ()))[0]:
        left_out.add(INDEX_NAME)
    for path in left_out:  # any file with the same mtime stands for it as well
        head, _, name = path.rpartition("/")
        names, flat = seen.folders[head + "/" if head else ""]
        mtimes.remove(flat[4 * names.index(name)])
    if len(mtimes) <= NEWEST:
        return None
    import heapq

    return heapq.nlargest(NEWEST, mtimes)[-1]


def _listing(directory: str, follow: int) -> tuple[int, list[os.DirEntry[str]]] | None:
    """(descriptor or -1, entries) of one folder; None when it is gone or no folder now."""
    by_fd = os.scandir in os.supports_fd
    fd = -1
    try:
        if by_fd:
            fd = os.open(directory, _DIR_FLAGS | follow)
            return fd, list(os.scandir(fd))  # entry.path is then the bare name
        return fd, list(os.scandir(directory))
    except OSError:
        if fd >= 0:
            os.close(fd)
        return None


def _take(
    seen: _Scan,
    odd: list[tuple[str, Stamp]],
    entries: list[os.DirEntry[str]],
    prefix: str,
    directory: str,
    racy_ns: int,
    stack: list[tuple[str, str, int]],
) -> None:
    names: list[str] = []
    flat: list[int] = []
    add, extend = names.append, flat.extend
    for entry in entries:  # hot: one pass per writer over every memory file
        name = entry.name
        # every *.md: a MEMORY.md below the root is a plain file to history
        if name.endswith(".md") and entry.is_file(follow_symlinks=False):
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:  # removed between listing and stat
                continue
            mtime, size = st.st_mtime_ns, st.st_size
            add(name)
            extend((mtime, size, st.st_ino, st.st_ctime_ns))
            if mtime >= racy_ns or size > MAX_FILE_BYTES:
                odd.append((prefix + name, (mtime, size, st.st_ino, st.st_ctime_ns)))
        elif entry.is_dir(follow_symlinks=False):
            if name[0] != ".":
                stack.append((prefix + name + "/", os.path.join(directory, name), _NO_FOLLOW))
        elif entry.is_symlink():
            if name[0] != ".":
                seen.links.append(prefix + name)
        elif TEMP_MARKER in name:
            seen.temp_files.append(os.path.join(directory, name))
    if names:
        seen.folders[prefix] = (names, flat)


class Pending:
    """A survey running in a child process (or not started: :meth:`result` runs it here).

    The child writes its answer into ``shared``, an anonymous shared mapping made before the
    fork (its pages cost memory only once written): a pipe would stall the child on its 64 KiB
    buffer until the parent, still busy importing, starts to read. Only a child that says its
    answer is whole, by one byte on the ``ready`` pipe written after it, is believed; the
    parent goes on at once, without waiting for the child's exit (~5 ms of unmapping).
    """

    def __init__(
        self,
        root: str,
        pid: int | None = None,
        shared: mmap.mmap | None = None,
        known: Known | None = None,
        ready: int | None = None,
    ) -> None:
        self.root = root
        self.pid = pid  # the child's, None when not forked (or already reaped)
        self._shared = shared
        self._known = known  # the stat record the child compares with, loaded before the fork
        self._ready = ready  # the pipe's read end: a byte when the answer is whole, else EOF

    @property
    def forked(self) -> bool:
        return self.pid is not None

    def result(self) -> Survey:
        """The child's survey; a fresh one in process if the child failed for any reason."""
        if self.pid is None or self._shared is None:
            return survey(self.root)
        ahead = _read_ahead(self.root, self._known)  # while the child finishes
        try:
            if self._answered():
                return _decode(_read_answer(self._shared), self.root, ahead)
        except (EOFError, ValueError, TypeError, KeyError, MemoryError):  # not whole, or stale
            pass
        finally:
            self.close()
        return survey(self.root)

    def _answered(self) -> bool:
        """Wait for the child's word that its answer is whole (False: it died or gave up)."""
        if self._ready is None:
            return False
        try:
            word = os.read(self._ready, 1)
        except OSError:
            word = b""
        if word and self.pid is not None:
            _exiting.append(self.pid)  # reaped later: its exit is no longer worth waiting for
            self.pid = None
        return bool(word)

    def close(self) -> None:
        """Stop a child whose answer is no longer wanted, reap it, free the shared pages."""
        if self._ready is not None:
            os.close(self._ready)
            self._ready = None
        _reap_exited()
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


_MAGIC = b"qmem-survey-7\n"
_exiting: list[int] = []  # children that answered and are exiting: reaped without waiting
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
    known = _known(root)  # loaded once, for both: the child compares, the parent commits
    try:
        ready, said = os.pipe()
    except OSError:  # out of descriptors: survey here instead
        shared.close()
        return Pending(root)
    try:
        pid = os.fork()
    except OSError:  # out of processes or memory: survey here instead
        shared.close()
        os.close(ready)
        os.close(said)
        return Pending(root)
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        _child(root, shared, (*parent_only, ready), known, said)
    os.close(said)  # the child's alone: its exit, answered or not, ends the parent's read
    return Pending(root, pid, shared, known, ready)


def _known(root: str) -> Known | None:
    """(trailer, index mtime_ns, stat record) of the index; the record is None when there is
    none for this index."""
    from qmem_git.store import gitindex, statrecord

    git_dir = repository(root)
    tail = gitindex.index_tail(git_dir)
    if tail is None:
        return None
    return tail[0], tail[1], statrecord.read(git_dir, tail[0])


def _shared_size(root: str) -> int:
    """Room for the child's answer at its largest: every file changed (its path and stamp,
    ~0.6 bytes per index byte, whose entries hold the same) and every indexed path gone, and
    1 MiB for files the index lacks; an unchanged tree's answer is a few bytes. Reserving no
    more than that keeps a process with little address space (``ulimit -v``) working; a
    bigger answer makes the child give up, and the survey runs in process."""
    try:
        index_bytes = os.stat(os.path.join(repository(root), "index")).st_size
    except OSError:
        index_bytes = 0
    return 2 * index_bytes + (1 << 20)


def _child(
    root: str, shared: mmap.mmap, close_fds: tuple[int, ...], known: Known | None, said: int
) -> None:
    """Survey, answer, say so on ``said``; exit without running the parent's cleanup (atexit,
    buffered stdio)."""
    code = 1
    try:
        gc.disable()  # a collection would touch (and so copy) every page the parent shares
        for fd in close_fds:
            os.close(fd)
        data = _encoded(root, known)
        if _LENGTH + len(data) <= len(shared):
            shared[_LENGTH : _LENGTH + len(data)] = data
            shared[:_LENGTH] = len(data).to_bytes(_LENGTH, "little")
            os.write(said, b"!")
            code = 0
    finally:
        os._exit(code)


def _read_answer(shared: mmap.mmap) -> bytes:
    size = int.from_bytes(shared[:_LENGTH], "little")
    if _LENGTH + size > len(shared):
        raise ValueError("not a survey")
    return shared[_LENGTH : _LENGTH + size]


def _reap_exited() -> None:
    """Reap the answered children that have exited by now (the rest stay on the list)."""
    for pid in list(_exiting):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            _exiting.remove(pid)


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


# (index trailer, changed files -> stamp, gone, oversized, temp files, links, cut)
_Wire = tuple[
    bytes, "dict[str, Stamp]", "set[str]", "list[str]", "list[str]", "list[str]", "int | None"
]


def _encoded(root: str, known: Known | None) -> bytes:
    """The child's survey, told against the stat record of the index it compared with (made
    now if there was none): the files that differ from it and the recorded paths now gone.
    ``known``: as :func:`_known` gave it before the fork."""
    from qmem_git.store import gitindex

    if known is None:  # no index yet, or not a file: the parent surveys (rare, and slow anyway)
        raise ValueError("no index to compare with")
    checksum, _, record = known
    seen = _scan(root, _racy_from(known))
    if record is not None:
        changed, gone = differences(record[0], seen)
    else:
        git_dir = repository(root)
        offsets: list[int] = []
        index = gitindex.read_index_data(git_dir, offsets)[0]
        if index.checksum != checksum:
            raise ValueError("the index changed while it was read")
        changed, gone = _compared(index, seen.files(), git_dir, offsets, quiet=False)
    wire: _Wire = (checksum, changed, gone, seen.oversized, seen.temp_files, seen.links, _cut(seen))
    return _MAGIC + marshal.dumps(wire)


def _read_ahead(root: str, known: Known | None) -> GitIndex | None:
    """The index with the stat record of ``known`` when that is still the index's, read while
    the child finishes."""
    if known is None or known[2] is None:
        return None
    from qmem_git.store import gitindex

    return gitindex.read_recorded(repository(root), known[0], known[2])


def _decode(data: bytes, root: str, ahead: GitIndex | None = None) -> Survey:
    """The child's answer as a :class:`Survey`: the index and stat record it names (``ahead``
    when that is the one, else read now; the child made the record if there was none), with
    the differences it found applied. ValueError when the index or its record changed since."""
    if not data.startswith(_MAGIC):
        raise ValueError("not a survey")
    from qmem_git.store import gitindex

    wire: _Wire = marshal.loads(data[len(_MAGIC) :])
    checksum, changed, gone, oversized, temp_files, links, cut = wire
    index = ahead
    if index is None or index.checksum != checksum:
        index = gitindex.read_recorded(repository(root), checksum)
    if index is None or index.stamps is None:
        raise ValueError("the index changed since the survey")
    files = dict(index.stamps)
    for path in gone:
        del files[path]
    files.update(changed)
    if None in files.values():  # a recorded unknown the child did not report: not ours
        raise ValueError("the survey does not match the stat record")
    scanned: dict[str, Stamp] = files  # type: ignore[assignment]  # no None left
    return Survey(scanned, temp_files, index, set(changed), links, gone, oversized, cut)
