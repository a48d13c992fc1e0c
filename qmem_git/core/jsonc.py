"""JSON as the agents' settings files and hooks use it, without ``import json`` where it counts.

``loads`` runs the C scanner directly: ``import json`` pulls in ``re`` (~10 ms), and the prompt
hook reads JSON on every prompt. ``strip_jsonc`` blanks out the comments (and trailing commas)
that Qwen Code and Claude Code accept in their ``settings.json``.
"""

from __future__ import annotations


class _DecodeOptions:
    """What ``_json.make_scanner`` reads from a ``json.JSONDecoder``."""

    strict = False
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float
    memo: dict[str, str] = {}  # noqa: RUF012 - the C scanner keeps its own per call


def loads(text: str) -> object:
    """``json.loads`` through the C scanner directly: ``import json`` costs ``re`` (~10 ms)."""
    try:
        from _json import make_scanner
    except ImportError:  # no C accelerator (PyPy): the plain module
        import json

        return json.loads(text)
    text = text.strip(" \t\r\n")
    value, end = make_scanner(_DecodeOptions())(text, 0)  # type: ignore[arg-type]
    if end != len(text):
        raise ValueError(f"extra data at {end}")
    return value


def strip_jsonc(text: str, *, trailing_commas: bool = True) -> str:
    """Blank out comments and drop trailing commas, leaving strings untouched."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            end = _string_end(text, i)
            out.append(text[i:end])
            i = end
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            out.append(" ")
        elif ch in "}]" and trailing_commas:
            _drop_trailing_comma(out)
            out.append(ch)
            i += 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _string_end(text: str, start: int) -> int:
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == '"':
            return i + 1
        else:
            i += 1
    return len(text)


def _drop_trailing_comma(out: list[str]) -> None:
    """Outside strings every piece is one character, so the comma is a piece of its own."""
    for k in range(len(out) - 1, -1, -1):
        if out[k].strip():
            if out[k] == ",":
                out[k] = ""
            return
