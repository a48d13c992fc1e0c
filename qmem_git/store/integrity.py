"""``doctor``'s object check: read everything HEAD needs, as a clone or an undo would.

Every commit in HEAD's history and every tree and blob of HEAD's tree is read through
``store.repo.Repository``, which verifies each object's content against its id, so a damaged
(truncated, overwritten) or missing object is found before a command trips over it.
"""

from __future__ import annotations

import stat
from typing import NamedTuple

from dulwich.objects import Blob, Commit, Tree

from qmem_git.errors import RepoCorrupt
from qmem_git.store.repo import Repository


class ObjectReport(NamedTuple):
    commits: int
    files: int
    problems: tuple[str, ...]  # the first few, each one message


def check_objects(memory_root: str, max_problems: int = 5) -> ObjectReport:
    """Read HEAD's history and HEAD's tree; report what cannot be read (RepoCorrupt messages)."""
    problems: list[str] = []
    with Repository(memory_root) as repo:
        try:
            _, head = repo.head()
        except RepoCorrupt as exc:
            return ObjectReport(0, 0, (exc.message,))
        commits = _walk_commits(repo, head, problems)
        files = 0
        if head is not None and not problems:
            files = _walk_tree(repo, repo.read_object(head, Commit).tree.decode("ascii"), problems)
    return ObjectReport(commits, files, tuple(problems[:max_problems]))


def _walk_commits(repo: Repository, head: str | None, problems: list[str]) -> int:
    seen: set[str] = set()
    stack = [head] if head else []
    while stack:
        sha = stack.pop()
        if sha in seen:
            continue
        seen.add(sha)
        try:
            commit = repo.read_object(sha, Commit)
        except RepoCorrupt as exc:
            problems.append(exc.message)
            continue
        stack += [parent.decode("ascii") for parent in commit.parents]
    return len(seen)


def _walk_tree(repo: Repository, tree: str, problems: list[str]) -> int:
    files = 0
    stack = [tree]
    while stack:
        try:
            current = repo.read_object(stack.pop(), Tree)
        except RepoCorrupt as exc:
            problems.append(exc.message)
            continue
        for _name, mode, sha in current.iteritems():
            if stat.S_ISDIR(mode):
                stack.append(sha.decode("ascii"))
                continue
            files += 1
            if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
                try:
                    repo.read_object(sha.decode("ascii"), Blob)
                except RepoCorrupt as exc:
                    problems.append(exc.message)
    return files
