"""Which relative paths may hold memories: safe on every OS and git host, and in the spec layout.

Memory files travel between machines (sync, clone), so a name that is harmless here can be
dangerous elsewhere: ``.GIT`` is the repository on a case-insensitive disk, ``.G\\u200bIT`` is
``.git`` on HFS+ (which ignores some invisible code points), ``con.md`` opens a device on
Windows, ``a.md.`` and ``a.md`` are one file on NTFS. Sync, validate and the store share these
checks. Paths are POSIX relative paths from the memory root; problems are plain sentences.
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Collection, Iterable, Iterator

from qmem_git.core.model import MEMORY_TYPES

LEGACY_TOPIC_FILES = tuple(f"{kind}.md" for kind in MEMORY_TYPES)  # spec §0, G1
MAX_SEGMENT_BYTES = 255
# folders a memory path may pass through: far more than any layout needs, far less than what
# exhausts a recursive reader or PATH_MAX (a hostile tree may nest thousands of levels)
MAX_PATH_DEPTH = 32

# Code points that render as nothing or that some file systems drop when comparing names:
# format characters (category Cf: zero-width, bidi controls, tags, BOM) plus the "default
# ignorable" letters and marks git's HFS+ / NTFS guards also care about.
_IGNORABLE_EXTRA = re.compile(
    "[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\ufe00-\ufe0f\uffa0"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)
_WINDOWS_DEVICES = frozenset(
    ["con", "prn", "aux", "nul", "conin$", "conout$", "clock$"]
    + [f"{port}{n}" for port in ("com", "lpt") for n in "123456789¹²³"]
)
_WINDOWS_RESERVED_CHARS = frozenset('<>:"|?*')
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def is_ignorable(char: str) -> bool:
    """True for invisible code points that some file systems ignore when comparing names."""
    return unicodedata.category(char) == "Cf" or bool(_IGNORABLE_EXTRA.match(char))


def fold_name(name: str) -> str:
    """The name as a case-insensitive, normalising file system may see it."""
    if name.isascii():  # no ignorable code points, NFC is a no-op, casefold is lower
        return name.lower()
    visible = "".join(char for char in name if not is_ignorable(char))
    return unicodedata.normalize("NFC", visible).casefold()


def is_indexable_path(rel: str) -> bool:
    """A path MEMORY.md can list: no control characters, valid UTF-8 (no surrogate escapes of
    undecodable bytes), and no backslash (Qwen reads a ``\\`` in a listed name as ``/`` and
    never finds the file). The rest are unsafe paths anyway (:func:`check_path_safety`)."""
    return _CONTROL.search(rel) is None and not _has_surrogates(rel) and "\\" not in rel


def check_path_safety(rel: str) -> list[str]:
    """Problems that make ``rel`` unsafe to create anywhere (independent of the memory layout)."""
    if not rel:
        return ["path is empty"]
    problems = []
    if rel.startswith("/") or re.match(r"^[A-Za-z]:", rel):
        problems.append("path is absolute")
    if "\\" in rel:
        problems.append("path contains a backslash")
    if _CONTROL.search(rel):
        problems.append("path contains a control character")
    segments = rel.split("/")
    if len(segments) > MAX_PATH_DEPTH:
        return [*problems, f"path is nested deeper than {MAX_PATH_DEPTH} folders"]
    inner = segments[1:] if rel.startswith("/") else segments
    if "" in inner:
        problems.append("path has an empty segment (// or a trailing /)")
    for segment in segments:
        problems += [p for p in check_segment(segment) if p not in problems]
    return problems


def check_segment(segment: str) -> list[str]:
    """Problems with one path segment (file or folder name)."""
    if segment in ("", "."):
        return [] if segment == "" else ["path contains a '.' segment"]
    if segment == "..":
        return ["path contains a '..' segment"]
    folded = fold_name(segment).rstrip(" .")
    problems = []
    if folded in (".git", "git~1"):  # other dot-names are memories: Qwen Code 0.24 reads them
        problems.append(f"{_show(segment)} is a git metadata name")
    if not segment.isascii():
        problems += _non_ascii_problems(segment)
    if segment[-1] in " .":
        problems.append(f"{_show(segment)} ends with a dot or a space")
    if folded.split(".", 1)[0].rstrip(" ") in _WINDOWS_DEVICES:
        problems.append(f"{_show(segment)} is a Windows device name")
    if _WINDOWS_RESERVED_CHARS.intersection(segment):
        problems.append(f'{_show(segment)} contains a character Windows forbids (<>:"|?*)')
    if len(segment.encode("utf-8", "surrogatepass")) > MAX_SEGMENT_BYTES:
        problems.append(f"a name is longer than {MAX_SEGMENT_BYTES} bytes")
    return problems


def _non_ascii_problems(segment: str) -> list[str]:
    problems = []
    if _has_surrogates(segment):
        problems.append("a name is not valid UTF-8")
    if any(is_ignorable(char) for char in segment):
        problems.append(f"{_show(segment)} contains an invisible or ignorable character")
    return problems


def check_memory_layout(rel: str) -> list[str]:
    """Problems with ``rel`` as a memory file's place: any ``*.md`` at any depth is one (Qwen
    Code 0.24 scans them all; ``MEMORY.md`` below the root is a plain file)."""
    return [] if rel.endswith(".md") else ["memory files must end in .md"]


PINNED_DIR = "pinned"  # spec/qwen-0.24-delta.md: hand-curated memories, any letter case


def is_pinned(rel: str) -> bool:
    """True for a path in ``pinned/`` directly under the memory root (any letter case): what
    Qwen Code's extraction and dream agents may not write, move or delete, nor may ours."""
    head, sep, _ = rel.partition("/")
    return bool(sep) and head.lower() == PINNED_DIR


