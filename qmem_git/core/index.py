"""MEMORY.md generation with the spec's hard limits (spec §5 ordering, §6 index)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import NamedTuple, TypeVar

from qmem_git.core.frontmatter import JS_SPACE
from qmem_git.core.model import Document

_T = TypeVar("_T")

MAX_LINE_CHARS = 150
MAX_FIELD_UNITS = 120  # a title or description, in UTF-16 code units (JavaScript's .length)
MAX_LINES = 200
MAX_BYTES = 25_000  # UTF-16 code units (JavaScript's .length), not bytes
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
    """Newest first, then basename and relative path: the coarse order; :func:`qwen_order`
    breaks mtime ties as Qwen Code does."""
    return (-doc.mtime_ms, doc.filename, doc.relative_path)


def qwen_order(items: list[_T], key: Callable[[_T], tuple[float, str]]) -> list[_T]:
    """``items`` (each giving ``(mtime in ms, relative path)``) in Qwen's scan order. The
    collation key is computed only for files that share an mtime."""
    keyed = sorted(((-key(item)[0], utf16_key(key(item)[1]), item) for item in items), key=_head)
    ordered: list[_T] = []
    start = 0
    while start < len(keyed):
        end = start + 1
        while end < len(keyed) and keyed[end][0] == keyed[start][0]:
            end += 1
        group = [entry[2] for entry in keyed[start:end]]
        if len(group) > 1:
            from qmem_git.core.collate import collation_key  # ties only: keeps imports light

            group.sort(key=lambda item: collation_key(key(item)[1].rsplit("/", 1)[-1]))
        ordered += group
        start = end
    return ordered


def warm_up() -> None:
    """Compile and import now what ordering and rendering MEMORY.md need on first use: for a
    writer that would otherwise sit idle while its survey child scans (``store.writer``)."""
    _field_patterns()
    utf16_key("")
    from qmem_git.core import collate  # noqa: F401 - imported for later use


def _head(entry: tuple[float, bytes, object]) -> tuple[float, bytes]:
    return entry[0], entry[1]


def utf16_key(text: str) -> bytes:
    """Sorts as JavaScript compares strings (``<``: UTF-16 code units)."""
    return text.encode("utf-16-be", "surrogatepass")


# Qwen Code 0.24.4's sanitizeIndexField (qwen-0.24-delta.md, "MEMORY.md"): a field of a memory
# file must not forge structure in the index every session loads into its prompt. These run on
# "JavaScript strings" (one Python character per UTF-16 code unit, see :func:`to_js`), so
# lengths, cuts and regexes count as Qwen's do.
class _FieldPatterns(NamedTuple):
    control: re.Pattern[str]  # C0/C1 controls -> a space
    hidden: re.Pattern[str]  # zero-width and bidi controls: removed
    space_run: re.Pattern[str]  # JavaScript's \s, as Qwen's field cleaner uses it
    trim_start: re.Pattern[str]
    trim_end: re.Pattern[str]


_FIELD: list[_FieldPatterns] = []  # compiled on first use: a push or a recall never needs them


def _field_patterns() -> _FieldPatterns:
    if not _FIELD:
        space = re.escape(JS_SPACE)
        _FIELD.append(
            _FieldPatterns(
                re.compile("[\x00-\x1f\x7f-\x9f]"),
                re.compile("[\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]"),
                re.compile(f"[{space}]+"),
                re.compile(f"^[{space}]+"),
                re.compile(f"[{space}]+$"),
            )
        )
    return _FIELD[0]


_PATH_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~-/")


def to_js(text: str) -> str:
    """``text`` as a JavaScript string: a character outside the BMP becomes its two surrogates."""
    if text.isascii() or all(ord(char) <= 0xFFFF for char in text):
        return text
    raw = text.encode("utf-16-le", "surrogatepass")
    return "".join(chr(raw[i] | raw[i + 1] << 8) for i in range(0, len(raw), 2))


def from_js(text: str) -> str:
    """A JavaScript string as Node writes it to UTF-8: pairs joined, a lone surrogate (a
    character cut in half) becomes U+FFFD."""
    if text.isascii() or not any("\ud800" <= char <= "\udfff" for char in text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _plain(value: str) -> bool:
    """A field the cleaner leaves as it is: printable ASCII (no control, zero-width or bidi
    character; its only whitespace the space), no backtick, no ``](``, no run of spaces, no
    space at either end, short enough. Most fields are; they skip the five regexes."""
    return (
        len(value) <= MAX_FIELD_UNITS
        and value.isascii()
        and value.isprintable()
        and "`" not in value
        and "](" not in value
        and "  " not in value
        and value[:1] != " "
        and value[-1:] != " "
    )


def _sanitize_js(value: str) -> str:
    return value if _plain(value) else _clean_js(value)


def _clean_js(value: str) -> str:
    field = _FIELD[0] if _FIELD else _field_patterns()
    text = field.hidden.sub("", field.control.sub(" ", value))
    text = text.replace("`", "'").replace("](", "] (")
    text = field.trim_end.sub("", field.trim_start.sub("", field.space_run.sub(" ", text)))
    if len(text) <= MAX_FIELD_UNITS:
        return text
    return field.trim_end.sub("", text[: MAX_FIELD_UNITS - 1]) + "…"


def sanitize_field(value: str) -> str:
    """A title or description as the index shows it, as Qwen Code 0.24 writes it: control
    characters become spaces; zero-width and bidi controls go; a backtick becomes ``'`` and
    ``](`` becomes ``] (`` (no code span, no live link); whitespace runs become one space;
    trimmed; cut to 119 UTF-16 code units and ``…`` when longer than 120 (a character outside
    the BMP cut in half is written as U+FFFD, as Node writes it)."""
    return from_js(_sanitize_js(to_js(value)))


def encode_target(relative_path: str) -> str:
    """The link target: the path's first 120 characters, each outside ``A-Z a-z 0-9 . _ ~ -``
    and ``/`` percent-encoded as UTF-8 (Qwen's encodeIndexPathTarget)."""
    if _PATH_SAFE.issuperset(relative_path):
        return relative_path[:MAX_FIELD_UNITS]
    out = []
    for char in relative_path[:MAX_FIELD_UNITS]:
        if char in _PATH_SAFE:
            out.append(char)
        else:
            data = char.encode("utf-8", "replace")
            out.append("".join(f"%{byte:02X}" for byte in data))
    return "".join(out)


def raw_index_line_js(doc: Document) -> str:
    """``- [title](path) — description`` as a JavaScript string, before the 150-unit cut."""
    title = _sanitize_js(to_js(doc.title)) or doc.type
    description = _sanitize_js(to_js(doc.description)) or doc.type
    return f"- [{title}]({encode_target(doc.relative_path)}) — {description}"


def truncate_line_js(line: str) -> str:
    """Qwen's ``truncateIndexLine``: over 150 UTF-16 code units, cut to 149 and ``…``."""
    if len(line) <= MAX_LINE_CHARS:
        return line
    return _field_patterns().trim_end.sub("", line[: MAX_LINE_CHARS - 1]) + "…"


def _index_line_js(doc: Document) -> str:
    return truncate_line_js(raw_index_line_js(doc))


def index_line(doc: Document) -> str:
    """``- [title](path) — description``: fields sanitised (an empty one: the type), the path
    percent-encoded, the line cut to 150 UTF-16 code units."""
    return from_js(_index_line_js(doc))


def build_index(docs: list[Document]) -> IndexResult:
    """Index text for documents already in scan order, byte for byte as Qwen Code 0.24.4's
    ``buildManagedAutoMemoryIndex`` writes it (the project and the user tier alike)."""
    return assemble_index([_index_line_js(doc) for doc in docs], [(d.relative_path,) for d in docs])


def assemble_index(lines: list[str], paths: list[tuple[str, ...]]) -> IndexResult:
    """Qwen's ``assembleIndex`` on JavaScript-string ``lines``: at most 200 lines and 25,000
    UTF-16 code units (cut at the last line break before it), then the warning. ``paths[i]``:
    the memories line ``i`` lists, reported as dropped when the line is."""
    text = "\n".join(lines[:MAX_LINES])
    raw_length = sum(len(line) for line in lines) + max(len(lines) - 1, 0)
    if len(text) > MAX_BYTES:
        cut = text.rfind("\n", 0, MAX_BYTES + 1)
        text = text[: cut if cut > 0 else MAX_BYTES]
    if len(lines) <= MAX_LINES and len(text) == raw_length:
        return IndexResult(from_js(text))
    kept_count = text.count("\n") + 1 if text else 0
    dropped = tuple(path for group in paths[kept_count:] for path in group)
    return IndexResult(from_js(f"{text}\n\n{WARNING}"), dropped)


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
