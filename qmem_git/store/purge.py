"""``purge``: rewrite the commits no remote has yet without some files, or without credentials.

History keeps what ``forget`` removes, and a push refuses any new commit that holds a secret
(``store.sync``), so a secret committed by hand would block every sync. Purge is the way out,
limited to what has not left the machine:

- the commits to rewrite are those ``main`` reaches and no remote-tracking ref
  (``refs/remotes/*/main``, where the last sync saw each remote) reaches; everything the
  remotes have stays as it is;
- in each of them, a purged path (``PATH``, or with ``secrets`` any file whose content holds a
  credential) takes the content it had in the commit's rewritten parent: a change made in the
  unpushed commits is dropped, a file they added is gone, every other file is kept. MEMORY.md
  loses the lines that link to a removed file (and, with ``secrets``, the lines that hold one);
  the new tip's MEMORY.md is rebuilt from the files;
- each rewritten commit keeps its author, committer, times and message (trailers included);
- the old tip stays findable: a backup ref ``refs/qmem/purged/<time>`` and the reflog;
- it runs under the writer lock after recovery, moves the work tree, then ``main`` (one
  compare-and-swap), then the git index, like a fast-forward: a purge killed midway leaves the
  old history in place (the next writer's recovery commits the work tree, purge runs again).

What a remote already has cannot be purged here: the result lists it (``leaked``) so the
caller can say plainly that the credential must be rotated and the remote rewritten.
"""

from __future__ import annotations

import stat
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dulwich.objects import Blob, Commit, ObjectID
from dulwich.refs import Ref

from qmem_git.core.index import drop_index_lines
from qmem_git.core.model import INDEX_NAME
from qmem_git.core.paths import Layout
from qmem_git.errors import RepoLocked
from qmem_git.store.repo import Repository, blob_id, update_index
from qmem_git.store.sync import (
    Objects,
    checkout,
    last_change_times,
    memory_files,
    secret_problem,
)
from qmem_git.store.workdir import FILE_MODE_BITS, atomic_write, render_index

BACKUP_PREFIX = "refs/qmem/purged/"


@dataclass(frozen=True)
class Removal:
    """One file version taken out of one commit: ``what`` is ``purged`` or the secret rule."""

    commit: str
    path: str
    what: str

    def as_dict(self) -> dict[str, str]:
        return {"commit": self.commit, "path": self.path, "what": self.what}


@dataclass(frozen=True)
class Leak:
    """A file version asked for that a remote already has (``commit`` is on ``remote``)."""

    remote: str
    commit: str
    path: str
    what: str

    def as_dict(self) -> dict[str, str]:
        return {"remote": self.remote, "commit": self.commit, "path": self.path, "what": self.what}


@dataclass
class PurgeResult:
    """What a purge did (or, with ``dry_run``, would do)."""

    dry_run: bool
    before: str | None
    head: str | None = None
    unpushed: int = 0
    rewritten: int = 0
    removals: list[Removal] = field(default_factory=list)
    leaked: list[Leak] = field(default_factory=list)
    backup: str | None = None
    changed_paths: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "before": self.before,
            "head": self.head,
            "unpushed_commits": self.unpushed,
            "rewritten_commits": self.rewritten,
            "removed": [r.as_dict() for r in self.removals],
            "already_on_remote": [r.as_dict() for r in self.leaked],
            "backup_ref": self.backup,
            "changed_paths": self.changed_paths,
        }


@dataclass(frozen=True)
class PurgeRequest:
    """``paths``: files or folders to take out; ``secrets``: every file holding a credential."""

    paths: tuple[str, ...] = ()
    secrets: bool = False

    def matches(self, path: str) -> bool:
        return any(path == p or path.startswith(p.rstrip("/") + "/") for p in self.paths)


def purge_locked(
    layout: Layout, request: PurgeRequest, *, now: datetime, dry_run: bool
) -> PurgeResult:
    """The purge, with the writer lock held and recovery done (see the module docstring)."""
    with Repository(layout.memory_root) as repo:
        return _Purge(repo, request).run(now, dry_run)


