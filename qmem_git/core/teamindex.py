"""The team tier's MEMORY.md (``<git root>/.qwen/team-memory``), byte for byte as Qwen Code
0.24.4's ``rebuildTeamAutoMemoryIndex`` writes it: memories sorted by path (not by age, so
every clone of the project writes the same index), and memories with the same description
(compared case-insensitively, whitespace collapsed, closing punctuation ignored) on one line,
the first one's, with ``(also: <path>, …)``."""

from __future__ import annotations

import re

from qmem_git.core.frontmatter import JS_SPACE
from qmem_git.core.index import (
    IndexResult,
    assemble_index,
    encode_target,
    raw_index_line_js,
    truncate_line_js,
    utf16_key,
)
from qmem_git.core.model import MAX_SCANNED_DOCUMENTS, Document

_SPACE_RUN = re.compile(f"[{re.escape(JS_SPACE)}]+")
_TRAILING_PUNCTUATION = re.compile("[.,;:!?)\\]}'\"`]+$")


def normalize_description(description: str) -> str:
    """Qwen's ``normalizeDescription``: the key that groups equal descriptions."""
    text = _SPACE_RUN.sub(" ", description.lower()).strip(JS_SPACE)
    return _TRAILING_PUNCTUATION.sub("", text).strip(JS_SPACE)


def team_order(docs: list[Document]) -> tuple[list[Document], list[Document]]:
    """Qwen's team scan: by relative path (JavaScript ``<``: UTF-16 code units); (the first
    200, which are listed, and the rest, which Qwen's scan leaves out)."""
    ordered = sorted(docs, key=lambda doc: utf16_key(doc.relative_path))
    return ordered[:MAX_SCANNED_DOCUMENTS], ordered[MAX_SCANNED_DOCUMENTS:]


def group_by_description(docs: list[Document]) -> list[list[Document]]:
    """Memories with the same normalised description, in first-seen order; an empty one
    groups with nothing."""
    groups: dict[str, list[Document]] = {}
    for doc in docs:
        norm = normalize_description(doc.description)
        key = f"d:{norm}" if norm else f"u:{doc.relative_path}"
        groups.setdefault(key, []).append(doc)
    return list(groups.values())


def _group_line_js(group: list[Document]) -> str:
    line = raw_index_line_js(group[0])
    if len(group) > 1:
        line += " (also: " + ", ".join(encode_target(d.relative_path) for d in group[1:]) + ")"
    return truncate_line_js(line)


def build_team_index(docs: list[Document]) -> IndexResult:
    """The team MEMORY.md for every valid memory of the team folder (any order); ``dropped``
    names the memories it does not list."""
    listed, unlisted = team_order(docs)
    groups = group_by_description(listed)
    paths = [tuple(doc.relative_path for doc in group) for group in groups]
    result = assemble_index([_group_line_js(group) for group in groups], paths)
    return IndexResult(result.text, result.dropped + tuple(d.relative_path for d in unlisted))
