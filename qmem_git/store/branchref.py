"""A missing or damaged ``main`` in a repository that has history: an error, never a new root.

Deleting ``.git/refs/heads/main`` (or emptying it) makes the branch look unborn, and a writer
would then start a new history whose first commit has no parent: the old commits, forgotten
memories included, become unreachable. A branch is unborn only in a repository without
history of its own; otherwise it is *lost*, which is :class:`BranchLost` (exit 6) naming the
commit to point it back at, and ``qmem-git doctor --fix`` does that.

The commit is found, in this order, from: the record of the commit the git index was last
written for (``.git/qmem-index``, written after every commit qmem-git makes); the branch's
reflog (C git keeps one); the newest commit of the object store that no other commit has as a
parent, among those no other ref (a remote-tracking branch, a tag) reaches. A lone root commit
reached by nothing is the first commit of a writer killed before it set the branch: no
history yet, so a new first commit is made.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from dulwich.objects import Commit, ObjectID, valid_hexsha
from dulwich.refs import HEADREF, Ref

from qmem_git.errors import BranchLost
from qmem_git.store.gitindex import recorded_head

if TYPE_CHECKING:
    from collections.abc import Callable

    from dulwich.object_store import BaseObjectStore
    from dulwich.refs import RefsContainer

    StoreOpener = Callable[[], BaseObjectStore]

_COMMIT_TYPE = Commit.type_num
_LOOSE_LIMIT = 1 << 20  # a commit is small; a bigger loose object is no commit of ours


class _Objects:
    """Commits by id: loose ones read by ``store.loose`` (no ``dulwich.object_store`` import
    for a repository's first commit), packed ones through the full store, opened only when
    there are packs."""

    def __init__(self, git_dir: str, open_store: StoreOpener) -> None:
        self.objects_dir = os.path.join(git_dir, "objects")
        self._open_store = open_store
        pack_dir = os.path.join(self.objects_dir, "pack")
        try:
            self.packed = any(name.endswith(".pack") for name in os.listdir(pack_dir))
        except OSError:
            self.packed = False

    def commit(self, sha: bytes) -> Commit | None:
        from qmem_git.store.loose import read_loose

        obj = read_loose(self.objects_dir, sha.decode("ascii"), _LOOSE_LIMIT)
        if obj is None and self.packed:
            try:
                obj = self._open_store()[ObjectID(sha)]
            except Exception:  # missing (KeyError) or damaged: no commit to restore
                return None
        return obj if isinstance(obj, Commit) else None

    def all_commits(self) -> dict[bytes, Commit]:
        """Every readable commit (damaged objects are skipped)."""
        found: dict[bytes, Commit] = {}
        for sha in self._loose_ids():
            commit = self.commit(sha)
            if commit is not None:
                found[sha] = commit
        if self.packed:
            found.update(_packed_commits(self._open_store(), found))
        return found

    def _loose_ids(self) -> list[bytes]:
        ids: list[bytes] = []
        try:
            fans = [name for name in os.listdir(self.objects_dir) if len(name) == 2]
        except OSError:
            return ids
        for fan in fans:
            try:
                names = os.listdir(os.path.join(self.objects_dir, fan))
            except OSError:
                continue
            ids += [(fan + name).encode("ascii") for name in names if valid_hexsha(fan + name)]
        return ids


def _packed_commits(store: BaseObjectStore, known: dict[bytes, Commit]) -> dict[bytes, Commit]:
    found: dict[bytes, Commit] = {}
    try:
        shas = list(store)
    except Exception:
        return found
    for sha in shas:
        if bytes(sha) in known or bytes(sha) in found:
            continue
        try:
            kind, raw = store.get_raw(sha)
            if kind == _COMMIT_TYPE:
                commit = Commit.from_raw_string(kind, raw, sha)
                assert isinstance(commit, Commit)
                found[bytes(sha)] = commit
        except Exception:
            continue
    return found


def check_unborn(git_dir: str, refs: RefsContainer, open_store: StoreOpener, branch: Ref) -> None:
    """Return when ``branch`` may be born by the next commit; else raise :class:`BranchLost`.
    ``open_store``: dulwich's full object store, asked for only when there are packs."""
    if refs.read_loose_ref(branch) is not None:  # the file is there, holding nothing
        raise lost_branch(git_dir, refs, open_store, branch, "is empty")
    if (commit := recovery_commit(git_dir, refs, open_store, branch)) is not None:
        raise lost_branch(git_dir, refs, open_store, branch, "is missing", commit)


def lost_branch(
    git_dir: str,
    refs: RefsContainer,
    open_store: StoreOpener,
    branch: Ref,
    problem: str,
    commit: str | None = None,
) -> BranchLost:
    """The error for ``branch`` that ``problem`` (is missing, is empty, holds ...); ``commit``:
    its :func:`recovery_commit` when the caller has already looked for it (the search reads
    every object)."""
    name = branch.decode("utf-8", "replace")
    if commit is None:
        commit = recovery_commit(git_dir, refs, open_store, branch)
    message = f"memory repository is corrupt: {name} {problem}"
    if commit is None:
        hint = (
            "no commit of its history was found; restore the memory folder from a clone "
            "(qmem-git clone URL) or a backup"
        )
        return BranchLost(message, hint=hint)
    hint = (
        f"its newest commit is {commit[:12]}; run `qmem-git doctor --fix` to point {name} back "
        f"at it (or: qmem-git git update-ref {name} {commit})"
    )
    return BranchLost(f"{message}, though the repository has history", hint=hint, commit=commit)


def recovery_commit(
    git_dir: str, refs: RefsContainer, open_store: StoreOpener, branch: Ref
) -> str | None:
    """The commit ``branch`` should point at (see the module doc), None without history."""
    objects = _Objects(git_dir, open_store)
    for candidate in (recorded_head(git_dir), *_reflog_tips(git_dir, branch)):
        if candidate is not None and objects.commit(candidate.encode("ascii")) is not None:
            return candidate
    return _newest_local_tip(refs, objects, branch)


def _reflog_tips(git_dir: str, branch: Ref) -> list[str]:
    """The newest value of ``branch``, then of HEAD, in their reflogs."""
    found = []
    for name in (branch, HEADREF):
        path = os.path.join(git_dir, "logs", os.fsdecode(name))
        try:
            with open(path, "rb") as handle:
                lines = handle.read().splitlines()
        except OSError:
            continue
        for line in reversed(lines):
            fields = line.split(b" ", 2)
            if len(fields) > 1 and valid_hexsha(fields[1]) and fields[1] != b"0" * 40:
                found.append(fields[1].decode("ascii"))
                break
    return found


def _newest_local_tip(refs: RefsContainer, objects: _Objects, branch: Ref) -> str | None:
    """The newest commit no other commit has as a parent, among those no other ref reaches;
    None when there is none, or only a lone root commit (an interrupted first commit)."""
    commits = objects.all_commits()
    elsewhere = _reached(commits, _other_ref_values(refs, branch))
    local = {sha: commit for sha, commit in commits.items() if sha not in elsewhere}
    if not local or (len(local) == 1 and not next(iter(local.values())).parents):
        return None
    parents = {parent for commit in local.values() for parent in commit.parents}
    tips = [sha for sha in local if sha not in parents]
    newest = max(tips, key=lambda sha: (local[sha].commit_time, sha))
    return newest.decode("ascii")


def _other_ref_values(refs: RefsContainer, branch: Ref) -> list[bytes]:
    values: list[bytes] = []
    try:
        names = [name for name in refs.allkeys() if name not in (branch, HEADREF)]
    except Exception:
        return values
    for name in names:
        try:
            values.append(bytes(refs[name]))
        except Exception:
            continue
    return values


def _reached(commits: dict[bytes, Commit], starts: list[bytes]) -> set[bytes]:
    """Commits reachable from ``starts`` (tags count as the commit they point at)."""
    seen: set[bytes] = set()
    stack = [sha for sha in starts if sha in commits]
    while stack:
        sha = stack.pop()
        if sha in seen:
            continue
        seen.add(sha)
        stack.extend(parent for parent in commits[sha].parents if parent in commits)
    return seen


def restore_branch(root: str) -> tuple[str, str] | None:
    """Point a lost ``main`` back at its newest commit (``doctor --fix``); (branch, commit),
    or None when the branch is fine or nothing was found. Call under the writer lock."""
    from qmem_git.store.repo import BRANCH, Repository

    with Repository(root) as repo:
        try:
            repo.head()
            return None
        except BranchLost as exc:
            commit = exc.commit
        if commit is None:
            return None
        branch = Ref(BRANCH)
        repo.refs.set_if_equals(branch, None, ObjectID(commit.encode("ascii")))
        return branch.decode(), commit
