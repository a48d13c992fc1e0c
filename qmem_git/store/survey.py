"""A writer's first look at the work tree: one ``lstat`` per memory file, compared with the index.

Recovery (``store.recovery``) needs, under the writer lock, every memory file with its stat
data, our leftover temp files, the git index and the files whose stat disagrees with it. At
10,000 files that is ~30 ms of ``lstat`` calls and ~15 ms to parse the index and compare.

A command that still has its imports ahead of it (the ``remember`` fast path: dulwich alone is
~30 ms) can :func:`start` the survey in a forked child right after taking the lock, so the two
run on separate cores; the child writes its answer (``marshal``) into memory shared with the
parent and exits. It answers in two parts: what it found on disk as soon as its scan is done
(the parent decodes those 10,000 stamps, ~4 ms, while the child compares), then its comparison
with the index. The parent reads the index file itself meanwhile and checks its SHA-1
(hashlib is no import of the child's); it uses the child's comparison only when the child
read the same file (the same stat and trailer), and takes from the child the offsets of the
file's entries, not the entries: the parent's index is the file's bytes, searched and
written back by splicing (``gitindex.Spliced``). Handing the 10,000 raw entries over cost
the child ~3 ms and the parent ~2 ms after the wait; parsing them again, ~8 ms. This module imports
nothing heavy (the index reader loads in the child), so forking costs the parent ~2 ms. Where
``fork`` is missing, or the process already runs threads (forking them is unsafe), the survey
runs in process, and the result is the same either way.
"""

from __future__ import annotations

import gc
import marshal
import mmap
import os
import stat

from qmem_git.core.limits import INDEX_NAME, MAX_SCANNED_DOCUMENTS
from qmem_git.store.relocate import repository

TYPE_CHECKING = False  # imported before the fork: the index reader loads in the child
if TYPE_CHECKING:
    from qmem_git.store.gitindex import GitIndex

TEMP_MARKER = ".qmem-tmp-"
NEWEST = 2 * MAX_SCANNED_DOCUMENTS  # the newest files a writer ranks first (store.workdir)
Stamp = tuple[int, int, int, int]  # a file's lstat: mtime_ns, size, ino, ctime_ns


class Survey:
    """``files``: memory file -> its lstat :data:`Stamp` (mtime_ns, size, ino, ctime_ns), any
    size (recovery holds back the oversized ones).

    ``index`` is None when the git index cannot be read (recovery rebuilds it from HEAD);
    ``dirty`` then lists every file. ``gone``: stage-0 index paths with no memory file on
    disk (None when the index cannot be read). ``cut``: the mtime_ns of the
    :data:`NEWEST`-th newest file MEMORY.md may be built from (all but MEMORY.md), None when
    there are no more;
    ``store.workdir`` ranks only the files from it on. ``links``: symlinks (never committed;
    recovery reports those named like memory files or standing for a memory folder).
    ``linked``: the ``*.md`` files Qwen Code reaches through them (a linked file, or files in a
    linked folder), with the stamp of what they point at: MEMORY.md lists them, as Qwen's
    does, but they are never committed. Plain class: it is built on every write.
    """

    def __init__(
        self,
        files: dict[str, Stamp],
        temp_files: list[str],
        index: GitIndex | None,
        dirty: set[str],
        links: list[str] | None = None,
        gone: set[str] | None = None,
        cut: int | None = None,
        linked: dict[str, Stamp] | None = None,
    ) -> None:
        self.files = files
        self.linked = linked or {}
        self.temp_files = temp_files
        self.index = index
        self.dirty = dirty
        self.links = links or []
        self.gone = gone
        self.cut = cut


def survey(root: str) -> Survey:
    """Scan ``root`` as Qwen Code lists it (see :func:`_scan`) and compare it with the index."""
    from qmem_git.store import gitindex

    seen = _scan(root)
    index: GitIndex | None = None
    dirty, gone = set(seen.files), None
    try:
        index = gitindex.read_index(repository(root))
    except gitindex.IndexUnreadable:
        pass
    else:
        dirty, gone = compared(index, seen.files)
    cut = _cut(seen)
    found = (seen.links, gone, cut, seen.linked)
    return Survey(seen.files, seen.temp_files, index, dirty, *found)


