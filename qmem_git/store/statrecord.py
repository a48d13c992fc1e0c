"""``.git/qmem-stat``: each memory file's full ``lstat`` stamp, as the index was written with it.

The index holds only part of a file's stat data (32-bit seconds, sizes and inodes), and parsing
its 10,000 entries costs ~30 ms; this record keeps the whole :data:`Stamp` (mtime and ctime in
nanoseconds, size, inode) per file, keyed by the index's SHA-1 trailer, so any other program
that rewrites the index voids it.

It is kept folder by folder, in the order the folder lists its memory files: the names joined
by NUL and their stamps packed, 32 bytes each. A writer's survey (``store.survey``) packs what
it scans the same way, so an unchanged folder is two byte-string comparisons, and only a folder
that differs is compared file by file. A writer that changed a few files rewrites only their
folders (``write``, with the record it read as ``base``).

The record also keeps where each entry of that index starts (and where they end), which a
writer finds its entries by without walking 10,000 of them (``gitindex.GitIndex.from_base``).

A stamp that is not known (a file no writer found clean), or that cannot be packed (a time
outside 1678-2262), is kept as :data:`UNKNOWN`, which no ``lstat`` gives (size -1): that file
only ever reads as changed.
"""

from __future__ import annotations

import os
import struct
import sys

from qmem_git.core.limits import STAT_RECORD_NAME
from qmem_git.core.paths import worktree_of
from qmem_git.store.cachefile import read_checked, write_checked

TYPE_CHECKING = False  # a writer's forked survey imports this module on its critical path
if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

Stamp = tuple[int, int, int, int]  # a file's lstat: (mtime_ns, size, ino, ctime_ns)
# folder prefix ("" or "user/") -> (its memory file names, NUL-joined in listing order, and
# their packed stamps)
Folders = dict[str, tuple[str, bytes]]
# the folders, the paths whose stamp is not known, the index's entry offsets (empty: not kept)
Record = tuple[Folders, list[str], bytes]

STAT_RECORD = STAT_RECORD_NAME
UNKNOWN: Stamp = (0, -1, 0, 0)
_MAGIC = f"qmem-stat-2 {sys.byteorder}\n".encode()
_STAMP = struct.Struct("<qqQq")
_NO_HASH = b"\0" * 20  # index.skipHash: the trailer names no content
_packers: dict[int, struct.Struct] = {}
_OFFSET_SIZE = 8  # an entry offset: unsigned, 64 bits, in this machine's byte order


def offsets_of(record: Record) -> Sequence[int] | None:
    """Where the entries of the record's index start, then where they end; None when the
    record does not keep them."""
    if not record[2]:
        return None
    import array

    offsets = array.array("Q")
    offsets.frombytes(record[2])
    return offsets


def pack(flat: list[int]) -> bytes:
    """Stamps given as one flat list (four ints each) as the record packs them; struct.error
    when one does not fit (a time outside 1678-2262)."""
    count = len(flat) >> 2
    packer = _packers.get(count)
    if packer is None:
        packer = _packers[count] = struct.Struct("<" + "qqQq" * count)
    return packer.pack(*flat)


def folder_stamps(entry: tuple[str, bytes]) -> dict[str, Stamp]:
    """One folder of the record: name -> stamp."""
    names, packed = entry
    return dict(zip(names.split("\0"), _STAMP.iter_unpack(packed), strict=True))


def stamps_of(record: Record) -> dict[str, Stamp | None]:
    """Every recorded path -> its stamp (None where it is not known)."""
    stamps: dict[str, Stamp | None] = {}
    unpack = _STAMP.iter_unpack
    for prefix, (names, packed) in record[0].items():
        paths = [prefix + name for name in names.split("\0")]
        stamps.update(zip(paths, unpack(packed), strict=True))
    stamps.update(dict.fromkeys(record[1]))
    return stamps


def read(git_dir: str, checksum: bytes) -> Record | None:
    """The record written with the index whose trailer is ``checksum``; None when another
    index was written since, or the record is damaged."""
    if len(checksum) != 20 or checksum == _NO_HASH:
        return None
    body = read_checked(os.path.join(git_dir, STAT_RECORD), _MAGIC + checksum)
    if body is None:
        return None
    import marshal

    try:
        record = marshal.loads(body)
    except (EOFError, ValueError, TypeError):
        return None
    return record if _well_formed(record) else None


