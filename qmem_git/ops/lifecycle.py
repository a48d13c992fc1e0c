"""Setting up and inspecting a memory store: init, where, index."""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from qmem_git.core.changes import ChangeSet
from qmem_git.core.codec import parse_document
from qmem_git.core.index import index_is_current
from qmem_git.core.limits import INDEX_NAME
from qmem_git.ops.required import require, require_repository, require_store
from qmem_git.ops.runner import execute
from qmem_git.ops.tierindex import expected_index
from qmem_git.settings import Settings
from qmem_git.store.relocate import repository
from qmem_git.store.repo import default_hook_command, head_commit, init_repo
from qmem_git.store.state import ensure_scaffold
from qmem_git.store.walk import check_store, memory_paths
from qmem_git.store.workdir import index_path, read_text


class Committed(NamedTuple):
    commit: str | None
    dropped: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # what recovery did first (stale locks, a recover commit)
    held: tuple[tuple[str, str], ...] = ()  # (path, why) left uncommitted where they are


class IndexStatus(NamedTuple):
    up_to_date: bool
    expected: str
    dropped: tuple[str, ...]


def init_memory(settings: Settings, hook_command: str, now: datetime) -> Committed:
    """Scaffold (spec §3), make the repository, and commit what is already there.

    Memory files another tool wrote before (Qwen Code's own auto-memory) become the first
    commit, as a ``snapshot``; an empty store starts with just its (empty) MEMORY.md.
    """
    ensure_scaffold(settings.layout, now)
    init_repo(settings.layout, hook_command)
    record_project(settings)
    return commit_existing(settings, now)


def record_project(settings: Settings) -> None:
    """Note in the store's repository which project it belongs to (``sync --all`` names the
    store's hub branch from it); the user and team tiers belong to no one project."""
    layout = settings.layout
    if layout.project_root and layout.tier == "project":
        from qmem_git.store.hubstore import record_project as record

        record(repository(layout.memory_root), layout.project_root)


def commit_existing(settings: Settings, now: datetime) -> Committed:
    """The first commit of an initialised store: what is already in the folder (or nothing)."""
    root = settings.layout.memory_root
    if has_commits(root):
        return Committed(None)
    outcome = execute(
        settings,
        lambda: initial_changeset(root, settings.quiet_seconds),
        now,
        recover_worktree=False,
    )
    return Committed(outcome.commit, held=tuple(sorted(outcome.changeset.held.items())))


def initial_changeset(root: str, quiet_seconds: float = 0.0) -> ChangeSet:
    """Every ``*.md`` file already in the folder, as one import; those that must not be
    committed (``core.holdback``) stay where they are and are named in the commit."""
    import time

    from qmem_git.core.holdback import BEING_WRITTEN, hold_reason

    writes: dict[str, str] = {}
    held: dict[str, str] = {}
    mtimes = {}  # their ages survive the import (Qmem-Mtime trailers carry them to clones)
    quiet_ns = time.time_ns() - int(quiet_seconds * 1e9)
    for rel in memory_paths(root):
        data = read_bytes(os.path.join(root, rel))
        why = "file-unreadable" if data is None else hold_reason(rel, data)
        if why is None and data is not None:
            mtime_ns = os.lstat(os.path.join(root, rel)).st_mtime_ns
            if mtime_ns > quiet_ns:
                why = BEING_WRITTEN
            else:
                writes[rel] = data.decode("utf-8")
                mtimes[rel] = mtime_ns // 1_000_000_000
        if why is not None:
            held[rel] = why
    if not writes:
        return ChangeSet("index", "start memory history", held=held)
    return ChangeSet(
        "snapshot",
        f"import {len(writes)} existing memory file(s)",
        writes=writes,
        topics=_types(writes),
        added=len(writes),
        mtimes=mtimes,
        held=held,
    )


def _types(writes: dict[str, str]) -> tuple[str, ...]:
    """The memory types among ``writes`` (files that are no memory have none)."""
    docs = (parse_document(text, rel, 0) for rel, text in writes.items())
    return tuple(sorted({doc.type for doc in docs if doc is not None}))