def compared(index: GitIndex, files: dict[str, Stamp]) -> tuple[set[str], set[str]]:
    """(dirty, gone): the ``files`` whose stat differs from their index entry (or that have
    none, or are racily clean), and the stage-0 index paths with no file."""
    gone = index.entries.keys() - files.keys()  # in C: no loop over 10,000 paths here
    return index.stat_dirty(files), {path for path in gone if "\0" not in path}


class _Scan:
    """What :func:`_scan` found: every memory file -> its stamp; our temp files (full paths),
    symlinks, and what Qwen reaches through symlinks."""

    __slots__ = ("files", "linked", "links", "temp_files")

    def __init__(self) -> None:
        self.files: dict[str, Stamp] = {}
        self.temp_files: list[str] = []
        self.links: list[str] = []
        self.linked: dict[str, Stamp] = {}


_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _scan(root: str) -> _Scan:
    """Every ``*.md`` file's lstat, at any depth (dot-folders too, as Qwen Code's recursive
    ``readdir`` lists them), and our temp files. Symlinks are noted, never committed; the
    ``*.md`` files Qwen reaches through them go to ``linked`` (see :func:`_follow`).

    Each folder is listed through a descriptor, so that each ``lstat`` resolves one name
    instead of the whole path (~15% of the scan); a folder is opened without following a
    symlink (one put in its place since it was listed is skipped), the root as given.
    """
    seen = _Scan()
    stack: list[tuple[str, str, int]] = [("", root, 0)]  # (prefix, folder, open flag)
    while stack:
        prefix, directory, follow = stack.pop()
        listed = _listing(directory, follow)
        if listed is None:
            continue
        fd, entries = listed
        try:
            _take(seen, entries, prefix, directory, stack)
        finally:
            if fd >= 0:
                os.close(fd)
    return seen


def _cut(seen: _Scan) -> int | None:
    """:attr:`Survey.cut` of a scan (ranking 10,000 times costs ~2 ms: a forked survey does it
    while the parent still imports)."""
    mtimes = [stamp[0] for path, stamp in seen.files.items() if path != INDEX_NAME]
    mtimes += [stamp[0] for stamp in seen.linked.values()]
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
    entries: list[os.DirEntry[str]],
    prefix: str,
    directory: str,
    stack: list[tuple[str, str, int]],
) -> None:
    files = seen.files
    for entry in entries:  # hot: one pass per writer over every memory file
        name = entry.name
        # every *.md: a MEMORY.md below the root is a plain file to history
        if name.endswith(".md") and entry.is_file(follow_symlinks=False):
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:  # removed between listing and stat
                continue
            files[prefix + name] = (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)
        elif entry.is_dir(follow_symlinks=False):
            stack.append((prefix + name + "/", os.path.join(directory, name), _NO_FOLLOW))
        elif entry.is_symlink():
            seen.links.append(prefix + name)
            _follow(seen.linked, prefix + name, os.path.join(directory, name))
        elif TEMP_MARKER in name:
            seen.temp_files.append(os.path.join(directory, name))


def _follow(linked: dict[str, Stamp], rel: str, path: str) -> None:
    """What Qwen Code lists behind the symlink at ``rel`` (``store.walk.agent_listing``, its
    listing to the letter): the file it points at when that is a ``*.md`` one, every ``*.md``
    below the folder it points at. A folder Qwen could not list either is left out."""
    from qmem_git.errors import QmemError
    from qmem_git.store.walk import agent_listing

    try:
        st = os.stat(path)
        found = agent_listing(path) if stat.S_ISDIR(st.st_mode) else [("", st)]
    except (OSError, QmemError):  # dangling, a loop, unlistable or endless: as Qwen, nothing
        return
    for sub, info in found:
        name = f"{rel}/{sub}" if sub else rel
        if name.endswith(".md") and name.rsplit("/", 1)[-1] != INDEX_NAME:
            linked[name] = (info.st_mtime_ns, info.st_size, info.st_ino, info.st_ctime_ns)


