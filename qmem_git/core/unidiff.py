"""Unified diffs in git's format, rendered from two texts (pure; ``difflib`` does the matching).

Reviewers read ``qmem-git show`` / ``diff`` next to ``git show``, so the layout follows git:
``diff --git`` header, ``new file mode`` / ``deleted file mode`` (``old mode`` / ``new mode``
when only the mode changed, as ``chmod +x`` committed with C git), ``index`` line, ``/dev/null``
for a missing side, hunk ranges without ``,1``, the funcname context after ``@@`` and the
``\\ No newline at end of file`` marker. Hunk boundaries may differ from git's Myers output.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator

NO_NEWLINE = "\\ No newline at end of file"
FILE_MODE = "100644"
_FUNCNAME_CHARS = 80

_BOLD = "\x1b[1m"
_RED = "\x1b[31m"
_GREEN = "\x1b[32m"
_CYAN = "\x1b[36m"
_RESET = "\x1b[m"
_HEADER_PREFIXES = (
    "diff --git ",
    "index ",
    "--- ",
    "+++ ",
    "new file mode ",
    "deleted file mode ",
    "old mode ",
    "new mode ",
    "Binary files ",
)


def render_file_diff(
    path: str,
    old_text: str | None,
    new_text: str | None,
    *,
    old_id: str = "",
    new_id: str = "",
    binary: bool = False,
    context: int = 3,
    old_mode: str = FILE_MODE,
    new_mode: str = FILE_MODE,
) -> str:
    """One file's diff; ``None`` on a side means the file does not exist there (added/deleted).

    ``old_id``/``new_id`` are abbreviated blob ids for the ``index`` line (omitted when empty);
    ``old_mode``/``new_mode`` the file modes (octal text, as git prints them). Returns ``""``
    when both sides are equal.
    """
    if old_text == new_text and (not binary or (old_id and old_id == new_id)):
        if old_text is None or old_mode == new_mode:
            return ""
        # the mode alone changed: no index line, no hunks (binary files alike)
        return f"diff --git a/{path} b/{path}\nold mode {old_mode}\nnew mode {new_mode}\n"
    lines = _header(path, old_text, new_text, (old_id, new_id), (old_mode, new_mode))
    old_name = "/dev/null" if old_text is None else f"a/{path}"
    new_name = "/dev/null" if new_text is None else f"b/{path}"
    if binary:
        lines.append(f"Binary files {old_name} and {new_name} differ")
        return "\n".join(lines) + "\n"
    old_lines = split_lines(old_text or "")
    new_lines = split_lines(new_text or "")
    hunks = list(_hunks(old_lines, new_lines, context))
    if hunks:
        lines += [f"--- {old_name}", f"+++ {new_name}"]
        for hunk in hunks:
            lines += hunk
    return "\n".join(lines) + "\n"


def split_lines(text: str) -> list[str]:
    """Lines with their ``\\n`` kept, so a missing final newline stays visible. Only ``\\n``
    ends a line, as in git (``str.splitlines`` would also split at CR, FF, U+2028...)."""
    if not text:
        return []
    lines = [line + "\n" for line in text.split("\n")]
    last = lines.pop()
    return [*lines, last[:-1]] if last != "\n" else lines


def _header(
    path: str,
    old_text: str | None,
    new_text: str | None,
    ids: tuple[str, str],
    modes: tuple[str, str],
) -> list[str]:
    (old_id, new_id), (old_mode, new_mode) = ids, modes
    added, deleted = old_text is None, new_text is None
    lines = [f"diff --git a/{path} b/{path}"]
    if added:
        lines.append(f"new file mode {new_mode}")
    elif deleted:
        lines.append(f"deleted file mode {old_mode}")
    elif old_mode != new_mode:
        lines += [f"old mode {old_mode}", f"new mode {new_mode}"]
    if old_id or new_id:
        old = old_id or "0" * len(new_id)
        new = new_id or "0" * len(old_id)
        same_mode = not added and not deleted and old_mode == new_mode
        lines.append(f"index {old}..{new}" + (f" {new_mode}" if same_mode else ""))
    return lines


def _hunks(old: list[str], new: list[str], context: int) -> Iterator[list[str]]:
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for group in matcher.get_grouped_opcodes(context):
        first, last = group[0], group[-1]
        old_range = _range(first[1], last[2])
        new_range = _range(first[3], last[4])
        head = f"@@ -{old_range} +{new_range} @@"
        funcname = _funcname(old, first[1])
        yield [f"{head} {funcname}" if funcname else head, *_hunk_body(group, old, new)]


def _hunk_body(
    group: list[tuple[str, int, int, int, int]], old: list[str], new: list[str]
) -> list[str]:
    body: list[str] = []
    for tag, i1, i2, j1, j2 in group:
        if tag == "equal":
            body += _prefixed(" ", old[i1:i2])
            continue
        if tag in ("replace", "delete"):
            body += _prefixed("-", old[i1:i2])
        if tag in ("replace", "insert"):
            body += _prefixed("+", new[j1:j2])
    return body


def _prefixed(mark: str, lines: list[str]) -> list[str]:
    out: list[str] = []
    for line in lines:
        out.append(mark + line.rstrip("\n"))
        if not line.endswith("\n"):
            out.append(NO_NEWLINE)
    return out


def _range(start: int, stop: int) -> str:
    """git's (and difflib's) unified range: ``5`` for one line, ``4,0`` for none, else ``5,3``."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start if length == 0 else start + 1},{length}"


def _funcname(old: list[str], hunk_start: int) -> str:
    """git's default funcname: the nearest line above the hunk starting with a letter, _ or $."""
    for line in reversed(old[:hunk_start]):
        if line[:1].isalpha() or line[:1] in ("_", "$"):
            return line.rstrip()[:_FUNCNAME_CHARS].rstrip()
    return ""


def colorize(diff_text: str) -> str:
    """ANSI colours like ``git diff --color``: bold headers, cyan ``@@``, red ``-``, green ``+``."""
    out: list[str] = []
    in_header = False
    for line in diff_text.split("\n"):
        if line.startswith("diff --git "):
            in_header = True
        elif line.startswith("@@"):
            in_header = False
        out.append(_colour_line(line, in_header))
    return "\n".join(out)


def _colour_line(line: str, in_header: bool) -> str:
    if not line:
        return line
    if in_header and line.startswith(_HEADER_PREFIXES):
        return f"{_BOLD}{line}{_RESET}"
    if line.startswith("@@"):
        end = line.find("@@", 2)
        if end > 0:
            return f"{_CYAN}{line[: end + 2]}{_RESET}{line[end + 2 :]}"
        return f"{_CYAN}{line}{_RESET}"
    if line.startswith("+"):
        return f"{_GREEN}{line}{_RESET}"
    if line.startswith("-"):
        return f"{_RED}{line}{_RESET}"
    return line
