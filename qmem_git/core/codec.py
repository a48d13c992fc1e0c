"""Memory documents: parse and render the frontmatter + body format (spec §4.1, §4.2, §4.4).

This is the lenient line-based reader that Qwen Code itself uses; the strict YAML check lives
in :mod:`qmem_git.core.validate`.
"""

from __future__ import annotations

from dataclasses import dataclass

from qmem_git.core import frontmatter
from qmem_git.core.model import Document, MemoryType

FENCE = frontmatter.FENCE


@dataclass(frozen=True)
class Split:
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
    if fields is None:
        return None
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


def frontmatter_value(text: str) -> str:
    """``text`` as written after ``key: `` (spec §7.7: verbatim), minus leading YAML indicators.

    A value starting with one of ``!&#|>'"%@`[]{}`` is a tag, an anchor, a comment, a block or
    quoted scalar or a collection to YAML: an empty, multi-line or non-text value, or one that
    ``validate`` (and so every other machine's ``sync``) refuses. Dropping those characters is
    the only change; anything YAML merely cannot parse (``a: b``) is left for the line-based
    reader Qwen Code uses. One line, as that reader needs.
    """
    value = " ".join(text.split())
    stripped = value.lstrip(_YAML_INDICATORS + " ")
    if stripped.split(" #", 1)[0].lower() in ("~", "null"):  # YAML: null, then a comment
        stripped = " ".join(stripped.replace("#", " ").split())
    return stripped if stripped else value


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
