"""Finding memory files on disk: one walk shared by every scan, cheap enough for the hook path.

Rules: what Qwen Code 0.24's recursive ``readdir`` lists: every ``*.md`` at any depth, dot-folders
included, of any size, except ``MEMORY.md`` at any depth; a symlinked file or folder is followed
(what it points at is read, as Qwen reads it). What qmem-git commits (:func:`memory_paths`,
``versioned``) follows no symlink and keeps a nested ``MEMORY.md``; :func:`is_memory_path` is the
rule for a path taken from a git tree. :func:`agent_listing` is Qwen Code 0.24.4's listing to
the letter (its order, its loop bound; docs/real-clients.md). Only ``os`` and ``stat`` are
imported.
"""

from __future__ import annotations

import errno
import os
import stat

from qmem_git.core.limits import INDEX_NAME, STATE_DIR_NAMES
from qmem_git.core.paths import git_dir_of, is_legacy_repo, legacy_git_dir, worktree_of
from qmem_git.errors import QmemError, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmem_git.core.paths import Layout

    # sorting these gives scan order: (-mtime in float ms, basename, rel path, mtime_ns, size)
    Found = tuple[float, str, str, int, int]


def walk(root: str, *, versioned: bool = False) -> list[Found]:
    """Every memory file under ``root``, of any size, as Qwen Code lists them
    (:func:`agent_listing`); a missing root is empty. ``versioned``: every file qmem-git
    commits instead: no symlink followed, and files named MEMORY.md below the root kept (Qwen
    Code skips that name at any depth; to history they are plain files)."""
    if not versioned:
        try:
            listed = agent_listing(root)
        except (FileNotFoundError, NotADirectoryError):  # no folder (yet): nothing to list
            return []
        return [_found(rel, info) for rel, info in listed]
    found: list[Found] = []
    stack = [("", root)]
    while stack:
        prefix, directory = stack.pop()
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    _visit(entry, prefix, stack, found, bool(prefix))
        except OSError:
            continue
    return found


MAX_AGENT_ENTRIES = 1_000_000

if TYPE_CHECKING:
    Listed = tuple[str, os.stat_result | None]


def agent_entries(root: str, max_entries: int = MAX_AGENT_ENTRIES) -> list[Listed]:
    """What Qwen Code 0.24.4's ``listMarkdownFiles`` lists under ``root``, in its order (UTF-16
    code units), each with the ``stat`` Qwen takes of it (symlinks followed; None when that
    fails: a dangling link, ELOOP). Every name ending in ``.md`` (case-sensitive) but those
    named ``MEMORY.md``, at any depth: dot-folders (``.git`` too) and symlinked folders are
    descended, a symlink to a folder as long as the kernel resolves it. Nothing is read.

    A missing root is empty; a folder that cannot be listed raises :class:`OSError` (Qwen's
    rebuild fails then too), except one removed while walking or whose path is longer than
    the system takes (node's ``stat`` fails there: not descended), which are skipped. Names that
    are not UTF-8 are left out (Qwen reads them with U+FFFD and cannot open them). More than
    ``max_entries`` entries of any kind raise :class:`QmemError`.
    """
    listed: list[Listed] = []
    seen = 0
    stack = [(root, "")]  # (folder, its relative path + "/")
    while stack:
        directory, prefix = stack.pop()
        try:
            with os.scandir(directory) as scan:
                entries = list(scan)
        except OSError as err:
            if prefix and err.errno in (errno.ENOENT, errno.ENAMETOOLONG):
                continue  # removed meanwhile (Qwen then lists nothing), or never stat-able
            if err.errno == errno.ENOENT:
                return []
            raise
        seen += len(entries)
        if seen > max_entries:
            raise QmemError(
                f"{root} holds more than {max_entries} entries (a symlink loop?)",
                hint="remove the symlink that points back into the folder",
            )
        for entry in entries:
            _visit_agent(entry, prefix, stack, listed)
    ascii_only = all(rel.isascii() for rel, _ in listed)  # code points = UTF-16 units then
    listed.sort(key=(lambda item: item[0]) if ascii_only else (lambda item: _utf16(item[0])))
    return listed


