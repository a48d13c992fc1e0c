"""Entries inside a memory body: parse, render, merge (spec §4.3)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from qmem_git.core.codec import parse_document
from qmem_git.core.model import MEMORY_TYPES, Entry
from qmem_git.core.text import normalize_space

EMPTY_BODY = "_No entries yet._"

# G1 files also carry a nested ``  - Stability: stable|working`` line; it is accepted (so it does
# not become an entry of its own) and its value ignored (spec §4.3).
_NESTED = re.compile(
    r"^[ \t]{2,}(?:[-*]\s+)?(why|how to apply|how_to_apply|stability):\s*(\S.*)$", re.I
)
_DETAIL = re.compile(r"^(?:\*\*)?(why|how to apply|how_to_apply)(?:\*\*:|:\*\*|:)\s*(\S.*)$", re.I)
_BULLET = re.compile(r"^[-*]\s+(.*)$")


def parse_entries(body: str) -> list[Entry]:
    """Parse a body into entries; headings, blanks and ``_No entries yet._`` produce nothing."""
    entries: list[Entry] = []
    current: Entry | None = None
    for raw in body.replace("\r\n", "\n").split("\n"):
        line = raw.strip()
        if not line or line == EMPTY_BODY or line.startswith("# "):
            continue
        detail = (current is not None and _NESTED.match(raw)) or _DETAIL.match(line)
        if detail:
            if current is not None:
                current = _with_detail(current, detail.group(1), detail.group(2))
            continue
        if current is not None:
            entries.append(current)
        bullet = _BULLET.match(line)
        current = Entry(normalize_space(bullet.group(1) if bullet else line))
    if current is not None:
        entries.append(current)
    return [entry for entry in entries if entry.summary]


def _with_detail(entry: Entry, key: str, value: str) -> Entry:
    value = normalize_space(value)
    if key.lower() == "stability":
        return entry
    if key.lower() == "why":
        return Entry(entry.summary, value, entry.how_to_apply)
    return Entry(entry.summary, entry.why, value)


def render_entries(entries: list[Entry]) -> str:
    """Render entries as plain per-entry paragraphs; no trailing newline."""
    if not entries:
        return EMPTY_BODY
    blocks = []
    for entry in entries:
        lines = [entry.summary]
        if entry.why:
            lines += ["", f"Why: {entry.why}"]
        if entry.how_to_apply:
            lines += ["", f"How to apply: {entry.how_to_apply}"]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def merge_entries(current: Entry, incoming: Entry) -> Entry:
    """Incoming summary wins; existing why/how are kept, missing ones filled."""
    return Entry(
        summary=incoming.summary or current.summary,
        why=current.why or incoming.why,
        how_to_apply=current.how_to_apply or incoming.how_to_apply,
    )


def entry_search_text(entry: Entry) -> str:
    parts = [entry.summary, entry.why, entry.how_to_apply]
    return " ".join(part for part in parts if part).lower()


def body_heading(body: str) -> str:
    for line in body.split("\n"):
        if line.strip().startswith("# "):
            return line.strip()
    return "# Memory"


# -- entry accounting shared by undo, restore and snapshot -----------------------------------


def entries_of(path: str, text: str | None) -> list[Entry] | None:
    """Entries of a memory file's text; None when absent or not a memory document."""
    if text is None:
        return None
    doc = parse_document(text, path, 0)
    return None if doc is None else parse_entries(doc.body)


def entry_delta(path: str, before: str | None, after: str | None) -> tuple[int, int]:
    """(added, removed) entries between two versions of one file, keyed by summary."""
    old = {e.summary.lower() for e in entries_of(path, before) or []}
    new = {e.summary.lower() for e in entries_of(path, after) or []}
    return len(new - old), len(old - new)


def memory_type(path: str, *texts: str | None) -> str | None:
    """The file's frontmatter type, else its top folder when that names a memory type."""
    for text in texts:
        doc = parse_document(text, path, 0) if text is not None else None
        if doc is not None:
            return doc.type
    top = path.split("/", 1)[0]
    return top if "/" in path and top in MEMORY_TYPES else None


def topics_of(types: Iterable[str | None]) -> tuple[str, ...]:
    """Distinct memory types in first-seen order (the ``Qmem-Topics`` trailer)."""
    seen: list[str] = []
    for kind in types:
        if kind and kind not in seen:
            seen.append(kind)
    return tuple(seen)
