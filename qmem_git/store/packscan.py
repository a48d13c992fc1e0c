"""Object sizes read from pack and loose-object headers, before anything is inflated whole.

dulwich inflates an object into memory as its header declares it, and a delta on top of its
base, so a pack of a few kilobytes can hold a gigabyte of zeros. What a remote gives us is
therefore measured first: a fetched or copied pack is scanned entry by entry (each zlib stream
inflated in bounded chunks, delta headers read for the sizes they produce and start from);
objects read straight out of another repository (a path or ``file://`` remote) have their
header, and their delta bases' headers, read before the object is.
"""

from __future__ import annotations

import mmap
import os
import zlib
from typing import TYPE_CHECKING

from qmem_git.errors import RemoteError

if TYPE_CHECKING:
    from dulwich.object_store import BaseObjectStore
    from dulwich.pack import Pack

# the largest object a remote may give (a tree of 20,000 entries is ~1.2 MiB; a memory file at
# most 256 KiB): memory stays bounded by a few of these
MAX_OBJECT_BYTES = 4 * 1024 * 1024
# a delta rebuilding a MAX_OBJECT_BYTES object from nothing: one opcode per 127 inserted bytes
MAX_DELTA_BYTES = MAX_OBJECT_BYTES + MAX_OBJECT_BYTES // 127 + 64
MAX_DELTA_DEPTH = 256
_CHUNK = 64 * 1024
_OFS_DELTA, _REF_DELTA = 6, 7
_LOOSE_TYPES = {b"commit", b"tree", b"blob", b"tag"}


def too_big(size: int | None = None) -> RemoteError:
    shown = f" ({size:,} bytes)" if size is not None else ""
    return RemoteError(
        f"the remote sent an object larger than {MAX_OBJECT_BYTES >> 20} MiB{shown}; "
        "nothing was kept",
        "memory files are at most 256 KiB; check the remote URL, or remove that object there",
    )


def _malformed(what: str) -> RemoteError:
    return RemoteError(
        f"the remote sent a malformed pack ({what}); nothing was kept",
        "run the sync again; if it persists, check the remote with `git fsck`",
    )


# --- a whole pack, entry by entry ---------------------------------------------------------------


def check_pack_file(path: str) -> None:
    """Raise RemoteError when an object of the pack at ``path`` (or one a delta of it makes)
    would be larger than :data:`MAX_OBJECT_BYTES`; memory stays at a few chunks."""
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            view = memoryview(data)
            try:
                _scan(view)
            finally:
                view.release()


def _scan(data: memoryview) -> None:
    if len(data) < 12 or bytes(data[:4]) != b"PACK":
        raise _malformed("no pack header")
    count = int.from_bytes(data[8:12], "big")
    pos = 12
    for _ in range(count):
        kind, size, pos = _entry_header(data, pos)
        if kind == _OFS_DELTA:
            while pos < len(data) and data[pos] & 0x80:
                pos += 1
            pos += 1
        elif kind == _REF_DELTA:
            pos += 20
        delta = kind in (_OFS_DELTA, _REF_DELTA)
        if size > (MAX_DELTA_BYTES if delta else MAX_OBJECT_BYTES):
            raise too_big(None if delta else size)
        head, pos = _inflate(data, pos, MAX_DELTA_BYTES if delta else MAX_OBJECT_BYTES)
        if delta:
            _check_delta_head(head)


def _entry_header(data: memoryview | bytes, pos: int) -> tuple[int, int, int]:
    """(type, size as declared, offset after the header) of the pack entry at ``pos``."""
    if pos >= len(data):
        raise _malformed("truncated")
    byte = data[pos]
    kind, size, shift = (byte >> 4) & 7, byte & 15, 4
    pos += 1
    while byte & 0x80:
        if pos >= len(data) or shift > 63:
            raise _malformed("bad entry header")
        byte = data[pos]
        size |= (byte & 0x7F) << shift
        shift += 7
        pos += 1
    return kind, size, pos