def agent_listing(
    root: str, max_entries: int = MAX_AGENT_ENTRIES
) -> list[tuple[str, os.stat_result]]:
    """The files of :func:`agent_entries` Qwen Code 0.24.4 can read as memories, in its listing
    order: their followed ``stat`` is a regular file (a symlink gives its target's mtime and
    size, inside the root or not). Left out: dangling links, folders named ``*.md``, FIFOs,
    sockets and devices (Qwen's read of a FIFO never returns). A file this process may not
    open is still listed: Qwen skips it when its read fails, and so must the caller."""
    return [
        (rel, info)
        for rel, info in agent_entries(root, max_entries)
        if info is not None and stat.S_ISREG(info.st_mode)
    ]


def _visit_agent(
    entry: os.DirEntry[str],
    prefix: str,
    stack: list[tuple[str, str]],
    listed: list[Listed],
) -> None:
    """One entry as node's readdir(recursive) sees it: it ``stat``s every entry, following
    links (the kernel's ELOOP ends a symlink loop there). For an entry that is no link, the
    type from the listing and ``lstat`` give the same answers (its folder's path resolved,
    so does its own) with fewer calls."""
    name = entry.name
    if not name.isascii() and _undecodable(name):
        return
    md = name.endswith(".md") and name != INDEX_NAME
    info: os.stat_result | None = None
    try:
        if entry.is_symlink():
            info = os.stat(entry.path)
            is_dir = stat.S_ISDIR(info.st_mode)
        else:
            is_dir = entry.is_dir(follow_symlinks=False)
            info = entry.stat(follow_symlinks=False) if md else None
    except OSError:
        is_dir = False
    if is_dir:
        stack.append((entry.path, prefix + name + "/"))
    if md:
        listed.append((prefix + name, info))


def _undecodable(name: str) -> bool:
    """A name that was not UTF-8 on disk (Python keeps its bytes as lone surrogates)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _utf16(text: str) -> bytes:  # core.index.utf16_key, without its imports
    return text.encode("utf-16-be", "surrogatepass")


def memory_paths(root: str) -> list[str]:
    """Relative paths of every file qmem-git versions under ``root`` (any size), sorted:
    :func:`is_versioned_path`."""
    return sorted(found[2] for found in walk(root, versioned=True))


def is_memory_path(rel: str) -> bool:
    """True when :func:`walk` would list ``rel`` (size and file type aside): what MEMORY.md
    may list."""
    return is_versioned_path(rel) and rel.rsplit("/", 1)[-1] != INDEX_NAME


def is_versioned_path(rel: str) -> bool:
    """A path qmem-git commits from the work tree: any ``*.md`` but the root's MEMORY.md
    (generated, committed by every writer itself). One in a ``.git`` folder is held back as
    an unsafe path (``core.holdback``)."""
    return rel.endswith(".md") and rel != INDEX_NAME


def check_store(layout: Layout) -> None:
    """:func:`check_memory_folder` for the memory root, and the state dir must not be a
    symlink either (a cloned project's ``.qwen`` pointing at the home folder would get the
    state files and the store written there). Whatever the folder holds beside memories is
    the agent's and never counts against it."""
    state = layout.state_dir.rstrip("/") or "/"
    _refuse_links([state, *(os.path.join(state, name) for name in STATE_DIR_NAMES)])
    check_memory_folder(layout.memory_root)


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


def check_memory_folder(root: str) -> None:
    """Refuse to make a memory store in another project's folder: one whose ``.git`` qmem-git
    did not make (a project's repository, a worktree's or submodule's ``.git`` file) would
    have its files taken for the agent's. A memory folder, or its repository, that is a
    symlink is refused too: its commits would land in whatever repository it points at. Any
    other file or folder in the memory root is the agent's."""
    _refuse_links([root.rstrip("/") or "/", git_dir_of(root)])
    if is_foreign_repository(root):
        raise UsageError(
            f"{root} is not a memory folder: it is another project's git repository",
            hint="give qmem-git a folder of its own (--memory-dir), such as ~/notes/memory",
        )


# what `qmem-git init` writes into every repository it makes (store.repo)
_OUR_MARKS = (("hooks", "pre-commit", b"qmem-git-managed-hook"), ("info", "exclude", b".qmem-tmp-"))


