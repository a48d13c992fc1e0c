"""The memory data model shared by every layer (spec §1, §4)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

MemoryType = Literal["user", "feedback", "project", "reference"]
MEMORY_TYPES: tuple[MemoryType, ...] = get_args(MemoryType)

INDEX_NAME = "MEMORY.md"
MAX_SCANNED_DOCUMENTS = 200
MAX_FILE_BYTES = 256 * 1024


def is_memory_type(value: str) -> bool:
    return value in MEMORY_TYPES


@dataclass(frozen=True)
class Entry:
    """One memory entry inside a body (spec §4.3)."""

    summary: str
    why: str | None = None
    how_to_apply: str | None = None


@dataclass(frozen=True)
class Document:
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