class Pending:
    """A survey running in a child process (or not started: :meth:`result` runs it here).

    The child writes its answer into ``shared``, an anonymous shared mapping made before the
    fork (its pages cost memory only once written): a pipe would stall the child on its 64 KiB
    buffer until the parent, still busy importing, starts to read. Only a child that says its
    answer is whole, by one byte on the ``ready`` pipe written after it (and one after its
    first part), is believed; the parent goes on at once, without waiting for the child's exit
    (~5 ms of unmapping).
    """

    def __init__(
        self,
        root: str,
        pid: int | None = None,
        shared: mmap.mmap | None = None,
        ready: int | None = None,
    ) -> None:
        self.root = root
        self.pid = pid  # the child's, None when not forked (or already reaped)
        self._shared = shared
        self._ready = ready  # the pipe's read end: a byte when the answer is whole, else EOF

    @property
    def forked(self) -> bool:
        return self.pid is not None

    def result(self) -> Survey:
        """The child's survey; a fresh one in process if the child failed for any reason.

        The child answers in two parts (see :func:`_child`): what it found on disk, as soon as
        its scan is done, then its comparison with the index. The first is decoded here while
        the child still compares, when it is there by then."""
        if self.pid is None or self._shared is None:
            return survey(self.root)
        try:
            read = _parent_index(self.root)  # while the child still scans
            word, found = self._word(), None
            if word == _FOUND:
                found = _found(self._shared)
                word = self._word()
            if word == _WHOLE:
                return _decode(self._shared, self.root, read, found)
        except (EOFError, ValueError, TypeError, KeyError, MemoryError):  # not whole, or stale
            pass
        finally:
            self.close()
        return survey(self.root)

    def _word(self) -> bytes:
        """The child's next word on the pipe (b"" when it died or gave up); its exit is no
        longer worth waiting for once it says its answer is whole."""
        if self._ready is None:
            return b""
        try:
            word = os.read(self._ready, 1)
        except OSError:
            word = b""
        if word == _WHOLE and self.pid is not None:
            _exiting.append(self.pid)  # reaped later
            self.pid = None
        return word

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


_MAGIC = b"qmem-survey-12\n"
_exiting: list[int] = []  # children that answered and are exiting: reaped without waiting
_LENGTH = 8  # each part's size, little-endian, ahead of the part itself
_FOUND, _WHOLE = b"1", b"!"  # the child's words: its first part is written; both are


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
        _child(root, shared, (*parent_only, ready), said)
    os.close(said)  # the child's alone: its exit, answered or not, ends the parent's read
    return Pending(root, pid, shared, ready)


def _shared_size(root: str) -> int:
    """Room for the child's answer: every file with its stamp (~0.6 bytes per byte of the
    index, whose entries hold the same), every indexed path again (all changed or gone), and
    4 MiB for files the index lacks; its pages cost memory only once written. Reserving no
    more than that keeps a
    process with little address space (``ulimit -v``) working; a bigger answer makes the child
    give up, and the survey runs in process."""
    try:
        index_bytes = os.stat(os.path.join(repository(root), "index")).st_size
    except OSError:
        index_bytes = 0
    return 2 * index_bytes + (4 << 20)


def _child(root: str, shared: mmap.mmap, close_fds: tuple[int, ...], said: int) -> None:
    """Survey and answer in two parts, each followed by its word on ``said`` (what was found on
    disk, as soon as the scan is done; then the comparison with the index); exit without
    running the parent's cleanup (atexit, buffered stdio)."""
    code = 1
    try:
        gc.disable()  # a collection would touch (and so copy) every page the parent shares
        for fd in close_fds:
            os.close(fd)
        seen = _scan(root)
        end = _put(shared, 0, _found_part(seen))
        os.write(said, _FOUND)
        _put(shared, end, _compared_part(root, seen))
        os.write(said, _WHOLE)
        code = 0
    finally:
        os._exit(code)