class _Purge:
    def __init__(self, repo: Repository, request: PurgeRequest) -> None:
        self.repo = repo
        self.request = request
        self.objects = Objects(repo.objects)
        self.secret_of: dict[str, str | None] = {}  # blob id -> its secret problem
        self.mapped: dict[str, str] = {}  # old commit -> rewritten commit
        self.changes: dict[str, dict[str, str | None]] = {}  # old commit -> path -> new blob
        self.rewritten: set[str] = set()  # the old commits that change
        self.made: dict[str, bytes] = {}  # new MEMORY.md blobs (a dry run stores none)

    def run(self, now: datetime, dry_run: bool) -> PurgeResult:
        branch, head = self.repo.head()
        result = PurgeResult(dry_run, head, head)
        remotes = self.repo.remote_tips()
        pushed: set[str] = set()
        result.leaked = self._leaked(remotes, pushed)
        if head is None:
            return result
        unpushed = _parents_first(self.objects, head, pushed)  # exact: pushed is the whole walk
        result.unpushed = len(unpushed)
        for sha in unpushed:
            self._rewrite(sha, result, dry_run)
        result.rewritten = len(self.rewritten)
        if not result.rewritten:
            return result
        result.changed_paths = sorted({r.path for r in result.removals})
        if dry_run:
            return result
        result.head = self._switch(branch, head, now, result)
        return result

    # what the remotes have

    def _leaked(self, remotes: dict[str, str], seen: set[str]) -> list[Leak]:
        """What the remotes' histories (as last seen) already hold of what was asked for: each
        commit's own changes are read once, each blob scanned once; MEMORY.md is not (it only
        repeats the descriptions of the files, which are). ``seen`` gets every commit a remote
        has."""
        leaked: list[Leak] = []
        found: set[tuple[str, str]] = set()
        for name, tip in sorted(remotes.items()):
            stack = [tip]
            while stack:
                sha = stack.pop()
                if sha in seen:
                    continue
                seen.add(sha)
                commit = self.objects.commit(sha)
                parents = [_hex(p) for p in commit.parents]
                stack.extend(parents)
                for path, blob, what in self._asked(_hex(commit.tree), parents):
                    if (path, blob) not in found:
                        found.add((path, blob))
                        leaked.append(Leak(name, sha, path, what))
        return leaked

    def _asked(self, tree: str, parents: list[str]) -> Iterator[tuple[str, str, str]]:
        """(path, blob, why) of what a commit with ``tree`` introduced that is to be purged
        (MEMORY.md never is: it is rebuilt)."""
        parent_trees = [self.objects.tree_of(p) for p in parents]
        for path, blob in _introduced(self.objects, tree, parent_trees):
            what = self._wanted(path, blob) if path != INDEX_NAME else None
            if what is not None:
                yield path, blob, what

    def _wanted(self, path: str, sha: str) -> str | None:
        """Why ``path`` with blob ``sha`` is purged, else None."""
        if self.request.matches(path):
            return "purged"
        if self.request.secrets:
            if sha not in self.secret_of:
                problem = secret_problem(path, self._read(sha))
                self.secret_of[sha] = problem.split(";")[0] if problem else None
            return self.secret_of[sha]
        return None

    # the rewrite

    def _rewrite(self, sha: str, result: PurgeResult, dry_run: bool) -> None:
        commit = self.objects.commit(sha)
        parents = [_hex(p) for p in commit.parents]
        tree = _hex(commit.tree)
        todo = {path: what for path, _, what in self._asked(tree, parents)}  # why, per path
        inherited = {path for p in parents for path in self.changes.get(p, {})}
        changes: dict[str, str | None] = {}
        for path in sorted({*todo, *inherited} - {INDEX_NAME}):
            value = self._value(tree, parents, path, purged=path in todo)
            if value != self.objects.lookup(tree, path):
                changes[path] = value
                if path in todo:
                    result.removals.append(Removal(sha, path, todo[path]))
        self._fix_index(sha, tree, parents, changes, dry_run)
        self.changes[sha] = changes
        if not changes and not self.rewritten.intersection(parents):
            return
        self.rewritten.add(sha)
        if not dry_run:
            new_tree = self.repo.build_tree(tree, changes)
            new_parents = [self.mapped.get(p, p) for p in parents]
            self.mapped[sha] = self._copy(commit, new_tree, new_parents)

    def _value(self, tree: str, parents: list[str], path: str, *, purged: bool) -> str | None:
        """The blob ``path`` gets: the rewritten parent's it came from (the first parent's
        when the commit itself changed it), else its own."""
        own = self.objects.lookup(tree, path)
        for parent in parents:
            if self.objects.lookup(self.objects.tree_of(parent), path) == own:
                return self._new_blob(parent, path)
        if purged:
            return self._new_blob(parents[0], path) if parents else None
        return own

    def _new_blob(self, commit: str, path: str) -> str | None:
        changes = self.changes.get(commit, {})
        if path in changes:
            return changes[path]
        return self.objects.lookup(self.objects.tree_of(commit), path)

    def _fix_index(
        self,
        sha: str,
        tree: str,
        parents: list[str],
        changes: dict[str, str | None],
        dry_run: bool,
    ) -> None:
        """MEMORY.md without the lines of the removed files (and, for secrets, of credentials)."""
        own = self.objects.lookup(tree, INDEX_NAME)
        if own is None:
            return
        current = self._value(tree, parents, INDEX_NAME, purged=False)
        removed = [p for p, v in changes.items() if v is None]
        holds_secret = self.request.secrets and self._wanted(INDEX_NAME, own) is not None
        if not removed and not holds_secret and current == own:
            return
        source = own if holds_secret else current
        text = "" if source is None else self._read(source).decode("utf-8", "replace")
        fixed = drop_index_lines(text, removed, secrets=self.request.secrets).encode("utf-8")
        value = blob_id(fixed)
        if value != own:
            self.made[value] = fixed
            if not dry_run:
                self.repo.add(Blob.from_string(fixed))
            changes[INDEX_NAME] = value

    def _read(self, sha: str) -> bytes:
        made = self.made.get(sha)
        return made if made is not None else self.objects.blob(sha)

    def _copy(self, commit: Commit, tree: str, parents: list[str]) -> str:
        """``commit`` with another tree and parents; author, committer, times and message kept."""
        new = Commit()
        new.tree = _oid(tree)
        new.parents = [_oid(p) for p in parents]
        new.author, new.committer = commit.author, commit.committer
        new.author_time, new.commit_time = commit.author_time, commit.commit_time
        new.author_timezone = commit.author_timezone
        new.commit_timezone = commit.commit_timezone
        new.message = commit.message
        if commit.encoding:
            new.encoding = commit.encoding
        return self.repo.add(new)

    # the switch: work tree, backup ref, branch, git index

    def _switch(self, branch: Ref, head: str, now: datetime, result: PurgeResult) -> str:
        new_head = self.mapped[head]
        objects = Objects(self.repo.objects)
        old = memory_files(objects.files(head))
        new = memory_files(objects.files(new_head))
        times = last_change_times(objects, new_head, list(new))
        touched = checkout(self.repo, old, new, times, objects.blob)
        new_head = self._rebuild_index(objects, new_head, touched)
        backup = f"{BACKUP_PREFIX}{now.strftime('%Y%m%dT%H%M%SZ')}-{head[:12]}"
        self.repo.refs.add_if_new(Ref(backup.encode()), _oid(head), message=b"qmem-git purge")
        result.backup = backup
        message = f"purge: rewrote {result.rewritten} unpushed commit(s)"
        if not self.repo.move_branch(branch, head, new_head, message):
            raise RepoLocked(
                "the memory branch moved while qmem-git was purging",
                hint="another program committed in the memory folder; run the purge again",
            )
        update_index(self.repo, touched, new_head)
        return new_head

    def _rebuild_index(self, objects: Objects, head: str, touched: dict[str, str | None]) -> str:
        """The tip with MEMORY.md rebuilt from the files now on disk (a new tip if it changed)."""
        commit = objects.commit(head)
        data = render_index(self.repo.root).text.encode("utf-8")
        sha = self.repo.add(Blob.from_string(data))
        path = f"{self.repo.root}/{INDEX_NAME}"
        atomic_write(path, data, commit.commit_time * 1_000_000_000, mode=FILE_MODE_BITS)
        touched[INDEX_NAME] = sha
        tree = _hex(commit.tree)
        if objects.lookup(tree, INDEX_NAME) == sha:
            return head
        new_tree = self.repo.build_tree(tree, {INDEX_NAME: sha})
        parents = [_hex(p) for p in commit.parents]
        return self._copy(commit, new_tree, parents)


