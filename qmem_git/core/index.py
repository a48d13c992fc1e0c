"""MEMORY.md generation with the spec's hard limits (spec §5 ordering, §6 index)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from qmem_git.core.model import MAX_SCANNED_DOCUMENTS, Document
from qmem_git.core.text import clip

MAX_LINE_CHARS = 150
MAX_FIELD_UNITS = 120  # a title or description, in UTF-16 code units (JavaScript's .length)
MAX_LINES = 200
MAX_BYTES = 25_000
WARNING = (
    "> WARNING: MEMORY.md is too large; only part of it was written. "
    "Keep index entries concise and move detail into topic files."
)


class IndexResult(NamedTuple):
    """The MEMORY.md text and the relative paths whose lines the limits dropped."""

    text: str
    dropped: tuple[str, ...] = ()


def index_is_current(text: str | None, expected: IndexResult) -> bool:
    """True when MEMORY.md's ``text`` is the rebuilt index ``expected``.

    One trailing newline (added by editors and end-of-file fixers) is tolerated: Qwen Code trims
    the index before loading it (spec §6.1). ``validate``, ``index --check``, ``doctor`` and the
    ``qmem-index`` pre-commit hook all decide with this one rule.
    """
    return text is not None and text in (expected.text, expected.text + "\n")


def scan_order_key(doc: Document) -> tuple[float, str, str]:
    """Newest first; ties by basename, then relative path (spec §5, ARCHITECTURE §3)."""
    return (-doc.mtime_ms, doc.filename, doc.relative_path)


def order_documents(docs: Iterable[Document], limit: int = MAX_SCANNED_DOCUMENTS) -> list[Document]:
    return sorted(docs, key=scan_order_key)[:limit]


# Qwen Code 0.24's sanitizeIndexField (qwen-0.24-delta.md, "MEMORY.md"): a field of a memory
# file must not forge structure in the index every session loads into its prompt
_FIELD_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # C0/C1 controls -> a space
_FIELD_HIDDEN = re.compile("[\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")  # removed
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # half a character: not writable, removed
_SPACE_RUN = re.compile(r"\s+")


def sanitize_field(value: str) -> str:
    """A title or description as the index shows it, as Qwen Code 0.24 writes it: control
    characters become spaces; zero-width and bidi controls go; a backtick becomes ``'`` and
    ``](`` becomes ``] (`` (no code span, no live link); whitespace runs become one space;
    trimmed; cut to 120 UTF-16 code units ending in ``…``."""
    text = _FIELD_CONTROL.sub(" ", value)
    text = _LONE_SURROGATE.sub("", _FIELD_HIDDEN.sub("", text))
    text = text.replace("`", "'").replace("](", "] (")
    return _cut_field(_SPACE_RUN.sub(" ", text).strip())


def _cut_field(text: str) -> str:
    """``text`` cut to ``MAX_FIELD_UNITS`` UTF-16 code units: 119 and ``…`` when longer (a
    character outside the BMP counts two and is never split)."""
    if len(text) <= MAX_FIELD_UNITS // 2 or _utf16_units(text) <= MAX_FIELD_UNITS:
        return text
    units = 0
    for end, char in enumerate(text):
        units += 2 if ord(char) > 0xFFFF else 1
        if units >= MAX_FIELD_UNITS:  # text[:end] is at most 119 units
            return text[:end].rstrip() + "…"
    return text  # pragma: no cover - longer than the limit, so the loop returned


def _utf16_units(text: str) -> int:
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def index_line(doc: Document) -> str:
    """``- [title](path) — description``, the fields sanitised (an empty one: the type)."""
    title = sanitize_field(doc.title) or doc.type
    description = sanitize_field(doc.description) or doc.type
    return clip(f"- [{title}]({doc.relative_path}) — {description}", MAX_LINE_CHARS)


def build_index(docs: list[Document]) -> IndexResult:
    """Index text for documents already in scan order (spec §6 steps 1-5)."""
    lines = [index_line(doc) for doc in docs]
    kept = lines[:MAX_LINES]
    text = "\n".join(kept)
    encoded = text.encode("utf-8")
    if len(encoded) > MAX_BYTES:
        text = _cut_to_bytes(encoded)
    kept_count = len(text.split("\n")) if text else 0
    if kept_count == len(lines):
        return IndexResult(text)
    dropped = tuple(doc.relative_path for doc in docs[kept_count:])
    return IndexResult(f"{text}\n\n{WARNING}", dropped)


def _cut_to_bytes(encoded: bytes) -> str:
    head = encoded[:MAX_BYTES]
    newline = head.rfind(b"\n")
    if newline >= 0 and encoded[MAX_BYTES : MAX_BYTES + 1] != b"\n":
        return head[:newline].decode("utf-8")
    if newline < 0:
        return head.decode("utf-8", errors="ignore")
    return head.decode("utf-8")


def drop_index_lines(text: str, paths: Iterable[str], *, secrets: bool = False) -> str:
    """``text`` (a MEMORY.md) without the lines that link to one of ``paths`` and, with
    ``secrets``, without the lines holding a credential: what ``purge`` does to the index of a
    commit it rewrites (the files it describes are gone from that commit)."""
    from qmem_git.core.secrets import scan_for_secrets

    links = tuple(f"]({path})" for path in paths)
    kept = [
        line
        for line in text.split("\n")
        if not (links and any(link in line for link in links))
        and not (secrets and scan_for_secrets(line))
    ]
    return "\n".join(kept)
