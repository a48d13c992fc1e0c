"""``qmem-git undo [REV]``: revert one operation as a new commit (returned as a ChangeSet).

Undo reads trees, never commit messages: a message can be stale (an amended commit keeps ours)
or misleading (a file name holding a newline), and undo looks at few commits, so correctness
comes before speed here (ARCHITECTURE §6 is about ``log``).
"""

from __future__ import annotations

from typing import NamedTuple

from qmem_git.core.changes import ChangeSet
from qmem_git.core.entries import entry_delta, memory_type, topics_of
from qmem_git.core.holdback import hold_reason
from qmem_git.core.model import INDEX_NAME
from qmem_git.errors import NothingToDo, QmemError, UnsafePath
from qmem_git.store.history import History, LogEntry, is_commit_id, open_history
from qmem_git.store.repo import check_memory_path
from qmem_git.store.walk import is_versioned_path

UNDOES_TRAILER = "Qmem-Undoes"


class _File(NamedTuple):
    """One path the undone commit changed: its bytes now and the bytes undo must bring back."""

    now: bytes | None  # None = absent
    wanted: bytes | None
    edited: bool  # ``now`` is a hand edit still uncommitted (recovery commits it first)


def undo_target(memory_root: str, rev: str | None = None) -> str:
    """The commit id REV names now, resolved before the writer's crash recovery runs.

    Recovery commits uncommitted hand edits first; resolved after it, ``HEAD`` (and ``HEAD~N``)
    would name that ``recover`` commit rather than the operation the user saw last, and
    ``--dry-run`` (which runs no recovery) would plan a different undo than the real run.
    """
    with open_history(memory_root) as repo:
        _head(repo)
        return repo.resolve(rev or "HEAD")


def plan_undo(memory_root: str, rev: str | None = None, *, force: bool = False) -> ChangeSet:
    """Put every memory file the commit touched back to its state in the commit's first parent.

    ``rev`` is a revision, or the commit id :func:`undo_target` returned, which is taken as it
    is: it was resolved before recovery ran and must not be resolved again.

    MEMORY.md is skipped (the store regenerates it) and files that are not memory files are
    left alone (named in the notes): a ChangeSet cannot write them. Files already in that
    state are left alone, so undoing twice yields an empty ChangeSet. When a later commit, or
    an uncommitted hand edit, changed one of the same files the undo would silently drop that
    work, so it is refused unless ``force``. A version that is not UTF-8 text cannot travel in
    a ChangeSet, so it is refused rather than written mangled.
    """
    with open_history(memory_root) as repo:
        head = _head(repo)
        target = repo.entry(_commit_id(repo, rev))
        if target.is_merge:
            raise _merge_refused(target)
        paths, left_alone = _split_paths(repo.changed_paths(target.commit))
        files = {path: _file(repo, head, target, path) for path in paths}
        pending = {path: f for path, f in files.items() if f.now != f.wanted}
        if pending and not force:
            _refuse_if_changed_later(repo, target, paths)
            _refuse_if_edited(target, [path for path, f in files.items() if f.edited])
        for path, f in pending.items():
            _require_restorable(repo, target, path, f)
        changeset = _changeset(target, pending, left_alone)
        if not pending and paths:  # nothing left to undo: say who undid it already
            changeset = changeset._replace(notes=changeset.notes + _already(repo, target, paths))
        return changeset


def _already(repo: History, target: LogEntry, paths: list[str]) -> tuple[str, ...]:
    """An undo with nothing left to do says so, and which later commit did it (a forget)."""
    later = _later_changes(repo, target, paths)
    shown = ", ".join(_shown(p) for p in paths)
    if not later:
        return (f"{shown} already as before {target.short}",)
    newest = later[0]
    return (
        f"{shown} already as before {target.short}: changed by {newest.short} ({newest.subject})",
    )


def _commit_id(repo: History, rev: str | None) -> str:
    """``undo_target``'s id as it is; any other revision resolved now."""
    return rev if rev is not None and is_commit_id(rev) else repo.resolve(rev or "HEAD")


def _head(repo: History) -> str:
    head = repo.head()
    if head is None:
        raise NothingToDo("nothing to undo: the memory repository has no commits", "")
    return head


def _split_paths(paths: list[str]) -> tuple[list[str], list[str]]:
    """(memory files undo restores, other paths it leaves alone); MEMORY.md is in neither."""
    memory = [p for p in paths if _writable(p)]
    others = [p for p in paths if p != INDEX_NAME and p not in memory]
    return memory, others


def _writable(path: str) -> bool:
    """A path the store would write: a memory file by the store's rule, safe, UTF-8 named.

    A name with a control character (a newline) is left alone too: in our commit message's
    file lines it would read as other paths.
    """
    if not is_versioned_path(path) or not path.isprintable():
        return False
    try:
        path.encode("utf-8")  # a non-UTF-8 name arrives with surrogates in it
        check_memory_path(path)
    except (UnicodeEncodeError, UnsafePath):
        return False
    return True


