"""``qmem-git restore``: bring back memories that a forget, dream or any other commit removed.

Search walks history newest first and looks at each commit's deleted files and at entries that
disappeared from files it modified, so both ``forget`` of a whole file and of one entry inside a
multi-entry file can be undone long after the fact, without undoing the rest of that commit.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from qmem_git.core.changes import ChangeSet
from qmem_git.core.codec import parse_document, replace_body
from qmem_git.core.entries import (
    entries_of,
    entry_search_text,
    memory_type,
    parse_entries,
    render_entries,
    topics_of,
)
from qmem_git.core.forget import list_candidates
from qmem_git.core.model import INDEX_NAME, Entry
from qmem_git.core.names import fold_name
from qmem_git.core.text import clip, normalize_space
from qmem_git.errors import NothingToDo, UsageError
from qmem_git.store.history import History, LogEntry, open_history
from qmem_git.store.workdir import TakenPaths, iter_memory_files, load_document, read_text

RESTORED_FROM_TRAILER = "Qmem-Restored-From"
MAX_SUFFIX = 100
SUBJECT_SUMMARY_CHARS = 60
_HINT = "see what was removed with `qmem-git log --op forget` or `qmem-git log --op dream`"


@dataclass(frozen=True)
class RestoreCandidate:
    """One removed memory entry (or a whole unparseable file when ``entry`` is None).

    ``id`` is the forget candidate id it had in the parent commit (``path`` or ``path:i``);
    ``old_text`` is the whole file as it was there, so it can be written back verbatim.
    """

    id: str
    path: str
    commit: str
    subject: str
    op: str | None
    time: int
    type: str | None
    entry: Entry | None
    index: int
    file_deleted: bool
    old_text: str

    @property
    def summary(self) -> str:
        return self.entry.summary if self.entry else self.path

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "path": self.path,
            "commit": self.commit,
            "subject": self.subject,
            "op": self.op,
            "time": self.time,
            "type": self.type,
            "summary": self.summary,
            "why": self.entry.why if self.entry else None,
            "how_to_apply": self.entry.how_to_apply if self.entry else None,
            "file_deleted": self.file_deleted,
        }


def find_restorable(
    memory_root: str,
    query: str | None,
    ids: Sequence[str],
    from_rev: str | None = None,
    *,
    pending: bool = False,
) -> list[RestoreCandidate]:
    """Removed memories matching ``query`` (substring of entry text or path) or ``ids``.

    Newest removal first; each memory once (its most recent removal); memories present in the
    work tree again (same type, same summary ignoring case) are skipped. ``pending``: also the
    memory files deleted from the work tree and not committed yet, which a real run's crash
    recovery commits before it plans (a dry run plans without it).
    """
    needle = normalize_space(query or "").lower()
    wanted = {i.strip().strip("/") for i in ids if i.strip()}
    if not needle and not wanted:
        raise UsageError("restore needs a query or --id", "e.g. `qmem-git restore pnpm`")
    present = _present_keys(memory_root)
    found: list[RestoreCandidate] = []
    seen: set[tuple[str | None, str]] = set()
    still_there = False  # a match was removed once, but the same memory is in the folder now
    with open_history(memory_root) as repo:
        uncommitted = _pending(repo, memory_root) if pending and from_rev is None else iter(())
        for candidate in itertools.chain(uncommitted, _removed(repo, from_rev)):
            key = _key(candidate)
            if key in seen or not _matches(candidate, needle, wanted):
                continue
            if key in present:
                still_there = True
                continue
            seen.add(key)
            found.append(candidate)
    if not found:
        what = f"matching {query!r}" if needle else "with id " + ", ".join(sorted(wanted))
        if still_there:
            raise NothingToDo(
                f"the removed memory {what} is in the memory folder again",
                "a dream merges duplicate files into one: find it with `qmem-git recall`",
            )
        raise NothingToDo(f"no removed memory {what} found in history", _HINT)
    return found


def plan_restore(memory_root: str, candidates: Sequence[RestoreCandidate]) -> ChangeSet:
    """Write deleted files back and re-add removed entries; one ``restore`` commit."""
    if not candidates:
        raise NothingToDo("nothing to restore", _HINT)
    planned: dict[str, str] = {}
    restored: list[RestoreCandidate] = []
    notes: list[str] = []
    taken = TakenPaths(memory_root)
    for group in _groups(candidates):
        target = _restore_group(memory_root, group, planned, taken)
        if target is None:
            continue
        restored += group
        if target != group[0].path:
            notes.append(f"{group[0].path} is taken now; restored as {target}")
    return _changeset(planned, restored, notes)


# -- finding ------------------------------------------------------------------------------


def _removed(repo: History, from_rev: str | None) -> Iterator[RestoreCandidate]:
    head = repo.head()
    if head is None:
        return
    start = repo.resolve(from_rev) if from_rev else head
    for entry in repo.walk([start]):
        if entry.is_merge or not entry.parents:
            continue  # merges only repeat their sides' removals; a root commit removes nothing
        for change in entry.info.changes:
            if change.status in ("D", "M") and _is_memory(change.path):
                yield from _removed_in(repo, entry, change.path)


def _pending(repo: History, memory_root: str) -> Iterator[RestoreCandidate]:
    """Memory files of HEAD missing from the work tree, as a removal the work tree made."""
    head = repo.head()
    if head is None:
        return
    # the commit is the recover commit a real run makes first
    source = _Source("", "deleted in the work tree, not committed yet", None, repo.entry(head).time)
    for path in sorted(repo.tree_files(head)):
        if not _is_memory(path) or os.path.lexists(os.path.join(memory_root, path)):
            continue
        data = repo.blob(head, path)
        if data is None or repo.is_symlink(head, path):
            continue
        text = data.decode("utf-8", "replace")
        doc = parse_document(text, path, 0)
        if doc is None:
            yield _candidate(source, path, text, path, None, 0, True)
            continue
        for old in list_candidates([doc]):
            yield _candidate(source, path, text, old.id, old.entry, old.index, True)


class _Source(NamedTuple):
    """Where a removal happened, for one not in history yet (``LogEntry`` has the same)."""

    commit: str
    subject: str
    op: str | None
    time: int


def _removed_in(repo: History, commit: LogEntry, path: str) -> Iterator[RestoreCandidate]:
    old_data = repo.blob(commit.parents[0], path)
    if old_data is None or repo.is_symlink(commit.parents[0], path):
        return  # a symlink's blob is its target's name, not a memory to bring back
    new_data = repo.blob(commit.commit, path)
    old_text = old_data.decode("utf-8", "replace")
    new_text = None if new_data is None else new_data.decode("utf-8", "replace")
    if new_text is not None and _lines(old_text) <= _lines(new_text):
        return  # every old line survived (the usual append-only edit): no entry can be gone
    doc = parse_document(old_text, path, 0)
    if doc is None:
        if new_text is None:
            yield _candidate(commit, path, old_text, path, None, 0, True)
        return
    kept = {e.summary.lower() for e in entries_of(path, new_text) or []}
    for old in list_candidates([doc]):  # the forget ids the entries had (spec §11.1)
        if old.summary.lower() not in kept:
            yield _candidate(commit, path, old_text, old.id, old.entry, old.index, new_text is None)


def _candidate(
    commit: LogEntry | _Source,
    path: str,
    old_text: str,
    cid: str,
    item: Entry | None,
    index: int,
    file_deleted: bool,
) -> RestoreCandidate:
    return RestoreCandidate(
        id=cid,
        path=path,
        commit=commit.commit,
        subject=commit.subject,
        op=commit.op,
        time=commit.time,
        type=memory_type(path, old_text),
        entry=item,
        index=index,
        file_deleted=file_deleted,
        old_text=old_text,
    )


def _lines(text: str) -> set[str]:
    return {line.strip() for line in text.split("\n")}


def _matches(candidate: RestoreCandidate, needle: str, wanted: set[str]) -> bool:
    if candidate.id in wanted or candidate.path in wanted:
        return True
    if not needle:
        return False
    text = entry_search_text(candidate.entry) if candidate.entry else candidate.old_text.lower()
    return needle in text or needle in candidate.path.lower()


def _key(candidate: RestoreCandidate) -> tuple[str | None, str]:
    if candidate.entry is None:
        return (None, candidate.path)
    return (candidate.type, candidate.entry.summary.lower())


def _present_keys(memory_root: str) -> set[tuple[str | None, str]]:
    """(type, summary) of every entry in the work tree, plus (None, path) for every file."""
    keys: set[tuple[str | None, str]] = set()
    for info in iter_memory_files(memory_root):
        keys.add((None, info.relative_path))
        doc = load_document(info)
        if doc is not None:
            keys.update((doc.type, e.summary.lower()) for e in parse_entries(doc.body))
    return keys


def _is_memory(path: str) -> bool:
    return path.endswith(".md") and path != INDEX_NAME


# -- planning -------------------------------------------------------------------------------


def _groups(candidates: Sequence[RestoreCandidate]) -> list[list[RestoreCandidate]]:
    """Candidates removed from the same file by the same commit travel together."""
    groups: dict[tuple[str, str], list[RestoreCandidate]] = {}
    for candidate in candidates:
        groups.setdefault((candidate.path, candidate.commit), []).append(candidate)
    return list(groups.values())


def _restore_group(
    memory_root: str, group: list[RestoreCandidate], planned: dict[str, str], taken: TakenPaths
) -> str | None:
    """Plan one group into ``planned``; returns the path written, None when nothing changes."""
    first = group[0]
    current = planned.get(first.path)
    if current is None:
        current = read_text(os.path.join(memory_root, first.path))
    doc = None if current is None else parse_document(current, first.path, 0)
    if current is None or first.file_deleted or doc is None:
        target = first.path
        if current is not None or _taken(first.path, planned, taken):
            target = _free_path(first, planned, taken)
        planned[target] = _old_file(group)
        return target
    entries = parse_entries(doc.body)
    have = {e.summary.lower() for e in entries}
    missing = [c.entry for c in group if c.entry and c.entry.summary.lower() not in have]
    if not missing:
        return None
    planned[first.path] = replace_body(current, doc.body, render_entries(entries + missing))
    return first.path


def _old_file(group: list[RestoreCandidate]) -> str:
    """The old file verbatim, or its frontmatter with only the chosen entries when partial."""
    old_text = group[0].old_text
    doc = parse_document(old_text, group[0].path, 0)
    if doc is None:
        return old_text
    chosen = sorted((c for c in group if c.entry), key=lambda c: c.index)
    if len(chosen) == len(parse_entries(doc.body)):
        return old_text
    return replace_body(old_text, doc.body, render_entries([c.entry for c in chosen if c.entry]))


def _free_path(candidate: RestoreCandidate, planned: dict[str, str], taken: TakenPaths) -> str:
    """Next free ``<stem>-N.md`` (spec §7.7 slug rule), checking the disk and this plan."""
    stem = candidate.path[: -len(".md")]
    for number in range(2, MAX_SUFFIX + 1):
        path = f"{stem}-{number}.md"
        if not _taken(path, planned, taken):
            return path
    return f"{stem}-{candidate.time * 1000}.md"


def _taken(rel: str, planned: dict[str, str], taken: TakenPaths) -> bool:
    """On disk or in this plan, under any spelling a case-insensitive disk would merge."""
    folded = fold_name(rel)
    return any(fold_name(path) == folded for path in planned) or taken(rel)


def _changeset(
    planned: dict[str, str], restored: list[RestoreCandidate], notes: list[str]
) -> ChangeSet:
    commits = list(dict.fromkeys(c.commit for c in restored))
    count = len(restored)
    noun = "memory" if count == 1 else "memories"
    shorts = ", ".join(c[:7] if c else "the work tree" for c in commits)
    subject = "nothing"
    if restored:
        first = clip(restored[0].summary, SUBJECT_SUMMARY_CHARS)
        subject = f"{count} {noun} from {shorts}: {first}"
    return ChangeSet(
        op="restore",
        subject=subject,
        writes=dict(sorted(planned.items())),
        topics=topics_of(c.type for c in restored),
        added=count,
        trailers=tuple((RESTORED_FROM_TRAILER, sha) for sha in commits),
        notes=tuple(notes),
    )
