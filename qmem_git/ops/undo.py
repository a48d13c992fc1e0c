"""``qmem-git undo [REV]``: revert one operation as a new commit (returned as a ChangeSet)."""

from __future__ import annotations

from qmem_git.core.changes import ChangeSet
from qmem_git.core.model import INDEX_NAME
from qmem_git.errors import NothingToDo, QmemError
from qmem_git.ops.history import entry_delta, memory_type, topics_of
from qmem_git.store.history import FileDiff, History, LogEntry, open_history

UNDOES_TRAILER = "Qmem-Undoes"


def plan_undo(memory_root: str, rev: str | None = None, *, force: bool = False) -> ChangeSet:
    """Put every file the commit touched back to its state in the commit's first parent.

    MEMORY.md is skipped (the store regenerates it). Files already in that state are left
    alone, so undoing twice yields an empty ChangeSet. When a later commit changed one of the
    same files the undo would silently drop that later work, so it is refused unless ``force``.
    """
    with open_history(memory_root) as repo:
        head = repo.head()
        if head is None:
            raise NothingToDo("nothing to undo: the memory repository has no commits", "")
        target = repo.entry(repo.resolve(rev or "HEAD"))
        if target.is_merge:
            raise _merge_refused(target)
        files = [f for f in repo.changes_of(target.commit) if f.path != INDEX_NAME]
        pending = _pending(repo, head, files)
        if pending and not force:
            _refuse_if_changed_later(repo, target, {f.path for f in files})
        return _changeset(target, pending)


Pending = dict[str, tuple[str | None, str | None]]


def _pending(repo: History, head: str, files: list[FileDiff]) -> Pending:
    """path -> (text at HEAD, text it must get back); None = absent; only where they differ."""
    pending: Pending = {}
    for change in files:
        if change.binary:
            continue  # memory files are text; a binary file cannot travel in a ChangeSet
        data = repo.blob(head, change.path)
        now = None if data is None else data.decode("utf-8", "replace")
        if now != change.old_text:
            pending[change.path] = (now, change.old_text)
    return pending


def _refuse_if_changed_later(repo: History, target: LogEntry, paths: set[str]) -> None:
    later = [e for e in repo.since(target.commit) if paths.intersection(e.info.paths)]
    if not later:
        return
    newest = later[0]
    more = f" and {len(later) - 1} more" if len(later) > 1 else ""
    shared = sorted(paths.intersection(newest.info.paths))
    raise QmemError(
        f"cannot undo {target.short}: later commit {newest.short} ({newest.subject}){more} "
        f"also changed {', '.join(shared)}",
        "undo the later commit first, or pass --force to overwrite those files",
    )


def _merge_refused(target: LogEntry) -> QmemError:
    return QmemError(
        f"cannot undo {target.short} ({target.subject}): it is a merge of two histories",
        "undo the operations it merged instead (see `qmem-git log`)",
    )


def _changeset(target: LogEntry, pending: Pending) -> ChangeSet:
    added = removed = 0
    for path, (now, wanted) in pending.items():
        plus, minus = entry_delta(path, now, wanted)
        added, removed = added + plus, removed + minus
    topics = topics_of(memory_type(p, *pending[p]) for p in sorted(pending))
    return ChangeSet(
        op="undo",
        subject=f"undo {target.short} ({target.subject})",
        writes={p: w for p, (_, w) in sorted(pending.items()) if w is not None},
        deletes=tuple(sorted(p for p, (_, w) in pending.items() if w is None)),
        topics=topics,
        added=added,
        removed=removed,
        trailers=((UNDOES_TRAILER, target.commit),),
    )
