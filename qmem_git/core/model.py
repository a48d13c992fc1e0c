"""The memory data model shared by every layer (spec §1, §4)."""

from __future__ import annotations

from typing import Literal, NamedTuple, get_args

from qmem_git.core.limits import INDEX_NAME, MAX_FILE_BYTES, MAX_SCANNED_DOCUMENTS

MemoryType = Literal["user", "feedback", "project", "reference"]
MEMORY_TYPES: tuple[MemoryType, ...] = get_args(MemoryType)

__all__ = [
    "INDEX_NAME",
    "MAX_FILE_BYTES",
    "MAX_SCANNED_DOCUMENTS",
    "MEMORY_TYPES",
    "Document",
    "Entry",
    "MemoryType",
    "is_memory_type",
]


def is_memory_type(value: str) -> bool:
    return value in MEMORY_TYPES


class Entry(NamedTuple):
    """One memory entry inside a body (spec §4.3)."""

    summary: str
    why: str | None = None
    how_to_apply: str | None = None


class Document(NamedTuple):
    """A parsed memory document (spec §4.2). ``frontmatter`` is the raw text between the fences."""

    type: MemoryType
    relative_path: str
    title: str
    description: str
    body: str
    mtime_ms: float
    frontmatter: str = ""

    @property
    def filename(self) -> str:
        return self.relative_path.rsplit("/", 1)[-1]
