"""Review operations: log, show, diff, history.

The CLI calls these; they validate arguments and delegate to :mod:`qmem_git.store.history`,
so the CLI never needs to know how history is read.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

from qmem_git.core.changes import OPS
from qmem_git.core.unidiff import split_lines
from qmem_git.errors import UsageError
from qmem_git.store.history import (
    DiffResult,
    FileDiff,
    LogEntry,
    ShowResult,
    diff_revs,
    file_history,
    open_history,
    read_log,
    show_commit,
)


@dataclass(frozen=True)
class FileStat:
    """``--stat`` line: how many lines one commit added to and removed from a file."""

    path: str
    status: str
    insertions: int
    deletions: int


def log(
    memory_root: str,
    *,
    limit: int | None = None,
    op: str | None = None,
    path: str | None = None,
) -> list[LogEntry]:
    """``qmem-git log``: an unknown ``--op`` is a usage error rather than an empty list."""
    if op is not None and op not in OPS:
        raise UsageError(f"unknown operation {op!r}", "one of: " + ", ".join(OPS))
    if limit is not None and limit < 0:
        raise UsageError("-n must be 0 or more", "e.g. `qmem-git log -n 20`")
    return read_log(memory_root, limit=limit, op=op, path=path)


def show(memory_root: str, rev: str | None = None) -> ShowResult:
    return show_commit(memory_root, rev or "HEAD")


def diff(memory_root: str, revs: Iterable[str] = ()) -> DiffResult:
    """``diff`` = last operation, ``diff A`` = A..HEAD, ``diff A B`` = A..B."""
    given = list(revs)
    if len(given) > 2:
        raise UsageError("diff takes at most two revisions", "qmem-git diff [A [B]]")
    return diff_revs(memory_root, *given)


def history(memory_root: str, path: str) -> list[LogEntry]:
    if path.strip("/") in ("", "."):  # "." is the memory root itself, as `cli` passes it
        raise UsageError("history needs a memory file path", "e.g. `qmem-git history user/x.md`")
    return file_history(memory_root, path)


def commit_stats(memory_root: str, commit: str) -> list[FileStat]:
    """Per-file line counts for ``log --stat`` (diffs trees: only when asked for)."""
    with open_history(memory_root) as repo:
        return [file_stat(f) for f in repo.changes_of(repo.resolve(commit))]


def file_stat(diff_: FileDiff) -> FileStat:
    old = split_lines(diff_.old_text or "")
    new = split_lines(diff_.new_text or "")
    shared = _common_lines(old, new)
    return FileStat(diff_.path, diff_.status, len(new) - shared, len(old) - shared)


def _common_lines(old: list[str], new: list[str]) -> int:
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    return sum(block.size for block in matcher.get_matching_blocks())