def read_bytes(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def has_commits(root: str) -> bool:
    """True once ``main`` has a commit."""
    return head_commit(root) is not None


def rebuild_index(settings: Settings, now: datetime) -> Committed:
    """Regenerate MEMORY.md; commits only when it changed."""
    require_store(settings)
    outcome = execute(settings, lambda: ChangeSet("index", "rebuild MEMORY.md"), now)
    dropped = outcome.applied.index_dropped if outcome.applied else ()
    recovery = outcome.recovery
    notes = recovery.messages() if recovery else []
    commit = outcome.commit
    if commit is None and recovery is not None and recovery.commit is not None:
        # a hand-edited MEMORY.md was already rebuilt by the writer's recovery commit
        rebuilt = any(change.path == INDEX_NAME for change in recovery.changes)
        commit = recovery.commit if rebuilt else None
    return Committed(commit, tuple(dropped), tuple(notes))


def check_index(settings: Settings) -> IndexStatus:
    """Compare MEMORY.md on disk with a fresh rebuild; read-only.

    Same rule as ``validate`` and the ``qmem-index`` hook: one trailing newline is fine.
    """
    root = settings.layout.memory_root
    expected = expected_index(root)
    current = read_text(index_path(root))
    return IndexStatus(index_is_current(current, expected), expected.text, expected.dropped)


def describe_location(settings: Settings) -> dict[str, object]:
    """``where``: the chosen store (``--tier``); the team tier's repository is the project's."""
    layout = settings.layout
    team = layout.tier == "team"
    git_dir = layout.git_dir if team else repository(layout.memory_root)
    return {
        "tier": layout.tier,
        "memory_root": layout.memory_root,
        "state_dir": layout.state_dir,
        "mode": layout.mode,
        "project": layout.project_root,
        "repository": git_dir,
        "initialized": os.path.exists(git_dir) if team else os.path.isdir(git_dir),
        "remotes": _remotes_of(git_dir),
    }


def _remotes_of(git_dir: str) -> list[str]:
    if not os.path.isdir(git_dir):
        return []
    from qmem_git.store.remotes import list_remotes

    return [f"{r.name} {r.display_url} ({r.kind})" for r in list_remotes(git_dir)]


def git_command(settings: Settings, args: Sequence[str], cwd: str) -> tuple[list[str], str]:
    """``qmem-git git ARGS``: the C git command line (and its folder) that runs ``ARGS`` on
    the memory repository with the memory root as work tree, as a person's own ``git`` would.

    Nothing under the memory root is read as git's own: a ``.git`` an agent wrote there is
    neither the repository nor its config. A repository still inside the memory folder is
    moved out first, as the next write would move it. Paths are taken from ``cwd`` when it lies
    in the memory root, else from the root.
    """
    import shutil

    from qmem_git.core.paths import is_inside
    from qmem_git.errors import QmemError
    from qmem_git.store.locks import move_out

    require_repository(settings)
    layout = settings.layout
    current = repository(layout.memory_root)
    if current != layout.git_dir:
        move_out(layout, current, settings.lock_timeout)
    git = shutil.which("git")
    if git is None:
        raise QmemError(
            "git is not installed (qmem-git git runs it on the memory repository)",
            hint="install git; qmem-git log, show, diff and history work without it",
        )
    root = layout.memory_root
    argv = [git, f"--git-dir={repository(root)}", f"--work-tree={root}", *args]
    return argv, cwd if is_inside(root, cwd) else root


def hook_command() -> str:
    """What the memory repo's git pre-commit hook runs (``store.repo.default_hook_command``)."""
    return default_hook_command()


def ensure_repository(settings: Settings, now: datetime, *, dry_run: bool = False) -> None:
    """Writing operations initialise the store on first use, as ``init`` would.

    A ``--dry-run`` writes nothing, so it needs an existing store (usage error otherwise).
    """
    if dry_run:  # as the real run would: writers refuse a folder that is not a memory folder
        require(settings, "--dry-run writes nothing, not even a new store")
        check_store(settings.layout)
    elif not os.path.isdir(repository(settings.layout.memory_root)):
        init_memory(settings, hook_command(), now)
    else:
        ensure_scaffold(settings.layout, now)
