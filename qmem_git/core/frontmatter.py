"""The lenient, line-based frontmatter reader Qwen Code uses (spec §4.2), on plain tuples.

``core.codec`` builds ``Document`` values on top of this; the per-prompt recall cache uses it
directly, which keeps ``dataclasses`` and ``re`` off the hook's import path.
"""

from __future__ import annotations

from qmem_git.core.limits import TYPE_NAMES

FENCE = "---\n"

TYPE_CHECKING = False
if TYPE_CHECKING:
    # (type, title, description, trimmed body, frontmatter text) of a memory document
    Fields = tuple[str, str, str, str, str]


def split(text: str) -> tuple[str, str, int] | None:
    """``(frontmatter, raw body, body start line)`` of ``---\\n<fm>\\n---[\\n]<body>``, or None.

    CRLF is read as LF; an empty frontmatter or a missing closing fence is not a document.
    """
    text = text.replace("\r\n", "\n")
    if not text.startswith(FENCE):
        return None
    end = text.find("\n---", len(FENCE) - 1)
    if end < 0:
        return None
    frontmatter = text[len(FENCE) : end]
    if not frontmatter.strip():
        return None
    rest = end + len("\n---")
    if text.startswith("\n", rest):
        rest += 1
    return frontmatter, text[rest:], text.count("\n", 0, rest) + 1


def field(frontmatter: str, key: str) -> str | None:
    """First line starting with ``key:`` (column 0); value trimmed, quotes kept, empty = absent."""
    prefix = key + ":"
    for line in frontmatter.split("\n"):
        if line.startswith(prefix):
            return line[len(prefix) :].strip() or None
    return None


def parse_fields(text: str | None) -> Fields | None:
    """The fields of a memory document (spec §4.2 steps 1-6), or None when it is not one."""
    if text is None:
        return None
    parts = split(text)
    if parts is None:
        return None
    frontmatter, body, _ = parts
    kind = field(frontmatter, "type")
    if kind is None or kind not in TYPE_NAMES:
        return None
    title = field(frontmatter, "name") or field(frontmatter, "title") or kind
    return (kind, title, field(frontmatter, "description") or "", body.strip(), frontmatter)
