"""A small reader/updater for git's index (versions 2 and 3).

Measured in one process at 10,037 entries: dulwich.index.Index read+write 315 ms, this module 22 ms.
dulwich parses and re-serialises every entry; a commit here changes a handful of entries, so
this module keeps each entry as its raw bytes, decodes only what a caller asks for and rewrites
the file by joining the raw entries again.
Entry-derived extensions (TREE, UNTR, EOIE, ...) are dropped on write, which git allows for
optional extensions. A side file ``.git/qmem-index`` records the commit the index was written
for together with the index's own SHA-1 trailer, so recovery can trust "index == HEAD" without
walking every tree; any other program that rewrites the index changes the trailer, which voids
the record. (An index extension would be neater, but C git prints "ignoring QMEM extension".)
"""

from __future__ import annotations

import bisect
import os
import struct

from qmem_git.core.limits import INDEX_RECORD_NAME
from qmem_git.store.cachefile import write_cache

TYPE_CHECKING = False  # typing and collections.abc are no imports of the survey child
if TYPE_CHECKING:
    from collections.abc import Sequence

# Light imports only (no typing, hashlib until a checksum is due): a writer's forked survey
# imports this module after the fork, on the critical path of `remember`.

SIGNATURE = b"DIRC"
HEAD_RECORD = INDEX_RECORD_NAME
_NO_HASH = b"\0" * 20  # index.skipHash: the trailer names no content
FILE_MODE = 0o100644
_HEADER = struct.Struct(">4sII")
_ENTRY = struct.Struct(">10I20sH")
_QUICK = struct.Struct(">4I4xI12xI")  # ctime s/ns, mtime s/ns, ino, size
_EXT = struct.Struct(">4sI")
_U32 = 0xFFFFFFFF
_NAME_MASK = 0xFFF
_EXTENDED = 0x4000
_STAGE_MASK = 0x3000
_INTENT_TO_ADD = 0x2000  # in the extended flags
_SKIP_WORKTREE = 0x4000  # in the extended flags: a sparse checkout left the file out


class IndexUnreadable(ValueError):
    """The index file is damaged or uses a feature we do not handle; rebuild it from HEAD."""


class IndexEntry:
    """The fields of one stage-0 entry that callers compare against ``lstat``.

    ``intent_to_add``: staged with ``git add -N`` (listed, but not part of the next commit).
    """

    __slots__ = ("ctime_ns", "ino", "intent_to_add", "mode", "mtime_ns", "path", "sha", "size")

    def __init__(
        self,
        path: str,
        sha: str,
        mode: int,
        size: int,
        mtime_ns: int,
        ctime_ns: int,
        ino: int,
        intent_to_add: bool = False,
    ) -> None:
        self.path = path
        self.sha = sha
        self.mode = mode
        self.size = size
        self.mtime_ns = mtime_ns
        self.ctime_ns = ctime_ns
        self.ino = ino
        self.intent_to_add = intent_to_add