def check_relative_path(rel: str) -> list[str]:
    """Every problem with ``rel`` as the path of a memory file (safety first, then layout)."""
    problems = check_path_safety(rel)
    if problems:
        return problems
    return check_memory_layout(rel)


def is_allowed_memory_path(rel: str) -> bool:
    return not check_relative_path(rel)


def find_case_collisions(paths: Iterable[str]) -> list[list[str]]:
    """Groups of distinct spellings that one case-insensitive, normalising disk sees as one.

    Folder prefixes count too: ``User/a.md`` and ``user/b.md`` put two folders in one place.
    """
    spellings: dict[str, set[str]] = defaultdict(set)
    for path in paths:
        for prefix in path_prefixes(path):
            spellings[fold_name(prefix)].add(prefix)
    groups = [sorted(names) for names in spellings.values() if len(names) > 1]
    return sorted(groups)


def new_name_collisions(new: Iterable[str], paths: Collection[str]) -> dict[str, tuple[str, str]]:
    """The ``new`` paths that one case-insensitive disk would merge with another of ``paths``:
    new path -> (its clashing spelling, the spelling it clashes with).

    A spelling already used by a path that is not new is kept and the new spellings beside it
    are refused; when every spelling in a clash is new, all of them are refused.
    """
    fresh = set(new)
    if not fresh:
        return {}
    wanted = {fold_name(prefix) for rel in fresh for prefix in path_prefixes(rel)}
    spellings: dict[str, set[str]] = defaultdict(set)
    established: set[str] = set()
    for rel in paths:  # only the spellings a new path's folders or name may clash with
        for prefix in _prefixes(rel):
            folded = fold_name(prefix)
            if folded not in wanted:
                break  # a folder folds on its own: nothing below it can clash either
            spellings[folded].add(prefix)
            if rel not in fresh:
                established.add(prefix)
    groups = sorted(sorted(names) for names in spellings.values() if len(names) > 1)
    refused: dict[str, tuple[str, str]] = {}
    for group in groups:
        kept = [name for name in group if name in established]
        for rel in fresh:
            clash = next((p for p in path_prefixes(rel) if p in group and p not in kept), None)
            if clash is not None:
                refused[rel] = (clash, next(name for name in (kept or group) if name != clash))
    return refused


def collision_message(spelling: str, other: str) -> str:
    return f"'{spelling}' and '{other}' are one path on case-insensitive file systems"


def path_prefixes(path: str) -> list[str]:
    """``a``, ``a/b``, ``a/b/c.md`` for ``a/b/c.md``: the folders and the file itself."""
    segments = path.split("/")
    return ["/".join(segments[:depth]) for depth in range(1, len(segments) + 1)]


def _prefixes(path: str) -> Iterator[str]:
    """:func:`path_prefixes`, one at a time (most callers stop at the first folder)."""
    cut = path.find("/")
    while cut != -1:
        yield path[:cut]
        cut = path.find("/", cut + 1)
    yield path


def _has_surrogates(text: str) -> bool:
    """Surrogate escapes stand for bytes that are not UTF-8 (``os.fsdecode``)."""
    return not text.isascii() and any("\ud800" <= char <= "\udfff" for char in text)


def _show(segment: str) -> str:
    """A segment quoted for a message, with invisible and control characters made visible."""
    visible = "".join(c if c.isprintable() else f"<U+{ord(c):04X}>" for c in segment)
    return f"'{visible}'"
