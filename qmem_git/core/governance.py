"""Advisory governance review of memory entries (spec §12): suggestions, never changes."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from qmem_git.core.entries import parse_entries
from qmem_git.core.model import Document, Entry
from qmem_git.core.planner import topic_of

MAX_SUGGESTIONS = 20

_FORGET = re.compile(r"\b(temporary|for this task|this session|currently)\b", re.I)
_OUTDATED = re.compile(r"\b(deprecated|obsolete|sunset|legacy|old)\b", re.I)
_ALWAYS = re.compile(r"\balways\b", re.I)
_NEVER = re.compile(r"\bnever\b", re.I)
_BRIEF = re.compile(r"\b(terse|concise)\b", re.I)
_DETAILED = re.compile(r"\bdetailed\b", re.I)


@dataclass(frozen=True)
class Suggestion:
    """``kind``: duplicate, migrate, forget, outdated, promote or conflict."""

    kind: str
    entry_id: str
    reason: str


@dataclass(frozen=True)
class Review:
    suggestions: tuple[Suggestion, ...]

    @property
    def strategy(self) -> str:
        return "heuristic" if self.suggestions else "none"


def entry_id(kind: str, entry: Entry) -> str:
    return f"{kind}:{entry.summary}"


def review_entries(entries: Iterable[tuple[str, Entry]]) -> Review:
    """Suggestions in the spec's order (duplicates, per-entry checks, conflicts), at most 20.

    ``entries`` are ``(type, entry)`` pairs in reading order. ``promote`` fires when why or
    how-to-apply is missing (the G1 ``stability`` field is not kept by the G2 format).
    """
    items = list(entries)
    found = [*_duplicates(items)]
    for kind, entry in items:
        found += _per_entry(kind, entry)
    found += _conflicts(items)
    return Review(tuple(found[:MAX_SUGGESTIONS]))


def _duplicates(items: list[tuple[str, Entry]]) -> Iterable[Suggestion]:
    seen: set[str] = set()
    for kind, entry in items:
        key = entry.summary.lower()
        if key in seen:
            yield Suggestion("duplicate", entry_id(kind, entry), "same summary as an earlier entry")
        seen.add(key)


def _per_entry(kind: str, entry: Entry) -> list[Suggestion]:
    ident = entry_id(kind, entry)
    found = []
    topic = topic_of(entry.summary)
    if topic is not None and topic != kind:
        found.append(Suggestion("migrate", ident, f"reads like a {topic} memory"))
    if _FORGET.search(entry.summary):
        found.append(Suggestion("forget", ident, "describes temporary state"))
    if _OUTDATED.search(entry.summary):
        found.append(Suggestion("outdated", ident, "mentions something deprecated or old"))
    if not entry.why or not entry.how_to_apply:
        found.append(Suggestion("promote", ident, "add Why: and How to apply: lines"))
    return found


def _conflicts(items: list[tuple[str, Entry]]) -> Iterable[Suggestion]:
    for i, (kind, first) in enumerate(items):
        for other_kind, second in items[i + 1 :]:
            if other_kind == kind and _contradict(first.summary, second.summary):
                yield Suggestion(
                    "conflict", entry_id(kind, second), f"contradicts {entry_id(kind, first)!r}"
                )


def _contradict(a: str, b: str) -> bool:
    def opposite(x: re.Pattern[str], y: re.Pattern[str]) -> bool:
        return bool((x.search(a) and y.search(b)) or (y.search(a) and x.search(b)))

    return opposite(_ALWAYS, _NEVER) or opposite(_BRIEF, _DETAILED)


def document_entries(docs: Iterable[Document]) -> list[tuple[str, Entry]]:
    """``(type, entry)`` pairs of every scanned document, in scan order."""
    return [(doc.type, entry) for doc in docs for entry in parse_entries(doc.body)]
