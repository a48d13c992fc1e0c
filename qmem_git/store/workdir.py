"""The memory work tree on disk: atomic writes and scanning (spec §5, ARCHITECTURE §3)."""

from __future__ import annotations

import contextlib
import heapq
import os
import stat
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from operator import itemgetter
from typing import NamedTuple

from qmem_git.core.codec import document_from_fields, parse_document
from qmem_git.core.index import IndexResult, build_index, qwen_order
from qmem_git.core.model import INDEX_NAME, MAX_SCANNED_DOCUMENTS, Document
from qmem_git.core.names import fold_name, is_indexable_path
from qmem_git.store import doccache
from qmem_git.store.survey import TEMP_MARKER
from qmem_git.store.walk import read_text as read_text  # re-exported: ops read through here
from qmem_git.store.walk import walk

# a scanned file: -mtime in float ms, basename, relative path, mtime_ns and size; listed in
# Qwen's scan order (core.index.qwen_order)
_Keyed = tuple[str, int, int]  # relative path, mtime (ns), size


class _SharedScan:
    """A writer's scan of one root (rel -> (mtime_ns, size, ...)) and the documents it parsed."""

    def __init__(
        self,
        root: str,
        files: dict[str, tuple[int, ...]],
        cuts: Mapping[int, int],
        changed: set[str] | None = None,
        cache: str | None = None,
    ) -> None:
        self.root = os.path.abspath(root)
        self.changed = changed  # paths whose stat differed from the git index
        self.files = files
        self.docs: dict[tuple[str, int, int], Document | None] = {}
        self.cuts = dict(cuts)  # scan-order prefix length -> its mtime_ns cut
        self.cache = cache  # recall's parsed documents (``store.doccache``), shared with it
        self.kept: dict[str, doccache.Entry] | None = None  # its entries, read on first need
        self.entries: dict[str, doccache.Entry] = {}  # the entries of ``docs``
        self.parsed = False  # whether a document was parsed here (not taken from ``kept``)


_shared: list[_SharedScan] = []


@contextlib.contextmanager
def shared_scan(
    root: str,
    files: dict[str, tuple[int, ...]],
    cuts: Mapping[int, int] | None = None,
    changed: set[str] | None = None,
    cache: str | None = None,
) -> Iterator[None]:
    """Within the block, :func:`scan_documents` of ``root`` uses ``files`` instead of walking.

    For a writer that holds the lock, has just scanned (``store.recovery``) and keeps ``files``
    current as it writes: the plan and the MEMORY.md render of one command then cost no second
    and third ``lstat`` pass (~10,000 syscalls at 10,000 files), and each document is parsed
    once. Files written through :func:`atomic_write` meanwhile are parsed again, and the
    stat of those ``files`` knew is kept current. ``cuts``: mtime cuts of ``files`` already
    known (see :func:`_scan_order`; the survey ranks the newest while the writer imports).
    ``cache``: recall's document cache (``store.doccache``): documents it holds for unchanged
    files are not parsed again, and what the block parsed is kept there for recall and the
    next writer.
    """
    scope = _SharedScan(root, files, cuts or {}, changed, cache)
    _shared.append(scope)
    try:
        yield
    finally:
        _shared.remove(scope)
    _keep_documents(scope)


def _keep_documents(scope: _SharedScan) -> None:
    """Keep the documents parsed in ``scope`` in the document cache, unless they are what it
    held already."""
    entries = {
        rel: entry
        for rel, entry in scope.entries.items()
        if scope.files.get(rel, (None, None))[:2] == entry[:2]
    }
    if scope.cache is None or not entries:
        return
    if scope.parsed or scope.kept is None or entries.keys() != scope.kept.keys():
        doccache.save_cache(scope.cache, scope.root, entries)


def _note_rewritten(path: str, mtime_ns: int | None, size: int) -> None:
    """A file was rewritten: parse it again even if its mtime and size look the same, and
    keep the stat of a file the scan knew."""
    if _shared:
        path = os.path.abspath(path)
        for scope in _shared:
            rel = os.path.relpath(path, scope.root).replace(os.sep, "/")
            scope.docs = {key: doc for key, doc in scope.docs.items() if key[0] != rel}
            if rel in scope.files:
                when = os.lstat(path).st_mtime_ns if mtime_ns is None else mtime_ns
                scope.files[rel] = (when, size)


def changed_in_scan(root: str) -> set[str] | None:
    """The paths the enclosing :func:`shared_scan` of ``root`` found changed, or None."""
    scope = _shared_for(root)
    return scope.changed if scope is not None else None


def files_in_scan(root: str) -> Collection[str] | None:
    """The memory files the enclosing :func:`shared_scan` of ``root`` found, or None."""
    scope = _shared_for(root)
    return scope.files.keys() if scope is not None else None


def _shared_for(root: str) -> _SharedScan | None:
    if not _shared:
        return None
    root = os.path.abspath(root)
    return next((scope for scope in reversed(_shared) if scope.root == root), None)


