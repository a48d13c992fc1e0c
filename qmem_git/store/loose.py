"""Loose objects read and written with ``dulwich.objects`` and ``dulwich.file`` alone.

A writer's commit reads HEAD's commit and a few trees and writes a blob, some trees and a
commit, all loose objects in a memory repo (qmem-git never packs; ``gc.auto=0``). dulwich's
``DiskObjectStore`` does the same work but its module imports pack, midx, logging and pathlib
first, ~20 ms of every ``remember`` at any repo size. ``store.repo.Repository`` therefore tries
these two functions first and opens the full store only for what they leave to it: an object
that is packed (a fetch brought it), in an alternate, or anything unexpected on disk.

The rules are dulwich's own: a read is checked against the id it was asked for; a write of an
object already present only refreshes its mtime; a new one goes through a ``.lock`` file,
fsynced, then renamed, read-only like C git's.
"""

from __future__ import annotations

import contextlib
import os
import stat

from dulwich.file import GitFile
from dulwich.objects import ObjectID, ShaFile, object_class, valid_hexsha

OBJECT_MODE = 0o444  # loose objects are read-only, as C git and dulwich write them


def object_path(objects_dir: str, sha: str) -> str | None:
    """``objects/ab/cdef...`` for a valid hex id; None for anything else (never a path)."""
    if not valid_id(sha):
        return None
    return os.path.join(objects_dir, sha[:2], sha[2:])


def read_loose(objects_dir: str, sha: str, max_size: int) -> ShaFile | None:
    """The loose object ``sha``, verified against its id; None when it is not a loose object
    here, or cannot be read as one (the full store then decides: packed, or damaged).

    ``max_size``: the largest inflated object read (dulwich's ``loose_object_size_limit``).
    """
    found = read_raw(objects_dir, sha, max_size)
    if found is None:
        return None
    return ShaFile.from_raw_string(found[0], found[1], ObjectID(sha.encode("ascii")))


_TYPE_NUMBERS = {b"commit": 1, b"tree": 2, b"blob": 3, b"tag": 4}


def read_raw(objects_dir: str, sha: str, max_size: int) -> tuple[int, bytes] | None:
    """(type number, content) of the loose object ``sha``, its hash checked; None as for
    :func:`read_loose`. zlib and hashlib alone: a sync that reads only loose objects (a push
    of the commits made here) never loads dulwich's object store."""
    import hashlib
    import zlib

    path = object_path(objects_dir, sha)
    if path is None or not _regular(path):  # a FIFO there must not hang the read
        return None
    try:
        with open(path, "rb") as handle:
            # zlib adds under 0.1% to what it cannot shrink: a longer file is too big anyway
            # (and read(n) would set aside n bytes before reading: the size is asked first)
            if os.fstat(handle.fileno()).st_size > max_size + max_size // 1000 + 4096:
                return None
            data = zlib.decompressobj().decompress(handle.read(), max_size + 1)
    except (OSError, zlib.error):
        return None
    kind, _, rest = data.partition(b" ")
    size, nul, content = rest.partition(b"\0")
    type_num = _TYPE_NUMBERS.get(kind)
    if type_num is None or not nul or not size.isdigit() or int(size) != len(content):
        return None  # damaged, too big (cut at max_size), or another format: dulwich decides
    if hashlib.sha1(data).hexdigest() != sha:
        return None
    return type_num, content


def has_loose(objects_dir: str, sha: str) -> bool:
    """Whether ``sha`` is a loose object file here (its content is not read)."""
    path = object_path(objects_dir, sha)
    return path is not None and _regular(path)


def _regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def write_loose_raw(objects_dir: str, type_num: int, chunks: list[bytes], fsync: bool) -> str:
    """An object given as its type and content (a push into a path remote), stored loose
    unless it is there already; its id, the hash of what is written (never what a sender
    said it was). As C git writes one: a temporary file (fsynced when ``fsync``: the target's
    ``core.fsyncObjectFiles``, off by default in git and dulwich alike), then hard-linked to
    its name (a concurrent writer of the same object cannot get in the way), then unlinked."""
    import hashlib
    import zlib

    kind = object_class(type_num)
    if kind is None:
        raise ValueError(f"no object type {type_num}")
    data = b"".join(chunks)
    raw = kind.type_name + b" %d\0" % len(data) + data
    sha = hashlib.sha1(raw).hexdigest()
    directory = os.path.join(objects_dir, sha[:2])
    path = os.path.join(directory, sha[2:])
    with contextlib.suppress(FileExistsError):
        os.mkdir(directory)
    with contextlib.suppress(FileNotFoundError, PermissionError):
        os.utime(path)  # there already: a fresh mtime keeps a pruning gc off it
        return sha
    temp = os.path.join(directory, "tmp_obj_" + os.urandom(6).hex())
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, OBJECT_MODE)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(zlib.compress(raw))
            if fsync:
                handle.flush()
                os.fsync(handle.fileno())
        try:
            os.link(temp, path)
        except FileExistsError:
            pass  # written meanwhile by another push: the same bytes
        except OSError:  # no hard links here
            os.replace(temp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
    return sha


def write_loose(objects_dir: str, obj: ShaFile) -> str:
    """Store ``obj`` as a loose object unless it is there already; returns its id.

    Raises dulwich's ``FileLocked`` when another writer's ``.lock`` is in the way.
    """
    sha = obj.id.decode("ascii")
    directory = os.path.join(objects_dir, sha[:2])
    path = os.path.join(directory, sha[2:])
    with contextlib.suppress(FileExistsError):
        os.mkdir(directory)
    try:
        os.utime(path)  # there already: a fresh mtime keeps a pruning gc off it
        return sha
    except (FileNotFoundError, PermissionError):  # absent, or another user's: write it
        pass
    with GitFile(path, "wb", mask=OBJECT_MODE, fsync=True) as handle:
        handle.write(obj.as_legacy_object())
    return sha


def loose_ids(objects_dir: str) -> list[str]:
    """The ids of the loose objects in ``objects_dir``: files named as one in its ``ab/``
    folders (temporary files and anything else there are not)."""
    found = []
    for name in os.listdir(objects_dir):
        folder = os.path.join(objects_dir, name)
        if len(name) == 2 and os.path.isdir(folder):
            found += [name + rest for rest in os.listdir(folder) if valid_id(name + rest)]
    return found


def valid_id(sha: str) -> bool:
    return sha.isascii() and valid_hexsha(sha)


def migrate_loose(source: str, objects_dir: str) -> None:
    """Move the loose objects of the objects folder ``source`` (a quarantine) into
    ``objects_dir``; one already there stays (the same content)."""
    for sha in loose_ids(source):
        target = os.path.join(objects_dir, sha[:2], sha[2:])
        with contextlib.suppress(FileExistsError):
            os.mkdir(os.path.dirname(target))
        if not os.path.exists(target):
            os.replace(os.path.join(source, sha[:2], sha[2:]), target)