def _file(repo: History, head: str, target: LogEntry, path: str) -> _File:
    """What ``path`` holds when the undo is applied, and what it held before ``target``.

    "Now" is HEAD's version, unless the work tree holds a change the writer's crash recovery
    will commit before planning (a valid memory file, or a deletion): then the real run plans
    against that commit, and ``--dry-run`` must see the same content.
    """
    parent = target.parents[0] if target.parents else None
    committed = repo.blob(head, path)
    on_disk = repo.worktree_file(path)
    edited = on_disk != committed and (on_disk is None or _recoverable(path, on_disk))
    return _File(on_disk if edited else committed, repo.blob(parent, path), edited)


def _recoverable(path: str, data: bytes) -> bool:
    """Recovery's rule: a file is committed unless it must be held back (``core.holdback``);
    a held-back one is left where it is, uncommitted, so the undo then sees HEAD's."""
    return hold_reason(path, data) is None


def _refuse_if_changed_later(repo: History, target: LogEntry, paths: list[str]) -> None:
    """Refuse when a commit after ``target`` changed one of its files (by the trees)."""
    later = _later_changes(repo, target, paths)
    if not later:
        return
    newest = later[0]
    more = f" and {len(later) - 1} more" if len(later) > 1 else ""
    raise QmemError(
        f"cannot undo {target.short}: later commit {newest.short} ({newest.subject}){more} "
        f"also changed {', '.join(_shared(repo, newest, paths))}",
        "undo the later commit first, or pass --force to overwrite those files",
    )


def _later_changes(repo: History, target: LogEntry, paths: list[str]) -> list[LogEntry]:
    """The commits after ``target`` that changed one of ``paths``, newest first."""
    return [entry for entry in repo.since(target.commit) if _shared(repo, entry, paths)]


def _shared(repo: History, entry: LogEntry, paths: list[str]) -> list[str]:
    """The paths ``entry`` changed; a merge only those it resolved (``History.changed``)."""
    return sorted(path for path in paths if repo.changed(entry.commit, path))


def _refuse_if_edited(target: LogEntry, edited: list[str]) -> None:
    """Refuse when a hand edit is pending: the real run commits it first (op ``recover``),
    which then counts as a later change; ``--dry-run`` must refuse the same way."""
    if edited:
        raise QmemError(
            f"cannot undo {target.short}: {', '.join(sorted(edited))} changed since "
            "(uncommitted; the next write commits it as a `recover` commit)",
            "keep the edit and leave the undo, or pass --force to overwrite it",
        )


def _require_restorable(repo: History, target: LogEntry, path: str, f: _File) -> None:
    """Refuse a version a ChangeSet cannot carry byte for byte (not UTF-8, or a symlink)."""
    if f.wanted is None:
        return
    parent = target.parents[0]  # ``wanted`` exists, so there is a parent
    if not repo.is_symlink(parent, path) and _is_utf8(f.wanted):
        return
    raise QmemError(
        f"cannot undo {target.short}: the version of {path} it replaced is not UTF-8 text "
        "(binary data or a symlink), so qmem-git cannot restore it exactly",
        f"restore it with git: `git checkout {parent[:12]} -- {path}` in the memory folder, "
        "then `git commit`",
    )


def _merge_refused(target: LogEntry) -> QmemError:
    return QmemError(
        f"cannot undo {target.short} ({target.subject}): it is a merge of two histories",
        "undo the operations it merged instead (see `qmem-git log`)",
    )


def _changeset(target: LogEntry, pending: dict[str, _File], left_alone: list[str]) -> ChangeSet:
    texts = {path: (_text(f.now), _text(f.wanted)) for path, f in sorted(pending.items())}
    added = removed = 0
    for path, (now, wanted) in texts.items():
        plus, minus = entry_delta(path, now, wanted)
        added, removed = added + plus, removed + minus
    return ChangeSet(
        op="undo",
        subject=f"undo {target.short} ({target.subject})",
        writes={p: w for p, (_, w) in texts.items() if w is not None},
        deletes=tuple(p for p, (_, w) in texts.items() if w is None),
        topics=topics_of(memory_type(p, *texts[p]) for p in texts),
        added=added,
        removed=removed,
        trailers=((UNDOES_TRAILER, target.commit),),
        notes=tuple(
            f"left {_shown(p)} alone: not a memory file (undo it with git)" for p in left_alone
        ),
    )


def _shown(path: str) -> str:
    """``path`` for one line of text: control characters and undecodable bytes escaped."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in path)


def _text(data: bytes | None) -> str | None:
    """Text of a version; lossy only for ``now`` (entry counting), as ``wanted`` is UTF-8."""
    return None if data is None else data.decode("utf-8", "replace")


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
