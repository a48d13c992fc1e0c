"""Dream's mechanical pass (spec §8.4) as pure planning: scanned documents in, file edits out.

The pass runs over documents in scan order (newest first), so the most recently modified copy of
a duplicated memory is the one that survives.

Two deliberate deviations from the upstream source, both invisible for ordinary one-entry files
(and so for the conformance items 57-59):

- Cross-file merges keep every entry. Upstream renders the canonical file as its merged first
  entry only and deletes the later file, which silently drops the other entries of legacy
  multi-entry files; here the canonical file keeps its other entries and gains the later file's.
  Upstream also merges with the canonical's entry *as originally scanned*; here merges accumulate,
  so details folded in from an earlier duplicate are not lost to a later one (spec §15.3).
- A body is only rewritten when its rendering parses back to the same entries. A summary such as
  ``Why: x`` (from a ``- Why: x`` bullet) would otherwise be re-read as a detail line and vanish
  on the next pass; such files are left for a human instead.

Bodies are replaced *after* the frontmatter: extraction writes the summary as the description
too, so the first literal occurrence of the body (spec §4.4) is often inside the frontmatter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from qmem_git.core.codec import replace_body
from qmem_git.core.entries import merge_entries, parse_entries, render_entries
from qmem_git.core.index import scan_order_key
from qmem_git.core.model import Document, Entry, MemoryType

ReadText = Callable[[str], "str | None"]
"""Text of a memory file by relative path, or None when it cannot be read."""

DREAM_MESSAGE_PREFIX = "Managed auto-memory dream updated: "


@dataclass(frozen=True)
class DreamPlan:
    """What the mechanical pass would change; ``writes`` maps relative path to full file text."""

    writes: dict[str, str]
    deletes: list[str]
    touched_topics: list[MemoryType]
    deduped_entries: int
    system_message: str | None

    @property
    def is_empty(self) -> bool:
        return not self.writes and not self.deletes


def dedupe_entries(entries: Sequence[Entry]) -> list[Entry]:
    """Fold case-insensitive duplicate summaries, then sort by summary (spec §8.4 step 1).

    Later duplicates are folded in as *incoming*, so the latest spelling of the summary wins
    while the earliest why/how-to-apply is kept.
    """
    groups: dict[str, Entry] = {}
    for entry in entries:
        key = entry.summary.lower()
        groups[key] = merge_entries(groups[key], entry) if key in groups else entry
    return sorted(groups.values(), key=lambda entry: (entry.summary.casefold(), entry.summary))


def render_faithfully(entries: Sequence[Entry]) -> str | None:
    """Rendered body, or None when it would not parse back to the same entries."""
    body = render_entries(list(entries))
    return body if parse_entries(body) == list(entries) else None


def dream_message(touched: Sequence[str]) -> str | None:
    """``Managed auto-memory dream updated: user.md, project.md``; None when nothing changed."""
    if not touched:
        return None
    return DREAM_MESSAGE_PREFIX + ", ".join(f"{kind}.md" for kind in touched)


def plan_dream(docs: Sequence[Document], read_text: ReadText) -> DreamPlan:
    """Plan the in-file and cross-file dedupe over ``docs`` (spec §8.4 steps 1-2)."""
    state = _Pass(read_text)
    for doc in sorted(docs, key=scan_order_key):
        state.visit(doc)
    return DreamPlan(
        writes=dict(state.writes),
        deletes=list(state.deletes),
        touched_topics=list(state.touched),
        deduped_entries=state.deduped,
        system_message=dream_message(state.touched),
    )


@dataclass
class _Canonical:
    """The surviving document for a ``type:summary`` key, as it stands after this pass."""

    relative_path: str
    body: str
    entries: list[Entry]


@dataclass
class _Pass:
    """Mutable bookkeeping of one planning pass; ``texts`` caches each file's current text."""

    read_text: ReadText
    texts: dict[str, str | None] = field(default_factory=dict)
    writes: dict[str, str] = field(default_factory=dict)
    deletes: list[str] = field(default_factory=list)
    touched: list[MemoryType] = field(default_factory=list)
    deduped: int = 0
    canonical: dict[str, _Canonical] = field(default_factory=dict)

    def visit(self, doc: Document) -> None:
        if self.current_text(doc.relative_path) is None:
            return
        original = parse_entries(doc.body)
        merged = dedupe_entries(original)
        body = render_faithfully(merged)
        if body is None:
            return
        self.deduped += len(original) - len(merged)
        if body != doc.body:
            self.rewrite(doc.relative_path, doc.type, doc.body, body)
        if merged:
            self.fold_across_files(doc, body, merged)

    def fold_across_files(self, doc: Document, body: str, entries: list[Entry]) -> None:
        key = f"{doc.type}:{entries[0].summary.lower()}"
        canon = self.canonical.get(key)
        if canon is None:
            self.canonical[key] = _Canonical(doc.relative_path, body, entries)
            return
        first = merge_entries(canon.entries[0], entries[0])
        combined = dedupe_entries([first, *canon.entries[1:], *entries[1:]])
        # entries that each render faithfully still do together: rendering is per entry
        new_body = render_entries(combined)
        if new_body != canon.body:
            self.rewrite(canon.relative_path, doc.type, canon.body, new_body)
        self.delete(doc.relative_path, doc.type)
        self.deduped += len(canon.entries) + len(entries) - len(combined)
        self.canonical[key] = _Canonical(canon.relative_path, new_body, combined)

    def current_text(self, rel: str) -> str | None:
        if rel not in self.texts:
            self.texts[rel] = self.read_text(rel)
        return self.texts[rel]

    def rewrite(self, rel: str, kind: MemoryType, old_body: str, new_body: str) -> None:
        text = self.current_text(rel)
        if text is None:
            return
        new_text = replace_body(text, old_body, new_body)
        if new_text != text:
            self.texts[rel] = self.writes[rel] = new_text
            self.touch(kind)

    def delete(self, rel: str, kind: MemoryType) -> None:
        self.writes.pop(rel, None)
        self.texts[rel] = None
        self.deletes.append(rel)
        self.touch(kind)

    def touch(self, kind: MemoryType) -> None:
        if kind not in self.touched:
            self.touched.append(kind)
