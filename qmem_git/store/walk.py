"""Finding memory files on disk: one walk shared by every scan, cheap enough for the hook path.

Rules (spec §5, ARCHITECTURE §3): regular ``*.md`` files, except ``MEMORY.md`` at any depth,
files over 256 KiB, symlinks and anything below a dot-directory. Dot-*files* ending in ``.md``
are listed, as Qwen Code indexes them too. Writers that must see oversized files as well (to
quarantine them rather than ignore them) call :func:`memory_paths`; :func:`is_memory_path` is
the same rule for a path taken from a git tree. Only ``os`` and ``stat`` are imported.
"""

from __future__ import annotations

import os
import stat

from qmem_git.core.limits import INDEX_NAME, MAX_FILE_BYTES, STATE_DIR_NAMES, TYPE_NAMES
from qmem_git.core.paths import git_dir_of, worktree_of
from qmem_git.errors import QmemError, UsageError

_ANY_SIZE = 1 << 62  # larger than any file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmem_git.core.paths import Layout

    # sorting these gives scan order: (-mtime in float ms, basename, rel path, mtime_ns, size)
    Found = tuple[float, str, str, int, int]


def walk(root: str, max_bytes: int = MAX_FILE_BYTES) -> list[Found]:
    """Every memory file under ``root`` of at most ``max_bytes``; a missing root is empty."""
    found: list[Found] = []
    stack = [("", root)]
    while stack:
        prefix, directory = stack.pop()
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    _visit(entry, prefix, stack, found, max_bytes)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
    return found


def memory_paths(root: str) -> list[str]:
    """Relative paths of every memory file under ``root`` whatever its size, sorted."""
    return sorted(found[2] for found in walk(root, max_bytes=_ANY_SIZE))


def is_memory_path(rel: str) -> bool:
    """True when :func:`walk` would list ``rel`` (size and file type aside)."""
    parts = rel.split("/")
    return (
        rel.endswith(".md")
        and parts[-1] != INDEX_NAME
        and not any(part.startswith(".") for part in parts[:-1])
    )


_MEMORY_ENTRIES = frozenset({INDEX_NAME, *TYPE_NAMES, *(f"{kind}.md" for kind in TYPE_NAMES)})


def foreign_entries(root: str, *, strict: bool = True) -> list[str]:
    """Names at the top of ``root`` that no memory folder holds: anything but MEMORY.md, the
    type folders, the legacy topic files and dot-entries (such as ``.git``). ``strict=False``
    counts only folders and ``*.md`` files, what writers scan: a store may keep other files
    someone committed by hand (``notes.txt``)."""
    try:
        names = os.listdir(root)
    except (FileNotFoundError, NotADirectoryError):
        return []
    foreign = [name for name in names if name[0] != "." and name not in _MEMORY_ENTRIES]
    if not strict:
        foreign = [n for n in foreign if n.endswith(".md") or os.path.isdir(os.path.join(root, n))]
    return sorted(foreign)


def check_store(layout: Layout, *, adopting: bool = False) -> None:
    """:func:`check_memory_folder` for the memory root, and the state dir must not be a
    symlink either (a cloned project's ``.qwen`` pointing at the home folder would get the
    state files, quarantine and store written there). ``adopting``: the folder is about to
    become a store, so any file but a memory counts against it (a flat project: main.py)."""
    state = layout.state_dir.rstrip("/") or "/"
    # quarantine -> a public folder would publish what it holds
    _refuse_links([state, *(os.path.join(state, name) for name in STATE_DIR_NAMES)])
    check_memory_folder(layout.memory_root, strict=adopting)


def check_on_main(git_dir: str) -> None:
    """Writers commit to ``main`` and recover the work tree against it: on another branch, or
    with HEAD detached (an old commit checked out, a rebase under way), they would commit the
    files of that checkout onto ``main``. Refuse instead, naming where HEAD is."""
    try:
        with open(os.path.join(git_dir, "HEAD"), "rb") as handle:
            head = handle.read(4096).strip()
    except OSError:
        return  # no HEAD: not set up yet, or broken (reading the repository reports that)
    if head == b"ref: refs/heads/main":
        return
    text = head.decode("utf-8", "replace")
    if text.startswith("ref: refs/heads/"):
        where = f"on branch {text[len('ref: refs/heads/') :]!r}"
    elif text.startswith("ref: "):
        where = f"on {text[len('ref: ') :]!r}"
    else:
        where = f"at a detached HEAD ({text[:12]})"
    raise QmemError(
        f"{worktree_of(git_dir)} is {where}, not on main: qmem-git commits only to main",
        hint="finish what you do there, then run `qmem-git git switch main`; commits on "
        "another branch stay there until you merge them",
    )


def check_memory_folder(root: str, *, strict: bool = True) -> None:
    """Refuse to make or write a memory store in a folder that holds other things (a project,
    a home folder, a folder of notes): writers commit or quarantine every memory file they
    find, and would take those files for memories. A memory folder, or its repository, that is
    a symlink is refused too: its commits would land in whatever repository it points at."""
    _refuse_links([root.rstrip("/") or "/", git_dir_of(root)])
    foreign = foreign_entries(root, strict=strict)
    if foreign:
        more = len(foreign) - 5
        shown = ", ".join(foreign[:5]) + (f" and {more} more" if more > 0 else "")
        raise UsageError(
            f"{root} is not a memory folder: it holds {shown}",
            hint="a memory folder holds only MEMORY.md and user/, feedback/, project/, "
            "reference/; give qmem-git a folder of its own, or move those out",
        )


def _refuse_links(paths: list[str]) -> None:
    for path in paths:
        if os.path.islink(path):
            raise UsageError(
                f"{path} is a symlink; qmem-git only writes folders it holds itself",
                hint="give qmem-git the real folder (the one the link points at)",
            )


def _visit(
    entry: os.DirEntry[str],
    prefix: str,
    stack: list[tuple[str, str]],
    found: list[Found],
    max_bytes: int,
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
    if stat.S_ISREG(info.st_mode) and info.st_size <= max_bytes:
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