def _well_formed(record: object) -> bool:
    """The shapes every reader relies on (the CRC only tells the bytes are as written)."""
    if not (isinstance(record, tuple) and len(record) == 3):
        return False
    folders, unknown, offsets = record
    if not isinstance(folders, dict) or not isinstance(unknown, list):
        return False
    if not isinstance(offsets, bytes) or len(offsets) % _OFFSET_SIZE:
        return False
    for prefix, entry in folders.items():
        if not (isinstance(prefix, str) and isinstance(entry, tuple) and len(entry) == 2):
            return False
        names, packed = entry
        if not (isinstance(names, str) and names and isinstance(packed, bytes)):
            return False
        if len(packed) != _STAMP.size * (names.count("\0") + 1):
            return False
    return all(isinstance(path, str) for path in unknown)


def write(
    git_dir: str,
    checksum: bytes,
    stamps: Mapping[str, Stamp | None],
    base: Folders | None = None,
    restamped: Collection[str] = (),
    offsets: Sequence[int] = (),
) -> Folders | None:
    """Record ``stamps`` for the index whose trailer is ``checksum`` (temp + rename, no fsync:
    a record lost in a crash only means the next survey parses the index); returns the
    folders written. ``base``: the folders read with ``stamps``, of which only the paths in
    ``restamped`` changed since (only their folders are packed again). ``offsets``: where the
    index's entries start and end, when known. Nothing is recorded for an index without a
    trailer to key it (none yet, or ``index.skipHash``)."""
    if len(checksum) != 20 or checksum == _NO_HASH:
        return None
    import array
    import marshal

    root = worktree_of(os.path.abspath(git_dir))
    folders, unpackable = _folders(root, stamps, base, restamped)
    unknown = sorted(unpackable)
    if None in stamps.values():  # rare: files a writer did not find clean
        unknown += [path for path, stamp in stamps.items() if stamp is None]
    body = marshal.dumps((folders, unknown, array.array("Q", offsets).tobytes()))
    write_checked(os.path.join(git_dir, STAT_RECORD), _MAGIC + checksum, body)
    return folders


def _folders(
    root: str,
    stamps: Mapping[str, Stamp | None],
    base: Folders | None,
    restamped: Collection[str],
) -> tuple[Folders, set[str]]:
    """(the folders to record, the paths whose stamp could not be packed)."""
    if base is None:
        folders: Folders = {}
        members = _by_folder(stamps)
    else:
        folders = dict(base)
        members = {}
        for path in restamped:
            prefix, name = _split(path)
            names = members.get(prefix)
            if names is None:
                entry = base.get(prefix)
                names = members[prefix] = set(entry[0].split("\0")) if entry else set()
            names.add(name)
    unpackable: set[str] = set()
    for prefix, names in members.items():
        present = [name for name in names if prefix + name in stamps]
        if present:
            folders[prefix] = _packed_folder(root, prefix, present, stamps, unpackable)
        else:
            folders.pop(prefix, None)
    return folders, unpackable


def _by_folder(stamps: Mapping[str, Stamp | None]) -> dict[str, set[str]]:
    members: dict[str, set[str]] = {}
    for path in stamps:
        prefix, name = _split(path)
        members.setdefault(prefix, set()).add(name)
    return members


def _split(path: str) -> tuple[str, str]:
    """("folder/", name) of a path; ("", name) at the root."""
    head, _, name = path.rpartition("/")
    return (head + "/" if head else ""), name


def _packed_folder(
    root: str,
    prefix: str,
    names: list[str],
    stamps: Mapping[str, Stamp | None],
    unpackable: set[str],
) -> tuple[str, bytes]:
    """One folder's entry, its names in the order the folder lists them now (names it does
    not list last): the order a survey scans them in."""
    try:
        listed = os.listdir(os.path.join(root, prefix) if prefix else root)
    except OSError:
        listed = []
    position = {name: number for number, name in enumerate(listed)}
    last = len(position)
    names.sort(key=lambda name: (position.get(name, last), name))
    chosen = [UNKNOWN if (stamp := stamps[prefix + name]) is None else stamp for name in names]
    try:
        return "\0".join(names), pack([number for stamp in chosen for number in stamp])
    except struct.error:  # a time outside 1678-2262: that file's stamp is not kept
        for number, stamp in enumerate(chosen):
            try:
                _STAMP.pack(*stamp)
            except struct.error:
                chosen[number] = UNKNOWN
                unpackable.add(prefix + names[number])
    return "\0".join(names), pack([number for stamp in chosen for number in stamp])