class FileInfo(NamedTuple):
    """A candidate memory file found by the scan (relative path uses ``/``).

    A NamedTuple, not a frozen dataclass: ~0.2 ms instead of ~1.4 ms at import, on every command.
    """

    relative_path: str
    path: str
    mtime_ns: int
    size: int

    @property
    def filename(self) -> str:
        return self.relative_path.rsplit("/", 1)[-1]


FILE_MODE_BITS = 0o644  # what a memory file is on disk: git's 100644, the only mode we commit


def atomic_write(
    path: str,
    data: bytes,
    mtime_ns: int | None = None,
    *,
    durable: bool = True,
    mode: int | None = None,
) -> None:
    """Temp file in the same dir, fsync, replace, fsync the dir; mtime (optional) set first.

    Permission bits: ``mode`` when given; else those of the file being replaced (a 0600
    settings file holding an API key stays 0600, an executable bit stays, as git keeps it);
    else 0644. ``durable=False`` skips both fsyncs, for callers that write many files and
    fsync each folder once themselves (a checkout from history during sync).
    """
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    if mode is None:
        mode = file_mode(path)
    fd, tmp = _create_temp(directory, temp_prefix(os.path.basename(path)))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        if mtime_ns is not None:
            os.utime(tmp, ns=(mtime_ns, mtime_ns))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(directory)
    _note_rewritten(path, mtime_ns, len(data))


def without_exec_bits(path: str, st: os.stat_result) -> os.stat_result:
    """Memory files are committed as mode 100644: an executable bit someone set is taken off,
    so that the git index agrees with HEAD (no staged mode change). Returns the new stat."""
    if not st.st_mode & 0o111:
        return st
    os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o111)
    return os.lstat(path)


def file_mode(path: str) -> int:
    """The permission bits of the regular file at ``path`` (a symlink is followed); 0644 when
    there is none. What :func:`atomic_write` keeps, and what a backup of the file should get."""
    try:
        st = os.stat(path)
    except OSError:
        return 0o644
    return stat.S_IMODE(st.st_mode) & 0o777 if stat.S_ISREG(st.st_mode) else 0o644


_NAME_MAX = 255  # bytes in one file name, on every file system we write to
_RANDOM_CHARS = 12


def temp_prefix(name: str) -> str:
    """``.<name>.qmem-tmp-`` for a temp file beside ``name``, with ``name`` shortened (bytes)
    so that the temp name, random part included, still fits in one file name: a memory with a
    250-byte name must be writable too."""
    room = _NAME_MAX - 1 - len(TEMP_MARKER) - _RANDOM_CHARS
    raw = os.fsencode(name)
    return "." + os.fsdecode(raw[:room]) + TEMP_MARKER


