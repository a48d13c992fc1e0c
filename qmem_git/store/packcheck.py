"""Damaged pack files stop writers too, not only the readers that trip over them.

A writer reads only the trees along the paths it changes, so with a damaged pack (a flipped
byte in an old blob, an overwritten index) it kept committing on top of a history that
``log``, ``sync`` and clones could no longer read. Under the writer lock, recovery checks each
pack once: the SHA-1 of its content must equal its trailer, and its ``.idx`` must name that
pack and match its own trailer (what ``git verify-pack`` checks first). A pack already checked
is known by name, size, mtime and inode in ``.git/qmem-packs`` (a cache: lost, the packs are
hashed again), so the usual cost is one ``listdir`` and a ``stat`` per pack.
"""

from __future__ import annotations

import contextlib
import hashlib
import os

from qmem_git.store.cachefile import read_checked, write_checked

CACHE_NAME = "qmem-packs"
_HEAD = b"qmem-packs 1\n"
_TRAILER = 20  # SHA-1
_CHUNK = 1 << 20


def damaged_packs(git_dir: str, *, remember: bool = True) -> list[str]:
    """Names of the packs in ``git_dir`` whose content or index does not match its checksum.

    ``remember``: record the sound packs in the cache (writers only: it is written under the
    writer lock; a read-only check such as ``doctor`` passes False)."""
    pack_dir = os.path.join(git_dir, "objects", "pack")
    try:
        names = sorted(
            name
            for name in os.listdir(pack_dir)
            if name.startswith("pack-") and name.endswith(".pack")
        )
    except OSError:
        return []
    if not names:
        return []
    cache = os.path.join(git_dir, CACHE_NAME)
    known = _read_known(cache)
    sound: list[str] = []
    damaged: list[str] = []
    for name in names:
        path = os.path.join(pack_dir, name)
        try:
            st = os.stat(path)
        except OSError:
            continue  # removed meanwhile (a repack by C git)
        key = f"{name} {st.st_size} {st.st_mtime_ns} {st.st_ino}"
        if key in known or _pack_is_sound(path):
            sound.append(key)
        else:
            damaged.append(name)
    if remember and set(sound) != known:
        with contextlib.suppress(OSError):  # a cache: lost, the packs are checked again
            write_checked(cache, _HEAD, "".join(f"{key}\n" for key in sound).encode("utf-8"))
    return damaged


def _read_known(cache: str) -> set[str]:
    body = read_checked(cache, _HEAD)
    if body is None:
        return set()
    return {line for line in body.decode("utf-8", "replace").splitlines() if line}


def _pack_is_sound(path: str) -> bool:
    """The pack's content hashes to its trailer, and its ``.idx`` names that pack."""
    try:
        trailer = _hashed_trailer(path)
        if trailer is None:
            return False
        idx_trailer = _hashed_trailer(path[: -len(".pack")] + ".idx", keep=_TRAILER)
    except OSError:
        return False
    return idx_trailer is not None and idx_trailer == trailer


def _hashed_trailer(path: str, keep: int = 0) -> bytes | None:
    """The SHA-1 trailer of ``path`` when its content matches it, else None; ``keep`` more
    bytes before the trailer are returned instead (an ``.idx`` names its pack there)."""
    size = os.path.getsize(path)
    if size < _TRAILER + keep:
        return None
    digest = hashlib.sha1(usedforsecurity=False)
    with open(path, "rb") as handle:
        left = size - _TRAILER
        while left > 0:
            chunk = handle.read(min(_CHUNK, left))
            if not chunk:
                return None
            digest.update(chunk)
            left -= len(chunk)
        trailer = handle.read(_TRAILER)
        if trailer != digest.digest():
            return None
        if not keep:
            return trailer
        handle.seek(size - _TRAILER - keep)
        return handle.read(keep)
