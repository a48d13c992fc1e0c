"""MEMORY.md generation with the spec's hard limits (spec §5 ordering, §6 index)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from qmem_git.core.model import MAX_SCANNED_DOCUMENTS, Document
from qmem_git.core.text import clip

MAX_LINE_CHARS = 150
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


def index_line(doc: Document) -> str:
    line = f"- [{doc.title}]({doc.relative_path}) — {doc.description or doc.type}"
    return clip(line, MAX_LINE_CHARS)


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
