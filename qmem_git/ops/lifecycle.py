"""Setting up and inspecting a memory store: init, where, index."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime

from qmem_git.core.changes import ChangeSet
from qmem_git.ops.runner import execute
from qmem_git.settings import Settings
from qmem_git.store.repo import identity_from_git_config, init_repo
from qmem_git.store.state import ensure_scaffold
from qmem_git.store.workdir import index_path, read_text, render_index


@dataclass(frozen=True)
class Committed:
    commit: str | None
    dropped: tuple[str, ...] = ()


@dataclass(frozen=True)
class IndexStatus:
    up_to_date: bool
    expected: str
    dropped: tuple[str, ...]


def init_memory(settings: Settings, hook_command: str, now: datetime) -> Committed:
    """Scaffold (spec §3), make the repository, and commit what is already there."""
    ensure_scaffold(settings.layout, now)
    init_repo(settings.layout, identity_from_git_config(settings.host), hook_command)
    outcome = execute(settings, lambda: ChangeSet("index", "initial index"), now)
    return Committed(outcome.commit)


def rebuild_index(settings: Settings, now: datetime) -> Committed:
    """Regenerate MEMORY.md; commits only when it changed."""
    require_repository(settings)
    outcome = execute(settings, lambda: ChangeSet("index", "rebuild MEMORY.md"), now)
    dropped = outcome.applied.index_dropped if outcome.applied else ()
    return Committed(outcome.commit, tuple(dropped))


def check_index(settings: Settings) -> IndexStatus:
    """Compare MEMORY.md on disk with a fresh rebuild; read-only."""
    root = settings.layout.memory_root
    expected = render_index(root)
    current = read_text(index_path(root))
    return IndexStatus(current == expected.text, expected.text, expected.dropped)


def describe_location(settings: Settings) -> dict[str, object]:
    layout = settings.layout
    return {
        "memory_root": layout.memory_root,
        "state_dir": layout.state_dir,
        "mode": layout.mode,
        "project": layout.project_root,
        "repository": os.path.isdir(os.path.join(layout.memory_root, ".git")),
        "remotes": [],
    }


def require_repository(settings: Settings) -> None:
    from qmem_git.errors import UsageError

    if not os.path.isdir(os.path.join(settings.layout.memory_root, ".git")):
        raise UsageError(
            f"{settings.layout.memory_root} is not a memory repository",
            "run 'qmem-git init' first",
        )
