"""What the next commit of the memory repository would record: the git index against HEAD.

The memory repo's pre-commit hook checks only what a hand-made commit adds or changes (the
staged blobs, not the work tree): files already in HEAD were checked when they were committed,
and an untracked draft in the folder is not part of the commit. Reading the index and HEAD's
trees costs a few milliseconds per thousand files, where validating every file costs ~0.35 ms
per file. ``git commit -a`` and ``git commit PATH`` hand their hook a temporary index
(``GIT_INDEX_FILE``); the caller passes it as ``index_file``.
"""

from __future__ import annotations

import os
import stat
import zlib
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from qmem_git.core.index import IndexResult, build_index
from qmem_git.core.limits import MAX_FILE_BYTES
from qmem_git.core.model import Document
from qmem_git.errors import QmemError, RepoCorrupt
from qmem_git.store import gitindex
from qmem_git.store.relocate import repository
from qmem_git.store.repo import Repository
from qmem_git.store.walk import is_memory_path
from qmem_git.store.workdir import newest_documents


class StagedFile(NamedTuple):
    """One stage-0 index entry the commit would record."""

    path: str
    mode: int
    sha: str
    size: int
    mtime_ns: int


class Staged(NamedTuple):
    """``files``: every entry the commit would record, by path; ``changed``: those whose blob or
    mode differ from HEAD's; ``conflicted``: paths with an unresolved merge conflict."""

    files: dict[str, StagedFile]
    changed: list[StagedFile]
    conflicted: list[str]


class IndexNotReadable(QmemError):
    """The index uses a form this reader does not handle (split or sparse index, a linked
    worktree's ``.git`` file) or is damaged."""


def staged_changes(memory_root: str, index_file: str | None = None) -> Staged:
    """The entries of the index (``index_file``, else ``.git/index``) against HEAD's tree."""
    git_dir = repository(memory_root)
    if not os.path.isdir(git_dir):
        raise IndexNotReadable(
            f"{memory_root} has no .git folder (a linked worktree or not a repository)",
            hint="run it in the memory folder itself",
        )
    try:
        index = gitindex.read_index(git_dir, index_file)
    except gitindex.IndexUnreadable as exc:
        raise IndexNotReadable(
            f"the git index cannot be read here ({exc})",
            hint="check the whole folder with `qmem-git validate`",
        ) from exc
    files, conflicted = _entries(index)
    with Repository(memory_root) as repo:
        _, head = repo.head()
        if head is not None and index.head == head:  # our record: this index is HEAD's
            return Staged(files, [], conflicted)
        in_head = repo.flatten_entries(repo.tree_of(head))
    changed = [f for f in files.values() if in_head.get(f.path) != (f.mode, f.sha)]
    return Staged(files, changed, conflicted)


def _entries(index: gitindex.GitIndex) -> tuple[dict[str, StagedFile], list[str]]:
    files: dict[str, StagedFile] = {}
    conflicted: list[str] = []
    for key in index.entries:
        path, _, stage = key.partition("\0")
        if stage:
            if path not in conflicted:
                conflicted.append(path)
            continue
        entry = index.get(path)
        if entry is not None and not entry.intent_to_add:  # `git add -N`: not committed
            files[path] = StagedFile(path, entry.mode, entry.sha, entry.size, entry.mtime_ns)
    return files, conflicted


_READ_LIMIT = MAX_FILE_BYTES + 64  # a loose object's header included


def iter_blobs(memory_root: str, shas: Iterable[str]) -> Iterator[tuple[str, bytes | None]]:
    """``(id, content)`` of each blob, one at a time (a first commit may stage thousands);
    content None when a loose blob inflates past the memory-file size limit: the index's size
    field can be wrong, and a 300 MB blob must not be read to find out."""
    with Repository(memory_root, loose_limit=_READ_LIMIT) as repo:
        for sha in shas:
            yield sha, _read_within_limit(repo, sha)


def _read_within_limit(repo: Repository, sha: str) -> bytes | None:
    """A blob of a repository opened with ``loose_limit=_READ_LIMIT``; None past the limit."""
    try:
        return repo.read_blob(sha)
    except RepoCorrupt as exc:
        if not isinstance(exc.__cause__, zlib.error):  # missing or damaged: exit 6 as usual
            raise
        return None


def render_staged_index(memory_root: str, staged: Staged) -> IndexResult:
    """MEMORY.md for the memory files as staged, ordered by the times the index recorded for
    them (the work-tree times when they were staged), as ``store.workdir.render_index`` orders
    files on disk."""
    from qmem_git.core.codec import parse_document

    candidates = {
        rel: item
        for rel, item in staged.files.items()
        if is_memory_path(rel) and stat.S_ISREG(item.mode) and item.size <= MAX_FILE_BYTES
    }
    stats = {rel: (item.mtime_ns, item.size) for rel, item in candidates.items()}
    with Repository(memory_root, loose_limit=_READ_LIMIT) as repo:

        def load(rel: str, mtime_ns: int, size: int) -> Document | None:
            data = _read_within_limit(repo, candidates[rel].sha)
            try:
                text = None if data is None else data.decode("utf-8")
            except UnicodeDecodeError:
                return None
            return None if text is None else parse_document(text, rel, mtime_ns / 1_000_000)

        return build_index(newest_documents(stats, load))
