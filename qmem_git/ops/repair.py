"""``repair``: rename the memory files whose names clash on case-insensitive disks.

A history made before merges kept such names apart (or by hand) can hold ``user/Notes.md``
beside ``user/notes.md``; every other machine would refuse to check it out, so sync refuses to
push it. One ``repair`` commit renames the later spelling to a free ``-N`` name (or into the
folder spelling that stays), keeping both memories' content and age.
"""

from __future__ import annotations

import os
from datetime import datetime

from qmem_git.core.changes import ChangeSet
from qmem_git.core.entries import topics_of
from qmem_git.core.merge import clash_renames
from qmem_git.core.model import INDEX_NAME
from qmem_git.ops.required import require_store
from qmem_git.ops.runner import Outcome, execute
from qmem_git.settings import Settings
from qmem_git.store.repo import Repository

RENAMED_TRAILER = "Qmem-Renamed"


def plan_repair(memory_root: str) -> ChangeSet:
    """One ``repair`` ChangeSet: write each clashing file under its new name, delete the old.

    A spelling a remote already has keeps its name (the remote-tracking refs tell).
    """
    with Repository(memory_root) as repo:
        head = repo.head()[1]
        files = {p: s for p, s in repo.flatten(repo.tree_of(head)).items() if p != INDEX_NAME}
        established = _remote_paths(repo) & set(files)
        renames = clash_renames(files, established)
        writes = {new: repo.read_blob(files[old]).decode("utf-8") for old, new in renames.items()}
    return ChangeSet(
        op="repair",
        subject=f"rename {len(renames)} file(s) whose names clash on case-insensitive disks",
        writes=writes,
        deletes=tuple(sorted(renames)),
        topics=topics_of(path.split("/", 1)[0] for path in writes),
        trailers=tuple((RENAMED_TRAILER, f"{a} -> {b}") for a, b in sorted(renames.items())),
        mtimes=_ages(memory_root, renames),
    )


def _remote_paths(repo: Repository) -> set[str]:
    paths: set[str] = set()
    for tip in repo.remote_tips().values():
        paths.update(repo.flatten(repo.tree_of(tip)))
    return paths


def _ages(memory_root: str, renames: dict[str, str]) -> dict[str, int]:
    """Each renamed file keeps the time of the file it was (its age in recall and MEMORY.md)."""
    times = {}
    for old, new in renames.items():
        try:
            times[new] = os.lstat(os.path.join(memory_root, old)).st_mtime_ns // 1_000_000_000
        except OSError:
            continue
    return times


def run_repair(settings: Settings, now: datetime, *, dry_run: bool = False) -> Outcome:
    require_store(settings)
    root = settings.layout.memory_root
    return execute(settings, lambda: plan_repair(root), now, dry_run=dry_run)
