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
from dulwich.objects import ObjectID, ShaFile, valid_hexsha

OBJECT_MODE = 0o444  # loose objects are read-only, as C git and dulwich write them


def object_path(objects_dir: str, sha: str) -> str | None:
    """``objects/ab/cdef...`` for a valid hex id; None for anything else (never a path)."""
    if not sha.isascii() or not valid_hexsha(sha):
        return None
    return os.path.join(objects_dir, sha[:2], sha[2:])


def read_loose(objects_dir: str, sha: str, max_size: int) -> ShaFile | None:
    """The loose object ``sha``, verified against its id; None when it is not a loose object
    here, or cannot be read as one (the full store then decides: packed, or damaged).

    ``max_size``: the largest inflated object read (dulwich's ``loose_object_size_limit``).
    """
    path = object_path(objects_dir, sha)
    if path is None or not _regular(path):  # a FIFO there must not hang the read
        return None
    try:
        found = ShaFile.from_path(path, ObjectID(sha.encode("ascii")), max_size=max_size)
        return ShaFile.from_raw_string(
            found.type_num, found.as_raw_string(), verify_sha=ObjectID(sha.encode("ascii"))
        )
    except Exception:  # missing or damaged: the full store reads it again
        return None


def _regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


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