def _create_temp(directory: str, prefix: str) -> tuple[int, str]:
    """``tempfile.mkstemp`` without importing tempfile (~3 ms with ``random``) on every write."""
    while True:
        tmp = os.path.join(directory, prefix + os.urandom(_RANDOM_CHARS // 2).hex())
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), tmp
        except FileExistsError:  # pragma: no cover - 48 random bits
            continue


def fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def iter_memory_files(root: str) -> Iterator[FileInfo]:
    """Regular ``*.md`` memory files under root (the rules of :mod:`qmem_git.store.walk`)."""
    for _, _, rel, mtime_ns, size in walk(root):
        yield FileInfo(rel, os.path.join(root, rel), mtime_ns, size)


def load_document(info: FileInfo) -> Document | None:
    text = read_text(info.path)
    if text is None:
        return None
    return parse_document(text, info.relative_path, info.mtime_ns / 1_000_000)


def scan_documents(
    root: str,
    limit: int = MAX_SCANNED_DOCUMENTS,
    *,
    stats: Mapping[str, tuple[int, ...]] | None = None,
) -> list[Document]:
    """Newest ``limit`` valid documents in scan order; parses only as many files as needed.

    ``stats`` (rel -> (mtime_ns, size), the :func:`iter_memory_files` rules) spares a writer
    that already scanned the tree a second ``lstat`` pass; so does an enclosing
    :func:`shared_scan`. Only the newest ``2 * limit`` files are ordered and read unless too
    few of them parse.
    """
    scope = _shared_for(root)  # its parsed documents are reused whatever the file list
    if stats is None:
        if scope is not None:
            stats = scope.files
        else:
            stats = {f.relative_path: (f.mtime_ns, f.size) for f in iter_memory_files(root)}

    def load(rel: str, mtime_ns: int, size: int) -> Document | None:
        if scope is not None:
            return _load_shared(scope, rel, mtime_ns, size)
        return load_document(FileInfo(rel, os.path.join(root, rel), mtime_ns, size))

    return newest_documents(stats, load, limit, cuts=None if scope is None else scope.cuts)


def newest_documents(
    stats: Mapping[str, tuple[int, ...]],
    load: Callable[[str, int, int], Document | None],
    limit: int = MAX_SCANNED_DOCUMENTS,
    *,
    cuts: dict[int, int] | None = None,
) -> list[Document]:
    """:func:`scan_documents` over any store of files: ``stats`` maps rel -> (mtime_ns, size)
    and ``load(rel, mtime_ns, size)`` parses one (None when it is not a valid document), as
    a document of that path and time (``mtime_ns / 1e6`` ms): they are then taken in scan
    order already, with no second sort.

    ``cuts``: kept between calls on the same (changing) ``stats`` (see :func:`_scan_order`).
    """
    newest = _scan_order(stats, 2 * limit, cuts)
    docs = _load_newest(newest, limit, load)
    if len(docs) < limit and len(newest) < len(stats):
        docs = _load_newest(_scan_order(stats, None), limit, load)
    return docs[:limit]


def _scan_order(
    stats: Mapping[str, tuple[int, ...]], count: int | None, cuts: dict[int, int] | None = None
) -> list[_Keyed]:
    """Files in scan order: all of them, or a prefix of that order at least ``count`` long.

    The time is float milliseconds, as Document.mtime_ms (two files whose nanosecond mtimes
    collapse to one float must not be ordered differently here than in core.index). The prefix
    is every file whose key time is at least the ``count``-th newest, so nothing that sorts
    before a selected file is left out.

    ``cuts`` remembers that time per ``count``: a second call after a few files changed (the
    plan, then MEMORY.md) reuses it instead of ranking 10,000 files again. Every file at or
    after a cut is still every file that sorts before the ones taken, so the result is still a
    prefix; it may fall short of ``count`` (files removed or made older since), which
    :func:`newest_documents` already handles by reading the whole order.
    """
    items: Iterable[tuple[str, tuple[int, ...]]] = stats.items()
    if count is not None and len(stats) > count:
        cut_ns = cuts.get(count) if cuts is not None else None
        if cut_ns is None:
            cut_ns = heapq.nlargest(count, map(itemgetter(0), stats.values()))[-1]
            if cuts is not None:
                cuts[count] = cut_ns
        cut, low = cut_ns / 1_000_000, cut_ns - 1_000_000  # low: integer pre-filter, no division
        items = [
            (rel, st) for rel, st in stats.items() if st[0] >= low and st[0] / 1_000_000 >= cut
        ]
    return qwen_order([(rel, st[0], st[1]) for rel, st in items], _time_and_path)


def _time_and_path(item: _Keyed) -> tuple[float, str]:
    return item[1] / 1_000_000, item[0]


def _load_newest(
    keyed: list[_Keyed], limit: int, load: Callable[[str, int, int], Document | None]
) -> list[Document]:
    docs: list[Document] = []
    for rel, mtime_ns, size in keyed:
        if not is_indexable_path(rel) or rel.endswith("/" + INDEX_NAME):
            continue  # a MEMORY.md below the root is versioned, never listed (as Qwen)
        doc = load(rel, mtime_ns, size)
        if doc is not None:
            docs.append(doc)
            if len(docs) >= limit:
                break
    return docs


def _load_shared(scope: _SharedScan, rel: str, mtime_ns: int, size: int) -> Document | None:
    key = (rel, mtime_ns, size)
    if key not in scope.docs:
        if scope.kept is None:
            scope.kept = doccache.load_cache(scope.cache, scope.root) if scope.cache else {}
        entry = scope.kept.get(rel)
        if entry is None or not doccache.fresh(entry, mtime_ns, size):
            scope.parsed = True
            entry = doccache.parse_entry(os.path.join(scope.root, rel), mtime_ns, size)
        scope.entries[rel] = entry
        fields, mtime_ms = entry[2], mtime_ns / 1_000_000
        scope.docs[key] = None if fields is None else document_from_fields(fields, rel, mtime_ms)
    return scope.docs[key]


def render_index(root: str) -> IndexResult:
    """The MEMORY.md text for the documents on disk now (see :func:`scan_documents`)."""
    return build_index(scan_documents(root))


def index_path(root: str) -> str:
    return os.path.join(root, INDEX_NAME)


class TakenPaths:
    """``taken(rel)``: whether the memory folder holds ``rel``, under its own spelling or one a
    case-insensitive disk would take for it (``user/Notes.md`` takes ``user/notes.md``). Each
    folder is listed once."""

    def __init__(self, memory_root: str) -> None:
        self.memory_root = memory_root
        self._folders: dict[str, set[str]] = {}

    def __call__(self, rel: str) -> bool:
        if os.path.lexists(os.path.join(self.memory_root, rel)):
            return True
        folder, _, name = rel.rpartition("/")
        names = self._folders.get(folder)
        if names is None:
            try:
                listed = os.listdir(os.path.join(self.memory_root, folder))
            except OSError:
                listed = []
            names = self._folders[folder] = {fold_name(other) for other in listed}
        return fold_name(name) in names