class GitIndex:
    """Raw entries keyed by path (stage-0 paths bare; conflict stages get ``\\0<stage>``).

    ``entries`` is in git's order except for the paths in ``added`` (new since it was read).
    ``head``: the commit this index matches, when we wrote it for that commit. ``spliced``:
    the file's bytes and its entries' offsets instead of ``entries`` (see :class:`Spliced`),
    which are then built only when asked for.
    """

    def __init__(
        self,
        version: int = 2,
        entries: dict[str, bytes] | None = None,
        head: str | None = None,
        mtime_ns: int = 0,
        checksum: bytes = b"",
        stamp: tuple[int, int, int, int] | None = None,
        spliced: Spliced | None = None,
    ) -> None:
        self.version = version
        self._entries: dict[str, bytes] = {} if entries is None else entries
        self._spliced = spliced
        self.head = head
        self.mtime_ns = mtime_ns
        self.checksum = checksum
        self.stamp = stamp  # the file's (mtime_ns, size, ino, ctime_ns) when it was read
        self.changed = False
        self.added: set[str] = set()

    @property
    def entries(self) -> dict[str, bytes]:
        if self._spliced is not None:
            self._entries, self.added = self._spliced.entries()
            self._spliced = None
        return self._entries

    @entries.setter
    def entries(self, entries: dict[str, bytes]) -> None:
        self._entries, self._spliced = entries, None

    def _raw(self, key: str) -> bytes | None:
        return self._entries.get(key) if self._spliced is None else self._spliced.raw(key)

    def get(self, path: str) -> IndexEntry | None:
        raw = self._raw(path)
        return None if raw is None else _decode(path, raw)

    def skips_worktree(self, path: str) -> bool:
        """True when ``path`` is marked skip-worktree (sparse checkout): its absence from the
        work tree is not a deletion."""
        raw = self._raw(path)
        return raw is not None and bool(_extended_flags(raw) & _SKIP_WORKTREE)

    def paths(self) -> list[str]:
        """Stage-0 paths (in index order but for those added since it was read)."""
        return [key for key in self.entries if "\0" not in key]

    def stat_dirty(self, files: dict[str, tuple[int, int, int, int]]) -> set[str]:
        """Paths of ``files`` (path -> lstat's (mtime_ns, size, ino, ctime_ns)) whose entry is
        missing, differs in stat data or is racily clean.

        Racily clean (entry mtime not older than the index file) follows git: an edit in the
        same clock tick as the index write is invisible to stat, so such files get hashed.
        """
        dirty: set[str] = set()
        get, unpack, racy = self.entries.get, _QUICK.unpack_from, self.mtime_ns or (1 << 64)
        giga = 1_000_000_000
        for path, (mtime, size, ino, ctime) in files.items():  # hot: every memory file
            raw = get(path)
            if raw is None or mtime >= racy:
                dirty.add(path)
                continue
            ctime_s, ctime_ns, mtime_s, mtime_ns, ino32, size32 = unpack(raw)
            if (
                mtime_ns != mtime % giga
                or mtime_s != (mtime // giga) & _U32
                or size32 != size & _U32
                or ino32 != ino & _U32
                or ctime_ns != ctime % giga
                or ctime_s != (ctime // giga) & _U32
            ):
                dirty.add(path)
        return dirty

    def set(
        self,
        path: str,
        st: os.stat_result,
        sha: str,
        mode: int = FILE_MODE,
        *,
        settled: bool = True,
    ) -> None:
        """Record ``path`` as clean with content ``sha`` and the given ``lstat`` result; its
        conflict stages go, as ``git add`` resolves a conflict (an index with both is one
        C git refuses). ``settled=False``: the file changed after ``sha`` was read from it, so
        its entry gets mtime 0 and no stamp (as git smudges a racily clean entry) and the next
        writer reads it again instead of taking the new stat for ``sha``."""
        name = path.encode("utf-8", "surrogateescape")
        raw = _encode(name, st, bytes.fromhex(sha), mode)
        if not settled:
            raw = raw[:8] + bytes(8) + raw[16:]  # mtime seconds and nanoseconds
        self._drop_stages(path)
        self.changed = True
        if self._spliced is not None:
            self._spliced.edits[path] = raw
            return
        if path not in self._entries:
            self.added.add(path)
        self._entries[path] = raw

    def remove(self, path: str) -> None:
        """Forget ``path``, its conflict stages too (``git rm``)."""
        self._drop_stages(path)
        self._drop(path)

    def _drop_stages(self, path: str) -> None:
        if "\0" in path:  # a stage's own key
            return
        for stage in (1, 2, 3):
            self._drop(f"{path}\0{stage}")

    def _drop(self, key: str) -> None:
        if self._spliced is None:
            self.changed = self._entries.pop(key, None) is not None or self.changed
        elif self._spliced.raw(key) is not None:
            self._spliced.edits[key] = None
            self.changed = True

    def laid_out(self) -> list[bytes]:
        """The raw entries in git's order (path bytes, then stage): the paths added since the
        index was read are put in place among the rest, which are in that order already (no
        dict of 10,000 entries built again, no key encoded but the few a search compares)."""
        if self._spliced is not None:
            return self._spliced.pieces()
        entries = self._entries
        added = self.added & entries.keys()
        if not added:
            return list(entries.values())
        keys = [key for key in entries if key not in added]
        for key in added:
            bisect.insort(keys, key, key=_order_key)
        return [entries[key] for key in keys]

    def count(self) -> int:
        """How many entries the index holds."""
        return len(self._entries) if self._spliced is None else self._spliced.count()


class Spliced:
    """An index file's bytes (read and checked) with the offsets of its version 2/3 entries,
    found by a parse made elsewhere (a writer's survey child), and the entries changed since
    (key -> raw entry, None = removed).

    A writer looks up a few paths and changes a few entries of 10,000: a lookup is a binary
    search over the entries' names (git keeps them sorted by name bytes, then stage), and the
    file is written back by copying the unchanged runs of bytes around the changed entries,
    which are the bytes a whole parse, sort and render give (~8 ms of parsing saved).
    """

    def __init__(self, data: bytes, offsets: Sequence[int]) -> None:
        self.data = data
        self.offsets = offsets  # one per entry, then the end of the last
        self.edits: dict[str, bytes | None] = {}

    def _key_at(self, position: int) -> tuple[bytes, int]:
        data, offset = self.data, self.offsets[position]
        flags = (data[offset + 60] << 8) | data[offset + 61]
        start = offset + _ENTRY.size + (2 if flags & _EXTENDED else 0)
        length = flags & _NAME_MASK
        if length == _NAME_MASK:
            length = data.index(b"\0", start) - start
        return data[start : start + length], (flags & _STAGE_MASK) >> 12

    def find(self, key: str) -> tuple[int, bool]:
        """(position of ``key``'s entry or of the first entry after it, whether it is there)."""
        target = _sort_key(key)
        low, high = 0, len(self.offsets) - 1
        while low < high:
            middle = (low + high) // 2
            if self._key_at(middle) < target:
                low = middle + 1
            else:
                high = middle
        return low, low < len(self.offsets) - 1 and self._key_at(low) == target

    def raw(self, key: str) -> bytes | None:
        if key in self.edits:
            return self.edits[key]
        position, found = self.find(key)
        return self.data[self.offsets[position] : self.offsets[position + 1]] if found else None

    def count(self) -> int:
        total = len(self.offsets) - 1
        for key, raw in self.edits.items():
            total += (raw is not None) - self.find(key)[1]
        return total

    def pieces(self) -> list[bytes]:
        """The entries in git's order, as runs of the file's bytes and the changed entries."""
        data, offsets, at = self.data, self.offsets, 0
        pieces: list[bytes] = []
        for key in sorted(self.edits, key=_sort_key):
            position, found = self.find(key)
            pieces.append(data[offsets[at] : offsets[position]])
            raw = self.edits[key]
            if raw is not None:
                pieces.append(raw)
            at = position + 1 if found else position
        pieces.append(data[offsets[at] : offsets[-1]])
        return pieces

    def entries(self) -> tuple[dict[str, bytes], set[str]]:
        """(the entries as :class:`GitIndex` keeps them, the keys added by ``edits``)."""
        entries: dict[str, bytes] = {}
        for position in range(len(self.offsets) - 1):
            name, stage = self._key_at(position)
            key = name.decode("utf-8", "surrogateescape")
            key = f"{key}\0{stage}" if stage else key
            entries[key] = self.data[self.offsets[position] : self.offsets[position + 1]]
        added = set()
        for key, raw in self.edits.items():
            if raw is None:
                entries.pop(key, None)
            else:
                if key not in entries:
                    added.add(key)
                entries[key] = raw
        return entries, added


def _sort_key(key: str) -> tuple[bytes, int]:
    """git's order of a :class:`GitIndex` key: path bytes, then stage."""
    path, _, stage = key.partition("\0")
    return path.encode("utf-8", "surrogateescape"), int(stage) if stage else 0


def read_index(
    git_dir: str, path: str | None = None, *, verify: bool = True, offsets: list[int] | None = None
) -> GitIndex:
    """Parse ``<git_dir>/index`` (missing = empty) and attach the head record if it applies.

    ``path``: another index file of the repository (``GIT_INDEX_FILE``, as ``git commit -a``
    gives its hook); the head record never applies to it. ``verify=False``: the SHA-1 trailer
    is left for the caller to check (a writer's forked survey: its parent reads the index
    again, and checks it). ``offsets``: see :func:`parse_index`.
    """
    own = os.path.join(git_dir, "index")
    try:
        with open(path or own, "rb") as handle:
            data = handle.read()
            st = os.fstat(handle.fileno())
    except FileNotFoundError:
        return GitIndex(head=None if path else read_head_record(git_dir, b""))
    except IsADirectoryError as exc:
        raise IndexUnreadable(f"{path or own} is a folder") from exc
    index = parse_index(data, st.st_mtime_ns, verify=verify, offsets=offsets)
    index.stamp = file_stamp(st)
    if not path or os.path.realpath(path) == os.path.realpath(own):
        index.head = read_head_record(git_dir, index.checksum)
    return index


def spliced_index(
    git_dir: str, data: bytes, stamp: tuple[int, int, int, int], offsets: list[int]
) -> GitIndex:
    """The index whose bytes ``data`` (SHA-1 checked) a parse elsewhere found ``offsets`` in
    (:func:`parse_index`), as a :class:`Spliced` index; parsed here when there are none (a
    version 4 index)."""
    checksum = data[-20:]
    if offsets:
        version = _HEADER.unpack_from(data)[1]
        index = GitIndex(version, None, None, stamp[0], checksum, stamp, Spliced(data, offsets))
    else:
        index = parse_index(data, stamp[0], verify=False)
        index.stamp = stamp
    index.head = read_head_record(git_dir, checksum)
    return index


def checksum_holds(data: bytes) -> bool:
    """Whether the index file bytes ``data`` match their SHA-1 trailer (an index without a
    hash, ``index.skipHash``, by its trailer alone)."""
    if len(data) < _HEADER.size + 20:
        return False
    return data[-20:] == _NO_HASH or _sha1(data[:-20]) == data[-20:]


def file_stamp(st: os.stat_result) -> tuple[int, int, int, int]:
    """(mtime_ns, size, ino, ctime_ns): what changes when the index file is replaced or
    rewritten (git and qmem-git replace it by rename: a new inode, a new ctime)."""
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)


def read_head_record(git_dir: str, checksum: bytes) -> str | None:
    head, recorded = _head_record(git_dir)
    return head if recorded == checksum.hex() else None


def recorded_head(git_dir: str) -> str | None:
    """The commit the last writer recorded with its index, whatever the index is now (a lost
    branch is pointed back at it)."""
    head, _ = _head_record(git_dir)
    if head is None or len(head) != 40 or head.strip("0123456789abcdef"):
        return None
    return head


def _head_record(git_dir: str) -> tuple[str | None, str]:
    """(head or None for "-", the index checksum it was written with) of the head record."""
    try:
        with open(os.path.join(git_dir, HEAD_RECORD), encoding="ascii") as handle:
            head, recorded = [*handle.read().split(), "", ""][:2]
    except (OSError, ValueError):
        return None, ""
    return (None if head in ("-", "") else head), recorded


def parse_index(
    data: bytes, mtime_ns: int = 0, *, verify: bool = True, offsets: list[int] | None = None
) -> GitIndex:
    """Entries as raw slices; raises IndexUnreadable when damaged or unsupported (``verify``:
    the content must match its SHA-1 trailer). ``offsets`` gets the offset of every entry,
    then of the end of the last, of a version 2 or 3 index (for :class:`Spliced`)."""
    if len(data) < _HEADER.size + 20:
        raise IndexUnreadable("index file is truncated")
    signature, version, count = _HEADER.unpack_from(data)
    if signature != SIGNATURE or version not in (2, 3, 4):
        raise IndexUnreadable(f"index version {version} is not supported")
    checksum = data[-20:]
    if verify and checksum != _NO_HASH and _sha1(data[:-20]) != checksum:
        raise IndexUnreadable("index checksum mismatch")
    index = GitIndex(version=version, entries={}, mtime_ns=mtime_ns, checksum=checksum)
    if version == 4:  # kept as version 2/3 entries, and written back that way
        end, index.version = _read_entries_v4(data, count, index)
    else:
        end = _read_entries(data, count, index, offsets)
    _check_extensions(data, end)
    return index


def _read_entries(data: bytes, count: int, index: GitIndex, offsets: list[int] | None) -> int:
    offset = _HEADER.size
    entries = index.entries
    mark = ([] if offsets is None else offsets).append
    end = len(data) - 20
    fixed = _ENTRY.size
    for _ in range(count):  # the hot loop of every writer's recovery: one pass, no struct call
        if offset + fixed > end:
            raise IndexUnreadable("index entry runs past the end of the file")
        flags = (data[offset + 60] << 8) | data[offset + 61]
        start = offset + fixed + (2 if flags & _EXTENDED else 0)
        length = flags & _NAME_MASK
        if length == _NAME_MASK:
            length = data.index(b"\0", start) - start
        name = data[start : start + length].decode("utf-8", "surrogateescape")
        size = (start - offset + length + 8) & ~7
        if flags & _STAGE_MASK:
            name = f"{name}\0{(flags & _STAGE_MASK) >> 12}"
        entries[name] = data[offset : offset + size]
        mark(offset)
        offset += size
    mark(offset)
    return offset


def _read_entries_v4(data: bytes, count: int, index: GitIndex) -> tuple[int, int]:
    """Version 4 entries (each path stored as what it shares with the previous one, then the
    rest; no padding) as the version 2/3 entries they stand for; (end offset, version)."""
    offset = _HEADER.size
    end = len(data) - 20
    previous = b""
    version = 2
    for _ in range(count):
        flags_at = offset + _ENTRY.size - 2
        if flags_at + 2 > end:
            raise IndexUnreadable("index entry runs past the end of the file")
        flags = (data[flags_at] << 8) | data[flags_at + 1]
        fixed = _ENTRY.size + (2 if flags & _EXTENDED else 0)
        version = 3 if flags & _EXTENDED else version
        strip, at = _varint(data, offset + fixed, end)
        stop = data.find(b"\0", at, end)
        if stop < 0 or strip > len(previous):
            raise IndexUnreadable("index entry path is damaged")
        name = previous[: len(previous) - strip] + data[at:stop]
        padding = 8 - (fixed + len(name)) % 8
        raw = data[offset : offset + fixed] + name + b"\0" * padding
        key = name.decode("utf-8", "surrogateescape")
        if flags & _STAGE_MASK:
            key = f"{key}\0{(flags & _STAGE_MASK) >> 12}"
        index.entries[key] = raw
        previous = name
        offset = stop + 1
    return offset, version


def _varint(data: bytes, offset: int, end: int) -> tuple[int, int]:
    """git's offset varint (varint.c) at ``offset``: (value, offset after it)."""
    if offset >= end:
        raise IndexUnreadable("index entry runs past the end of the file")
    byte = data[offset]
    value = byte & 0x7F
    offset += 1
    while byte & 0x80:
        if offset >= end:
            raise IndexUnreadable("index entry runs past the end of the file")
        byte = data[offset]
        value = ((value + 1) << 7) | (byte & 0x7F)
        offset += 1
    return value, offset


def _check_extensions(data: bytes, offset: int) -> None:
    """Refuse required (lower-case) extensions such as split-index ``link``: we cannot keep them."""
    end = len(data) - 20
    while offset + _EXT.size <= end:
        signature, size = _EXT.unpack_from(data, offset)
        if not b"A"[0] <= signature[0] <= b"Z"[0]:
            name = signature.decode("ascii", "replace")
            raise IndexUnreadable(
                f"index uses git's '{name}' extension, which qmem-git cannot read"
            )
        offset += _EXT.size + size


def render_index(index: GitIndex) -> bytes:
    """The index file bytes: header, entries, SHA-1 trailer; joined and hashed in one piece
    (~2 ms less at 10,000 entries than hashing and writing them one by one)."""
    body = b"".join([_HEADER.pack(SIGNATURE, index.version, index.count()), *index.laid_out()])
    return body + _sha1(body)


def write_index(git_dir: str, index: GitIndex) -> None:
    """Write via ``index.lock`` + rename (git's protocol): C git never sees half a file."""
    path = os.path.join(git_dir, "index")
    lock = path + ".lock"
    data = render_index(index)
    fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(lock, path)
    except BaseException:
        _unlink_quietly(lock)
        raise
    index.changed = False
    index.checksum = data[-20:]
    _write_head_record(git_dir, index.head, index.checksum)


def _write_head_record(git_dir: str, head: str | None, checksum: bytes) -> None:
    """Record which commit the index we just wrote matches (temp + rename)."""
    record = f"{head or '-'} {checksum.hex()}\n".encode("ascii")
    write_cache(os.path.join(git_dir, HEAD_RECORD), record)


def _order_key(path: str) -> bytes:
    return path.encode("utf-8", "surrogateescape")


def blob_mode(st: os.stat_result) -> int:
    """git's mode for a regular file: executable or not."""
    return 0o100755 if st.st_mode & 0o111 else FILE_MODE


def _unlink_quietly(path: str) -> None:
    try:  # noqa: SIM105 - contextlib is not imported by this module
        os.unlink(path)
    except OSError:
        pass


def _sha1(data: bytes) -> bytes:
    import hashlib

    return hashlib.sha1(data).digest()


def _stat_fields(st: os.stat_result, mode: int) -> tuple[int, ...]:
    return (
        (st.st_ctime_ns // 1_000_000_000) & _U32,
        st.st_ctime_ns % 1_000_000_000,
        (st.st_mtime_ns // 1_000_000_000) & _U32,
        st.st_mtime_ns % 1_000_000_000,
        st.st_dev & _U32,
        st.st_ino & _U32,
        mode,
        st.st_uid & _U32,
        st.st_gid & _U32,
        st.st_size & _U32,
    )


def _encode(name: bytes, st: os.stat_result, sha: bytes, mode: int) -> bytes:
    fields = _stat_fields(st, mode)
    head = _ENTRY.pack(*fields, sha, min(len(name), _NAME_MASK))
    padding = 8 - (len(head) + len(name)) % 8
    return head + name + b"\0" * padding


def _extended_flags(raw: bytes) -> int:
    flags = (raw[60] << 8) | raw[61]
    return (raw[_ENTRY.size] << 8 | raw[_ENTRY.size + 1]) if flags & _EXTENDED else 0


def _decode(path: str, raw: bytes) -> IndexEntry:
    fields = _ENTRY.unpack_from(raw)
    extended = _extended_flags(raw)
    return IndexEntry(
        path=path,
        sha=fields[10].hex(),
        mode=fields[6],
        size=fields[9],
        mtime_ns=fields[2] * 1_000_000_000 + fields[3],
        ctime_ns=fields[0] * 1_000_000_000 + fields[1],
        ino=fields[5],
        intent_to_add=bool(extended & _INTENT_TO_ADD),
    )