def is_foreign_repository(root: str) -> bool:
    """True when ``root/.git`` exists and is not a memory repository: a ``.git`` file (a
    linked worktree or submodule of a project), or a repository without the marks `qmem-git
    init` leaves (its pre-commit hook, its exclude lines) that tracks a file that is not
    Markdown or, with no commit yet, holds one at its top (``main.py``, ``package.json``). A
    memory folder someone versioned with plain git is taken as one (its ``.git`` stays theirs:
    the store's repository is made beside the folder). Once that repository exists, nothing in
    the folder counts: a ``.git`` written there later is the agent's, never read."""
    git_dir = legacy_git_dir(root)
    if os.path.islink(git_dir) or not os.path.lexists(git_dir) or os.path.isdir(git_dir_of(root)):
        return False  # a link is never followed: whatever it points at stays unread
    if is_legacy_repo(root, os.path.exists):
        return False  # an earlier version's store, moved out by the next writer
    if not os.path.isdir(git_dir):
        return True
    for *parts, mark in _OUR_MARKS:
        try:
            with open(os.path.join(git_dir, *parts), "rb") as handle:
                if mark in handle.read(1 << 16):
                    return False
        except OSError:
            continue
    only_markdown = _tracks_only_markdown(root)
    return not only_markdown if only_markdown is not None else _holds_other_files(root)


def _holds_other_files(root: str) -> bool:
    """A regular file at the top of ``root`` that is neither Markdown nor a dot-file."""
    try:
        with os.scandir(root) as entries:
            return any(
                not e.name.endswith(".md") and e.name[0] != "." and e.is_file(follow_symlinks=False)
                for e in entries
            )
    except OSError:
        return False


def _tracks_only_markdown(root: str) -> bool | None:
    """Whether HEAD holds only ``*.md`` files (read once, before init marks the repository);
    None when there is no commit yet."""
    from dulwich.errors import NotGitRepository
    from dulwich.objects import Commit
    from dulwich.repo import Repo

    try:
        with Repo(root) as repo:
            try:
                head = repo[b"HEAD"]
            except KeyError:
                return None
            if not isinstance(head, Commit):
                return False
            entries = repo.object_store.iter_tree_contents(head.tree)
            return all(entry.path.endswith(b".md") for entry in entries if entry.path)
    except (KeyError, NotGitRepository, OSError, ValueError):
        return False  # unreadable: not known to be a memory repository


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
    nested_index: bool,
) -> None:
    name = entry.name
    if entry.is_symlink():
        return
    if entry.is_dir(follow_symlinks=False):
        stack.append((prefix + name + "/", entry.path))
        return
    if not name.endswith(".md") or (name == INDEX_NAME and not nested_index):
        return
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:  # removed by a concurrent writer between listing and stat
        return
    if stat.S_ISREG(info.st_mode):
        found.append(_found(prefix + name, info))


def _found(rel: str, info: os.stat_result) -> Found:
    """Float milliseconds first, as ``core.index.scan_order_key`` sorts (an int divided by an
    int, rounded once: ``/ 1e6`` would round the nanoseconds to a float first)."""
    mtime_ns = info.st_mtime_ns
    return (-(mtime_ns / 1_000_000), rel.rsplit("/", 1)[-1], rel, mtime_ns, info.st_size)


def read_text(path: str) -> str | None:
    """File text as UTF-8, or None when it cannot be read or decoded."""
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def behind_link(root: str, rel: str) -> bool:
    """True when a folder on ``rel``'s path is a symlink: what lies behind it is not read (a
    full walk never descends there either)."""
    parts = rel.split("/")[:-1]
    return any(
        os.path.islink(os.path.join(root, *parts[:depth])) for depth in range(1, len(parts) + 1)
    )


def read_if_regular(path: str) -> bytes | None:
    """A regular file's bytes, never following a symlink; None when there is no such file.

    ``O_NONBLOCK``: opening a FIFO someone left at a memory path must not hang the command.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as err:
        if err.errno == errno.ELOOP:
            return None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with open(fd, "rb", closefd=False) as handle:
            return handle.read()
    finally:
        os.close(fd)
