"""ChangeSet: the one shape every writing operation produces, and its commit message."""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from qmem_git.core.text import clean_text

OPS = (
    "extract",
    "dream",
    "forget",
    "remember",
    "undo",
    "restore",
    "snapshot",
    "edit",
    "merge",
    "recover",
    "index",
    "repair",
)

MTIME_TRAILER = "Qmem-Mtime"
HELD_TRAILER = "Qmem-Held"  # how many files this commit left out (core.holdback), one line each
_TRAILER = re.compile(r"^(Qmem-[A-Za-z][A-Za-z0-9-]*): ?(.*)$")
_CHANGE = re.compile(r"^[AMD] .")


_NONE: Mapping[str, str] = MappingProxyType({})  # the defaults below: shared, so read-only


class ChangeSet(NamedTuple):
    """Files to write (relative path -> text) and delete, plus what the commit says about them.

    MEMORY.md is never listed here: ``store`` regenerates it in the same commit. A NamedTuple,
    not a frozen dataclass: ~0.2 ms instead of ~0.9 ms to define, on every write
    (``_replace`` for ``dataclasses.replace``).
    """

    op: str
    subject: str
    writes: Mapping[str, str] = _NONE
    deletes: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()
    added: int = 0
    removed: int = 0
    session: str | None = None
    trailers: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()
    # path -> unix seconds: a written file's own time when older than the commit (a file
    # another tool or a person wrote, committed by recover/snapshot/import keeps its age)
    mtimes: Mapping[str, int] = MappingProxyType({})
    # path -> why: files in the work tree this commit leaves out (core.holdback)
    held: Mapping[str, str] = _NONE

    @property
    def is_empty(self) -> bool:
        return not self.writes and not self.deletes

    def paths(self) -> list[str]:
        return sorted({*self.writes, *self.deletes})


class FileChange(NamedTuple):
    """One changed path in a commit: status ``A`` (added), ``M`` (modified) or ``D`` (deleted)."""

    status: str
    path: str


class CommitInfo(NamedTuple):
    """What a qmem commit message says, read back from its subject, file lines and trailers.

    A NamedTuple, not a frozen dataclass: ~0.2 ms instead of ~1 ms at import, on every write.
    """

    subject: str
    op: str | None
    session: str | None = None
    host: str | None = None
    topics: tuple[str, ...] = ()
    added: int = 0
    removed: int = 0
    changes: tuple[FileChange, ...] = ()
    trailers: tuple[tuple[str, str], ...] = ()

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(change.path for change in self.changes)

    @property
    def mtimes(self) -> dict[str, int]:
        """path -> the time its ``Qmem-Mtime`` trailer gives it (its age when committed)."""
        times = {}
        for key, value in self.trailers:
            seconds, _, path = value.partition(" ")
            if key == MTIME_TRAILER and seconds.isdigit() and path:
                times[path] = int(seconds)
        return times


def render_commit_message(cs: ChangeSet, host: str, changes: list[FileChange]) -> str:
    """Subject, blank line, ``<status> <path>`` lines, blank line, trailers (ARCHITECTURE §4)."""
    if cs.op not in OPS:  # the op is a trailer value readers trust: never free text
        raise ValueError(f"unknown operation {cs.op!r}")
    lines = [f"{cs.op}: {_one_line(cs.subject)}".rstrip(), ""]
    if changes:
        lines += [f"{c.status} {_path_line(c.path)}" for c in changes]
        lines.append("")
    if cs.held:
        lines += [f"held back {_path_line(p)}: {_one_line(w)}" for p, w in sorted(cs.held.items())]
        lines.append("")
    trailers: list[tuple[str, str]] = [("Qmem-Op", cs.op)]
    session = _one_line(cs.session or "")
    if session:
        trailers.append(("Qmem-Session", session))
    trailers += [
        ("Qmem-Host", _one_line(host)),
        ("Qmem-Topics", ",".join(cs.topics)),
        ("Qmem-Added", str(cs.added)),
        ("Qmem-Removed", str(cs.removed)),
    ]
    trailers += [(key, _one_line(value)) for key, value in cs.trailers]
    if cs.held:
        trailers.append((HELD_TRAILER, str(len(cs.held))))
    written = {c.path for c in changes if c.status != "D"}
    trailers += [
        (MTIME_TRAILER, f"{seconds} {_path_line(path)}")
        for path, seconds in sorted(cs.mtimes.items())
        if path in written
    ]
    lines += [f"{key}: {value}".rstrip() for key, value in trailers]
    return "\n".join(lines) + "\n"


def parse_commit_message(message: str) -> CommitInfo:
    """Inverse of :func:`render_commit_message`; tolerant of commits made by other tools."""
    lines = message.replace("\r\n", "\n").split("\n")
    subject = lines[0]
    trailers: list[tuple[str, str]] = []
    changes: list[FileChange] = []
    for paragraph in _paragraphs(lines[1:]):
        # File lines count only as a block of their own in a message that has our trailers:
        # prose from other tools ("A fix for ...") must not be read as a change.
        if all(_CHANGE.match(line) for line in paragraph):
            changes += [FileChange(line[0], line[2:]) for line in paragraph]
            continue
        for line in paragraph:
            match = _TRAILER.match(line)
            if match:
                trailers.append((match.group(1), match.group(2).strip()))
    values = dict(trailers)
    if "Qmem-Op" not in values:
        changes = []
    topics = tuple(t for t in values.get("Qmem-Topics", "").split(",") if t)
    return CommitInfo(
        subject=subject,
        op=values.get("Qmem-Op"),
        session=values.get("Qmem-Session"),
        host=values.get("Qmem-Host"),
        topics=topics,
        added=_int(values.get("Qmem-Added")),
        removed=_int(values.get("Qmem-Removed")),
        changes=tuple(changes),
        trailers=tuple(trailers),
    )


def _paragraphs(lines: list[str]) -> list[list[str]]:
    """Runs of non-blank lines."""
    paragraphs: list[list[str]] = [[]]
    for line in lines:
        if line.strip():
            paragraphs[-1].append(line)
        elif paragraphs[-1]:
            paragraphs.append([])
    return [paragraph for paragraph in paragraphs if paragraph]


def _one_line(text: str) -> str:
    """Subject and trailer text: one line, no control characters, no half characters."""
    return " ".join(clean_text(text).split())


def _path_line(path: str) -> str:
    """The path as written on a file line; control characters (a hostile name's newline could
    forge trailers) are escaped, so such a line names the file but is not its exact path."""
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in path):
        return path.encode("unicode_escape").decode("ascii")
    return path


def _int(value: str | None) -> int:
    try:
        return int(value) if value is not None else 0
    except ValueError:
        return 0