def _introduced(
    objects: Objects, tree: str, parents: list[str | None], prefix: str = ""
) -> Iterator[tuple[str, str]]:
    """(path, blob) of the files in ``tree`` whose blob differs from every parent's at that
    path; subtrees equal to a parent's are not read."""
    if tree in parents:
        return
    views = [objects.entries(p) if p else {} for p in parents]
    for raw, mode, sha in objects.entries(tree).values():
        path = prefix + raw.decode("utf-8", "surrogateescape")
        same = [view.get(raw) for view in views]
        if stat.S_ISDIR(mode):
            subtrees = [_hex(s[2]) if s and stat.S_ISDIR(s[1]) else None for s in same]
            yield from _introduced(objects, _hex(sha), subtrees, path + "/")
        elif not any(s is not None and s[2] == sha for s in same):
            yield path, _hex(sha)


def _parents_first(objects: Objects, head: str, pushed: Collection[str]) -> list[str]:
    """The commits ``head`` reaches that are not in ``pushed``, every parent before its
    children."""
    order: list[str] = []
    done: set[str] = set()
    stack: list[tuple[str, bool]] = [(head, False)]
    while stack:
        sha, expanded = stack.pop()
        if sha in done or sha in pushed:
            continue
        if expanded:
            done.add(sha)
            order.append(sha)
            continue
        stack.append((sha, True))
        stack.extend((_hex(p), False) for p in objects.commit(sha).parents)
    return order


def _hex(sha: bytes) -> str:
    return sha.decode("ascii")


def _oid(sha: str) -> ObjectID:
    return ObjectID(sha.encode("ascii"))
