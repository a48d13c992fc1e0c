"""Finding memory files on disk: one walk shared by every scan, cheap enough for the hook path.

Rules (spec §5, ARCHITECTURE §3): regular ``*.md`` files, except ``MEMORY.md`` at any depth,
files over 256 KiB, symlinks and anything below a dot-directory. Dot-*files* ending in ``.md``
are listed, as Qwen Code indexes them too. Only ``os`` and ``stat`` are imported.
"""

from __future__ import annotations

import os
import stat

from qmem_git.core.limits import INDEX_NAME, MAX_FILE_BYTES

TYPE_CHECKING = False
if TYPE_CHECKING:
    # sorting these gives scan order: (-mtime in float ms, basename, rel path, mtime_ns, size)
    Found = tuple[float, str, str, int, int]


def walk(root: str) -> list[Found]:
    """Every memory file under ``root``; a missing root is empty."""
    found: list[Found] = []
    stack = [("", root)]
    while stack:
        prefix, directory = stack.pop()
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    _visit(entry, prefix, stack, found)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
    return found


def _visit(
    entry: os.DirEntry[str], prefix: str, stack: list[tuple[str, str]], found: list[Found]
) -> None:
    name = entry.name
    if entry.is_symlink():
        return
    if entry.is_dir(follow_symlinks=False):
        if name[0] != ".":
            stack.append((prefix + name + "/", entry.path))
        return
    if not name.endswith(".md") or name == INDEX_NAME:
        return
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:  # removed by a concurrent writer between listing and stat
        return
    if stat.S_ISREG(info.st_mode) and info.st_size <= MAX_FILE_BYTES:
        mtime_ns = info.st_mtime_ns
        # float milliseconds first, as core.index.scan_order_key sorts
        found.append((-(mtime_ns / 1_000_000), name, prefix + name, mtime_ns, info.st_size))


def read_text(path: str) -> str | None:
    """File text as UTF-8, or None when it cannot be read or decoded."""
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
