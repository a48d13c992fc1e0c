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
    end = text.find("\n---", len(FENCE))  # Qwen: ^---\n([\s\S]*?)\n---\n?
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


def parse_fields(text: str | None, *, nested_type: bool = False) -> Fields | None:
    """The fields of a memory document (spec §4.2 steps 1-6), or None when it is not one.

    ``nested_type``: Claude Code's shape, ``type:`` under ``metadata:``, counts too (its own
    auto-memory folder); Qwen Code reads only a top-level ``type:``."""
    if text is None:
        return None
    parts = split(text)
    if parts is None:
        return None
    frontmatter, body, _ = parts
    kind = qwen_field(frontmatter, "type")
    if kind is None and nested_type:
        kind = metadata_type(frontmatter)
    if kind is None or kind not in TYPE_NAMES:
        return None
    title = qwen_field(frontmatter, "name")
    if title is None:  # name ?? title ?? type: an empty name: is a name
        title = qwen_field(frontmatter, "title")
    description = qwen_field(frontmatter, "description") or ""
    return (kind, title or kind, description, body.strip(), frontmatter)


def metadata_type(frontmatter: str) -> str | None:
    """``type:`` indented under a ``metadata:`` line (Claude Code 2.1's memories), or None."""
    nested = False
    for line in frontmatter.split("\n"):
        if not line.startswith((" ", "\t")):
            nested = line.rstrip() == "metadata:"
            continue
        key, _, value = line.strip().partition(":")
        if nested and key == "type":
            return value.strip()
    return None


# JavaScript's line terminators (where ^ and $ match in a multiline regex, and . does not)
_JS_TERMINATORS = "\n\r\u2028\u2029"
# JavaScript's \s and String.prototype.trim's set
JS_SPACE = "\t\n\v\f\r \u00a0\u1680" + "".join(map(chr, range(0x2000, 0x200B)))
JS_SPACE += "\u2028\u2029\u202f\u205f\u3000\ufeff"
_GAP = JS_SPACE.replace("\n", "")  # [^\S\n]


def qwen_field(frontmatter: str, key: str) -> str | None:
    r"""Qwen Code 0.24.4's ``parseFrontmatterValue``: the first match of
    ``^key:[^\S\n]*(.+)$`` (multiline), trimmed; ``""`` for a value of blanks, None when no
    line matches (a bare ``key:`` line does not: the next one is tried)."""
    prefix = key + ":"
    start = frontmatter.find(prefix)
    while start >= 0:
        if start == 0 or frontmatter[start - 1] in _JS_TERMINATORS:
            value = _line_value(frontmatter, start + len(prefix))
            if value is not None:
                return value.strip(JS_SPACE)
        start = frontmatter.find(prefix, start + 1)
    return None


def _line_value(text: str, start: int) -> str | None:
    r"""``[^\S\n]*(.+)$`` at ``start``, with the regex's backtracking: group 1, or None."""
    gap_end = start
    while gap_end < len(text) and text[gap_end] in _GAP:
        gap_end += 1
    for begin in range(gap_end, start - 1, -1):
        if begin < len(text) and text[begin] not in _JS_TERMINATORS:
            end = begin
            while end < len(text) and text[end] not in _JS_TERMINATORS:
                end += 1
            return text[begin:end]
    return None