def _inflate(data: memoryview, pos: int, limit: int) -> tuple[bytes, int]:
    """Inflate the zlib stream at ``pos`` in bounded chunks (RemoteError past ``limit``);
    its first bytes and the offset where it ends."""
    stream = zlib.decompressobj()
    total, head = 0, b""
    while not stream.eof:
        chunk = data[pos : pos + _CHUNK]
        if not chunk:
            raise _malformed("truncated")
        pos += len(chunk)
        pending: bytes | memoryview = chunk
        while pending and not stream.eof:
            try:
                out = stream.decompress(pending, _CHUNK)
            except zlib.error as exc:
                raise _malformed(str(exc)) from exc
            total += len(out)
            if total > limit:
                raise too_big()
            if len(head) < 32:
                head += out[: 32 - len(head)]
            pending = stream.unconsumed_tail
    return head, pos - len(stream.unused_data)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise _malformed("bad delta header")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        shift += 7
        pos += 1
        if not byte & 0x80:
            return value, pos


def _check_delta_head(head: bytes) -> None:
    """A delta starts with the sizes of its base and its result: both within the limit."""
    source, pos = _varint(head, 0)
    target, _ = _varint(head, pos)
    if source > MAX_OBJECT_BYTES or target > MAX_OBJECT_BYTES:
        raise too_big(max(source, target))


# --- one object of another repository -----------------------------------------------------------


class SizeChecks:
    """Header reads of objects in another repository's store, each pack entry once."""

    def __init__(self, store: BaseObjectStore) -> None:
        self.store = store
        self.done: set[tuple[str, int]] = set()

    def check(self, sha: bytes) -> None:
        """RemoteError when object ``sha`` (hex), or a delta base it is made from, is larger
        than the limit; nothing when it is not here (the reader says so later)."""
        self._check(self.store, sha, 0)

    def _check(self, store: BaseObjectStore, sha: bytes, depth: int) -> bool:
        binary = bytes.fromhex(sha.decode("ascii"))
        for pack in getattr(store, "packs", ()):
            try:
                offset = pack.index.object_offset(binary)
            except KeyError:
                continue
            self._packed(store, pack, offset, depth)
            return True
        path = os.path.join(
            os.fspath(getattr(store, "path", "")), sha[:2].decode(), sha[2:].decode()
        )
        if os.path.isfile(path):
            check_loose(path)
            return True
        return any(self._check(other, sha, depth) for other in getattr(store, "alternates", ()))

    def _packed(self, store: BaseObjectStore, pack: Pack, offset: int, depth: int) -> None:
        path = os.path.join(getattr(store, "pack_dir", ""), pack.data.filename)
        key = (path, offset)
        if key in self.done:
            return
        if depth > MAX_DELTA_DEPTH:
            raise _malformed("delta chain too deep")
        with open(path, "rb") as handle:
            header = os.pread(handle.fileno(), 64 + _CHUNK, offset)
        kind, size, pos = _entry_header(header, 0)
        if kind not in (_OFS_DELTA, _REF_DELTA):
            if size > MAX_OBJECT_BYTES:
                raise too_big(size)
            self.done.add(key)
            return
        base: int | bytes
        if kind == _OFS_DELTA:
            back, pos = _ofs(header, pos)
            base = offset - back
        else:
            base, pos = header[pos : pos + 20].hex().encode("ascii"), pos + 20
        if size > MAX_DELTA_BYTES:
            raise too_big()
        try:
            head = zlib.decompressobj().decompress(header[pos:], 32)
        except zlib.error as exc:
            raise _malformed(str(exc)) from exc
        _check_delta_head(head)
        if isinstance(base, int):
            self._packed(store, pack, base, depth + 1)
        else:
            self._check(store, base, depth + 1)
        self.done.add(key)


def _ofs(data: bytes, pos: int) -> tuple[int, int]:
    """git's offset encoding of an OFS_DELTA's base (each continuation adds one)."""
    if pos >= len(data):
        raise _malformed("truncated")
    byte = data[pos]
    value = byte & 0x7F
    pos += 1
    while byte & 0x80:
        if pos >= len(data):
            raise _malformed("truncated")
        byte = data[pos]
        value = ((value + 1) << 7) | (byte & 0x7F)
        pos += 1
    return value, pos


def check_loose(path: str) -> None:
    """A loose object's header (``blob 123\\0``) is read from its first inflated bytes."""
    with open(path, "rb") as handle:
        start = handle.read(1024)
    try:
        head = zlib.decompressobj().decompress(start, 64)
    except zlib.error as exc:
        raise _malformed(str(exc)) from exc
    kind, _, rest = head.partition(b" ")
    size = rest.split(b"\0", 1)[0]
    if kind not in _LOOSE_TYPES or not size.isdigit():
        raise _malformed("bad loose object header")
    if int(size) > MAX_OBJECT_BYTES:
        raise too_big(int(size))
