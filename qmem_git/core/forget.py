"""Forget: candidate ids, selection and the planned file edits (spec §11)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from qmem_git.core.codec import render_with_frontmatter, split_frontmatter
from qmem_git.core.dedupe import ReadText
from qmem_git.core.entries import entry_search_text, parse_entries, render_entries
from qmem_git.core.model import Document, Entry, MemoryType
from qmem_git.core.text import normalize_space
from qmem_git.errors import NothingToDo

DEFAULT_LIMIT = 5
"""Selection limit of ``select_forget``; the "forget entries" entry point is unlimited (None)."""


class UnknownMemoryId(NothingToDo):
    """An explicit ``--id`` that names no current entry."""


@dataclass(frozen=True)
class Candidate:
    """One forgettable entry: ``relative_path`` alone for one-entry files, else ``path:<i>``."""

    id: str
    type: MemoryType
    relative_path: str
    index: int
    entry: Entry

    @property
    def summary(self) -> str:
        return self.entry.summary


@dataclass(frozen=True)
class ForgetPlan:
    """File edits of a forget; ``removed`` are the matches reported as forgotten.

    ``removed_count`` is the spec's count (reported matches); ``entries_removed`` also counts
    same-summary siblings that went with them.
    """

    writes: dict[str, str]
    deletes: list[str]
    removed_count: int
    touched_topics: list[MemoryType]
    system_message: str | None
    removed: list[Candidate]
    entries_removed: int = 0

    @property
    def is_empty(self) -> bool:
        return not self.writes and not self.deletes


def list_candidates(docs: Iterable[Document]) -> list[Candidate]:
    """Every entry of every document, in scan order (spec §11.1)."""
    candidates: list[Candidate] = []
    for doc in docs:
        entries = parse_entries(doc.body)
        for index, entry in enumerate(entries):
            cid = doc.relative_path if len(entries) == 1 else f"{doc.relative_path}:{index}"
            candidates.append(Candidate(cid, doc.type, doc.relative_path, index, entry))
    return candidates


def select_heuristic(
    candidates: Sequence[Candidate], query: str, limit: int | None = DEFAULT_LIMIT
) -> list[Candidate]:
    """Candidates whose entry search text contains the normalised query (spec §11.2)."""
    needle = normalize_space(query).lower()
    if not needle:
        return []
    matches = [c for c in candidates if needle in entry_search_text(c.entry)]
    return matches if limit is None else matches[: max(limit, 0)]


def select_by_ids(candidates: Sequence[Candidate], ids: Iterable[str]) -> list[Candidate]:
    """The candidates named by ``ids``, in candidate order; any unknown id is an error."""
    known = {c.id: c for c in candidates}
    wanted = list(dict.fromkeys(ids))
    unknown = [cid for cid in wanted if cid not in known]
    if unknown:
        raise _unknown_id_error(unknown[0], list(known))
    chosen = set(wanted)
    return [c for c in candidates if c.id in chosen]


def _unknown_id_error(cid: str, known: list[str]) -> UnknownMemoryId:
    closest = closest_ids(cid, known)
    if closest:
        hint = "closest known ids: " + ", ".join(closest)
    else:
        hint = "list the ids with `qmem-git forget QUERY --dry-run`"
    return UnknownMemoryId(f"unknown memory id {cid!r}", hint)


def closest_ids(cid: str, known: Sequence[str], count: int = 3) -> list[str]:
    """Entries of the named file first (a bare path of a multi-entry file), then look-alikes."""
    same_file = [k for k in known if k.startswith(cid + ":")]
    similar = difflib.get_close_matches(cid, known, n=count, cutoff=0.5)
    return list(dict.fromkeys([*same_file, *similar]))[:count]


def forget_message(count: int, touched: Sequence[str]) -> str | None:
    """``Managed auto-memory forgot 2 entries from: user/, project/`` (spec §11.3)."""
    if count <= 0:
        return None
    noun = "entry" if count == 1 else "entries"
    folders = ", ".join(f"{kind}/" for kind in touched)
    return f"Managed auto-memory forgot {count} {noun} from: {folders}"


def plan_forget(
    docs: Sequence[Document], matches: Sequence[Candidate], read_text: ReadText
) -> ForgetPlan:
    """Plan removing ``matches`` (spec §11.3); files are visited in ``docs`` (scan) order."""
    writes: dict[str, str] = {}
    deletes: list[str] = []
    removed: list[Candidate] = []
    entries_removed = 0
    for rel, file_matches in _group_by_file(docs, matches):
        text = read_text(rel)
        if text is None:
            continue  # spec §11.3: per-file errors (file already gone) are ignored
        new_text, count = _forget_in_file(text, file_matches)
        if count <= 0:
            continue
        if new_text is None:
            deletes.append(rel)
        else:
            writes[rel] = new_text
        entries_removed += count
        removed += file_matches[:count]
    touched = list(dict.fromkeys(c.type for c in removed))
    return ForgetPlan(
        writes=writes,
        deletes=deletes,
        removed_count=len(removed),
        touched_topics=touched,
        system_message=forget_message(len(removed), touched),
        removed=removed,
        entries_removed=entries_removed,
    )


def _group_by_file(
    docs: Sequence[Document], matches: Sequence[Candidate]
) -> list[tuple[str, list[Candidate]]]:
    groups: dict[str, list[Candidate]] = {doc.relative_path: [] for doc in docs}
    for match in matches:
        groups.setdefault(match.relative_path, []).append(match)
    return [(rel, found) for rel, found in groups.items() if found]


def _forget_in_file(text: str, matches: Sequence[Candidate]) -> tuple[str | None, int]:
    """New text (None = delete the file) and how many entries went."""
    split = split_frontmatter(text)
    if split is None:
        return None, len(matches)
    entries = parse_entries(split.body.strip())
    doomed = {m.summary.lower() for m in matches}
    kept = [entry for entry in entries if entry.summary.lower() not in doomed]
    count = len(entries) - len(kept)
    if not kept:
        return None, count
    return render_with_frontmatter(split.frontmatter, render_entries(kept)), count
