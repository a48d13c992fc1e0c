"""Small text helpers the spec uses everywhere."""

from __future__ import annotations

import re

from qmem_git.core.limits import MAX_FILE_BYTES

# C0 controls other than whitespace, DEL and C1 controls: nothing a memory needs, and what a
# terminal would act on (ESC sequences) or git tools treat as binary (NUL)
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# terminal escape sequences, whole: CSI (``ESC [ 31 m``, C1 ``\x9b``), OSC (``ESC ] 0;title BEL``,
# C1 ``\x9d``), DCS/SOS/PM/APC strings, and the short ones (``ESC ( B``, ``ESC 7``); an
# unterminated string ends at the line's end, so a stray ESC never swallows the rest of a memory
# (nor does a space count as an intermediate byte: a lone C1 byte must not eat the next word)
_ESCAPE = re.compile(
    "(?:\x1b\\[|\x9b)[\x30-\x3f]*[\x21-\x2f]*[\x40-\x7e]?"
    "|(?:\x1b[\\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\\\|\x9c)?"
    "|\x1b[\x21-\x2f]*[\x30-\x7e]?"
)
_SURROGATE = re.compile("[\ud800-\udfff]")  # half a character (JSON "\ud83d", undecodable argv)
_SHOWN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # every control but tab and newline
CONFLICT_LINE = re.compile(r"^(?:<{7}|>{7}|\|{7})(?: .*)?$|^={7}$", re.MULTILINE)


def normalize_space(text: str) -> str:
    """Collapse every whitespace run to one space and trim (spec §4.3)."""
    return " ".join(text.split())


def clean_text(text: str) -> str:
    """``text`` without terminal escape sequences (``ESC [31m`` goes whole, not just its ESC)
    and control characters, a lone surrogate replaced by U+FFFD: what may be written into a
    memory, a commit message or a terminal."""
    if text.isprintable():  # the common case, one C call
        return text
    return _CONTROL.sub("", _ESCAPE.sub("", _SURROGATE.sub("\ufffd", text)))


def visible_controls(text: str) -> str:
    """``text`` as a terminal may show it: every control character but tab and newline spelled
    out (ESC as ``^[``, CR as ``^M``, DEL as ``^?``, C1 as ``\\x9b``), so text from a hand-written
    file or another machine's commit cannot move the cursor, retitle or clear the screen."""
    if text.isprintable():
        return text
    return _SHOWN.sub(_spell_control, text)


def _spell_control(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return "^" + chr(code + 0x40)
    return "^?" if code == 0x7F else f"\\x{code:02x}"


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, ending in ``…`` when it was cut."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def content_problem(text: str) -> str | None:
    """Why ``text`` must not be written as a memory file (what ``validate`` rejects and a
    planner could still produce), or None."""
    if _SURROGATE.search(text):
        return "it is not valid UTF-8 (half a character)"
    if "\x00" in text:
        return "it contains a NUL byte"
    if len(text) > MAX_FILE_BYTES // 4 and len(text.encode("utf-8")) > MAX_FILE_BYTES:
        return f"it is larger than {MAX_FILE_BYTES // 1024} KiB"
    if CONFLICT_LINE.search(text):
        return "it contains a git conflict marker line"
    return None
