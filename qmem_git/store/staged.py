"""What the next commit of the memory repository would record: the git index against HEAD.

The memory repo's pre-commit hook checks only what a hand-made commit adds or changes (the
staged blobs, not the work tree): files already in HEAD were checked when they were committed,
and an untracked draft in the folder is not part of the commit. Reading the index and HEAD's
trees costs a few milliseconds per thousand files, where validating every file costs ~0.35 ms
per file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from qmem_git.core.limits import INDEX_NAME
from qmem_git.errors import QmemError
from qmem_git.store import gitindex
from qmem_git.store.repo import Repository


class StagedFile(NamedTuple):
    """One index entry whose content differs from HEAD's (or that HEAD does not have)."""

    path: str
    mode: int
    sha: str
    size: int


class Staged(NamedTuple):
    """``paths``: every path the commit would hold; ``changed``: the entries to check;
    ``memory_index``: MEMORY.md's entry, changed or not (None when it is not in the index)."""

    paths: list[str]
    changed: list[StagedFile]
    memory_index: StagedFile | None


def staged_changes(memory_root: str) -> Staged:
    """The index's paths and the entries whose blob differs from HEAD's, in index order."""
    git_dir = os.path.join(memory_root, ".git")
    try:
        index = gitindex.read_index(git_dir)
    except gitindex.IndexUnreadable as exc:
        raise QmemError(
            f"the git index of {memory_root} cannot be read ({exc})",
            hint="run any qmem-git writing command (it rebuilds the index), then stage again",
        ) from exc
    listed = index.get(INDEX_NAME)
    memory_index = None if listed is None else _staged(listed)
    with Repository(memory_root) as repo:
        _, head = repo.head()
        if index.head == head:  # our own record: this index was written for HEAD
            return Staged(index.paths(), [], memory_index)
        in_head = repo.flatten(repo.tree_of(head))
    changed = []
    for path in index.paths():
        entry = index.get(path)
        if entry is not None and in_head.get(path) != entry.sha:
            changed.append(_staged(entry))
    return Staged(index.paths(), changed, memory_index)


def _staged(entry: gitindex.IndexEntry) -> StagedFile:
    return StagedFile(entry.path, entry.mode, entry.sha, entry.size)


def iter_blobs(memory_root: str, shas: Iterable[str]) -> Iterator[tuple[str, bytes]]:
    """``(id, content)`` of each blob, one at a time (a first commit may stage thousands)."""
    with Repository(memory_root) as repo:
        for sha in shas:
            yield sha, repo.read_blob(sha)
