"""``log``, ``history``, ``diff`` and ``show`` on ``--tier team``: read from the project's own
git history for ``.qwen/team-memory/`` with C git (qmem-git never keeps a repository there).

Commits there are the project's, made by people or by Qwen's team sync, so they carry no
``Qmem-*`` trailers: each entry's files come from git's own ``--name-status``, its paths are
relative to the team folder, and its operation is unknown (None)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from qmem_git.core.changes import FileChange, parse_commit_message
from qmem_git.core.paths import Layout, team_git_root
from qmem_git.errors import QmemError, UsageError
from qmem_git.store.history import LogEntry

TEAM_DIR = ".qwen/team-memory"
_FORMAT = "--format=%x1e%H%x00%P%x00%an <%ae>%x00%ct %ci%x00%B%x00"


def team_log(layout: Layout, limit: int | None = None, path: str | None = None) -> list[LogEntry]:
    """The project's commits that touched the team folder (or ``path`` in it), newest first."""
    args = ["log", "-z", "--no-renames", "--name-status", _FORMAT]
    args += [f"--max-count={limit}"] if limit else []
    return [_entry(record) for record in _git(layout, [*args, "--", _spec(path)]).split("\x1e")[1:]]


def team_diff(layout: Layout, revs: Sequence[str]) -> tuple[str, list[dict[str, object]]]:
    """(unified diff, changed files) of the team folder: from ``revs[0]`` to ``revs[1]`` or the
    work tree; with no REV, what is not committed yet (``git diff HEAD``)."""
    _check_revs(revs)
    chosen = list(revs) or ["HEAD"]
    text = _git(layout, ["diff", "--no-color", "--no-renames", *chosen, "--", TEAM_DIR])
    names = _git(layout, ["diff", "-z", "--no-renames", "--name-status", *chosen, "--", TEAM_DIR])
    return text, [{"path": c.path, "status": c.status} for c in _changes(names.split("\0"))]


def team_show(layout: Layout, rev: str) -> tuple[LogEntry, str]:
    """One project commit as it touched the team folder: (its entry, its diff there)."""
    _check_revs([rev])
    found = _git(layout, ["log", "-z", "--no-renames", "--name-status", _FORMAT, "-1", rev])
    diff = _git(layout, ["show", "--no-color", "--no-renames", "--format=", rev, "--", TEAM_DIR])
    return _entry(found.split("\x1e")[1]), diff


def team_porcelain(layout: Layout) -> list[tuple[str, str]]:
    """(A/M/D, path in the team folder) of what ``git add`` there would commit: C git's
    ``status --porcelain`` of the team folder (an untracked file is A)."""
    args = ["--no-optional-locks", "status", "--porcelain", "-z", "--no-renames"]
    args += ["--untracked-files=all"]
    records = _git(layout, [*args, "--", TEAM_DIR]).split("\0")
    prefix = TEAM_DIR + "/"
    found = []
    for record in records:
        code, path = record[:2], record[3:]
        if path.startswith(prefix):
            kind = "D" if "D" in code else "A" if code in ("??", "A ", "AM") else "M"
            found.append((kind, path[len(prefix) :]))
    return found


def _spec(path: str | None) -> str:
    return TEAM_DIR if path in (None, ".", "") else f"{TEAM_DIR}/{path}"


def _check_revs(revs: Sequence[str]) -> None:
    """A REV is never an option for git (``--output=…``)."""
    if any(rev.startswith("-") for rev in revs):
        raise UsageError(
            "a revision cannot start with '-'", hint="give a commit id, HEAD or HEAD~N"
        )


def _entry(record: str) -> LogEntry:
    tokens = record.split("\0")
    commit, parents, author, times, message = tokens[:5]
    seconds, _, iso = times.partition(" ")
    offset = iso.rsplit(" ", 1)[-1]
    sign = -1 if offset.startswith("-") else 1
    tz = sign * (int(offset[1:3]) * 3600 + int(offset[3:5]) * 60)
    info = parse_commit_message(message.rstrip("\n"))._replace(changes=tuple(_changes(tokens[5:])))
    return LogEntry(commit, tuple(parents.split()), author, int(seconds), tz, info)


def _changes(tokens: list[str]) -> list[FileChange]:
    """``--name-status -z`` output (status, path, status, path, …) as team-relative changes."""
    words = [token.strip() for token in tokens if token.strip()]
    prefix = TEAM_DIR + "/"
    return [
        FileChange(status[0], path[len(prefix) :])
        for status, path in zip(words[::2], words[1::2], strict=False)
        if path.startswith(prefix)
    ]


def _git(layout: Layout, args: list[str]) -> str:
    project = team_git_root(layout.memory_root)
    argv = ["git", "-C", project, "-c", "core.quotepath=off", *args]
    try:
        done = subprocess.run(argv, capture_output=True, check=False, timeout=120)
    except FileNotFoundError as exc:
        raise QmemError(
            "git is not installed", hint="install git to read the team history"
        ) from exc
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise UsageError(
            f"git in {project}: {reason[-1] if reason else 'failed'}",
            hint="the team tier's history is the project's: check the revision, or that "
            f"{project} is a git repository with commits",
        )
    return done.stdout.decode("utf-8", "replace")
