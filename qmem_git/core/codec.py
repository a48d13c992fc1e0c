"""Memory documents: parse and render the frontmatter + body format (spec §4.1, §4.2, §4.4).

This is the lenient line-based reader that Qwen Code itself uses; the strict YAML check lives
in :mod:`qmem_git.core.validate`.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from qmem_git.core import frontmatter
from qmem_git.core.model import Document, MemoryType

FENCE = frontmatter.FENCE


class Split(NamedTuple):
    """A document split at its frontmatter fences; ``body`` is the raw (untrimmed) body."""

    frontmatter: str
    body: str
    body_start_line: int


def split_frontmatter(text: str) -> Split | None:
    """Split ``---\n<fm>\n---[\n]<body>``; None when the text is not fenced (spec §4.2 step 2)."""
    parts = frontmatter.split(text)
    return Split(*parts) if parts is not None else None


def frontmatter_field(text: str, key: str) -> str | None:
    """First line starting with ``key:`` (column 0); value trimmed, quotes kept, empty = absent."""
    return frontmatter.field(text, key)


def parse_document(text: str, relative_path: str, mtime_ms: float) -> Document | None:
    """Parse a memory document, or None when the text is not one (spec §4.2)."""
    fields = frontmatter.parse_fields(text)
    return None if fields is None else document_from_fields(fields, relative_path, mtime_ms)


def document_from_fields(
    fields: frontmatter.Fields, relative_path: str, mtime_ms: float
) -> Document:
    """The document of a file whose fields :func:`frontmatter.parse_fields` read."""
    kind, title, description, body, front = fields
    return Document(
        type=_as_type(kind),
        relative_path=relative_path,
        title=title,
        description=description,
        body=body,
        mtime_ms=mtime_ms,
        frontmatter=front,
    )


def _as_type(kind: str) -> MemoryType:
    if kind == "user":
        return "user"
    if kind == "feedback":
        return "feedback"
    if kind == "project":
        return "project"
    return "reference"


def render_document(name: str, description: str, kind: MemoryType, body: str) -> str:
    """The file a new memory is written as (spec §7.7), ending with one newline."""
    name, description = frontmatter_value(name), frontmatter_value(description)
    return f"---\nname: {name}\ndescription: {description}\ntype: {kind}\n---\n\n{body}\n"


_YAML_INDICATORS = "!&#|>'\"%@`[]{}"
_SUSPECT_START = frozenset(_YAML_INDICATORS + "*-?:,~")
_NOT_PLAIN = re.compile(r"[^\w\s.;:()/+=-]")  # the last resort keeps words and plain marks


def frontmatter_value(text: str) -> str:
    """``text`` as written after ``key: ``: verbatim (spec §7.7), on one line, unless YAML would
    misread it so badly that ``validate`` reports an error.

    Values like ``Deploy rule: use ArgoCD`` stay as they are (YAML tools cannot load them, Qwen
    Code reads them: a warning). A value YAML reads as a tag, an anchor, an empty or null value
    or a collection (``!!python/...``, ``&a``, ``# x``, ``> # x``, ``~ # x``, ``[a, b]``) loses
    its leading indicator characters, then its ``#`` if that is still not enough. Only values
    that start with a YAML indicator (or hold `` #``) are checked, so ordinary text costs no
    YAML import.
    """
    value = " ".join(text.split())
    if value and value[0] not in _SUSPECT_START and " #" not in value:
        return value
    from qmem_git.core.validate import frontmatter_value_errors  # yaml, for rare values only

    if not value:
        return value
    stripped = value.lstrip(_YAML_INDICATORS + " ")
    candidates = (
        value,
        stripped,
        " ".join(stripped.replace("#", " ").split()),
        " ".join(_NOT_PLAIN.sub(" ", value).split()),  # flow collections holding tags, ...
    )
    for candidate in candidates:
        if candidate and not frontmatter_value_errors(candidate):
            return candidate
    return "memory"


def render_with_frontmatter(frontmatter: str, body: str) -> str:
    """Rewrite a file keeping its frontmatter text verbatim (spec §11.3)."""
    return f"---\n{frontmatter}\n---\n\n{body}\n"


def replace_body(text: str, old_body: str, new_body: str) -> str:
    """Replace the first literal occurrence of the trimmed old body *in the body* (spec §4.4).

    Qwen Code searches the whole file, which hits the ``name:``/``description:`` lines when
    they repeat the summary (they usually do); searching after the closing fence avoids that.
    """
    text = text.replace("\r\n", "\n")
    split = split_frontmatter(text)
    if split is None:
        return text
    start = len(text) - len(split.body)
    old = old_body.strip()
    if not old:
        return render_with_frontmatter(split.frontmatter, new_body)
    index = text.find(old, start)
    if index < 0:
        return text
    return text[:index] + new_body + text[index + len(old) :]