def _put(shared: mmap.mmap, at: int, part: bytes) -> int:
    """Write ``part`` (length first) at ``at``; where the next one goes. ValueError when the
    room is too small (the parent then surveys itself)."""
    end = at + _LENGTH + len(part)
    if end > len(shared):
        raise ValueError("no room for the survey")
    shared[at + _LENGTH : end] = part
    shared[at : at + _LENGTH] = len(part).to_bytes(_LENGTH, "little")
    return end


def _part(data: bytes | mmap.mmap, at: int) -> tuple[bytes, int]:
    """The part written at ``at`` and where the next one starts."""
    size = int.from_bytes(data[at : at + _LENGTH], "little")
    end = at + _LENGTH + size
    if size == 0 or end > len(data):
        raise ValueError("not a survey")
    return data[at + _LENGTH : end], end


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


# (files -> stamp, temp files, links, cut, linked): what the child found on disk
_Found = tuple["dict[str, Stamp]", "list[str]", "list[str]", "int | None", "dict[str, Stamp]"]
# (index trailer, index file stamp, its entries' offsets, dirty, gone): its comparison
_Compared = tuple[bytes, "Stamp", "list[int]", "set[str]", "set[str]"]
_IndexFile = tuple[bytes, "Stamp"]  # the index file's bytes and stamp, as the parent read it


def _found_part(seen: _Scan) -> bytes:
    found: _Found = (seen.files, seen.temp_files, seen.links, _cut(seen), seen.linked)
    return _MAGIC + marshal.dumps(found)


def _compared_part(root: str, seen: _Scan) -> bytes:
    """The comparison with the index, its trailer, stamp and entry offsets; ValueError when
    there is no index file to compare with (the parent surveys: rare, and slow anyway)."""
    from qmem_git.store import gitindex

    offsets: list[int] = []
    index = gitindex.read_index(repository(root), verify=False, offsets=offsets)  # the parent
    if not index.checksum or index.stamp is None:  # checks the hash: it has hashlib by then
        raise ValueError("no index to compare with")
    dirty, gone = compared(index, seen.files)
    part: _Compared = (index.checksum, index.stamp, offsets, dirty, gone)
    return marshal.dumps(part)


def _found(data: bytes | mmap.mmap) -> _Found:
    """The first part of the answer: what the child found on disk."""
    part, _ = _part(data, 0)
    if not part.startswith(_MAGIC):
        raise ValueError("not a survey")
    found: _Found = marshal.loads(memoryview(part)[len(_MAGIC) :])
    return found


def _parent_index(root: str) -> _IndexFile | None:
    """The index file as the parent reads it while the child scans (its SHA-1 checked: ~1 ms,
    where a parse of its 10,000 entries is ~8), None when it cannot."""
    from qmem_git.store import gitindex

    try:
        with open(os.path.join(repository(root), "index"), "rb") as handle:
            data = handle.read()
            st = os.fstat(handle.fileno())
    except OSError:
        return None
    return (data, gitindex.file_stamp(st)) if gitindex.checksum_holds(data) else None


def _decode(
    data: bytes | mmap.mmap, root: str, read: _IndexFile | None = None, found: _Found | None = None
) -> Survey:
    """The child's whole answer as a :class:`Survey` (``found``: its first part, decoded
    already), its index the file the parent ``read`` (read now when not given), spliced with
    the child's offsets (``gitindex.Spliced``). ValueError when that is not the file the child
    compared with (rewritten since, or damaged: the child left the SHA-1 check to us)."""
    from qmem_git.store import gitindex

    files, temp_files, links, cut, linked = _found(data) if found is None else found
    _, end = _part(data, 0)
    part, _ = _part(data, end)
    compared: _Compared = marshal.loads(part)
    checksum, stamp, offsets, dirty, gone = compared
    if read is None:
        read = _parent_index(root)
    if read is None or read[1] != stamp or read[0][-20:] != checksum:
        raise ValueError("the index changed since the survey, or is damaged")
    index = gitindex.spliced_index(repository(root), read[0], stamp, offsets)
    return Survey(files, temp_files, index, dirty, links, gone, cut, linked)
