"""Sharing memory between machines: remotes, ``sync``, ``clone`` and ``init --remote``.

Each function is what one CLI command calls; all take ``Settings`` (the environment was read
once by the CLI: ``QMEM_GIT_USERNAME`` / ``QMEM_GIT_TOKEN`` for HTTP Basic auth,
``QMEM_GIT_TIMEOUT`` for the network timeout in seconds) and return data, never print.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from qmem_git.core.model import INDEX_NAME
from qmem_git.errors import QmemError
from qmem_git.ops.required import require_store
from qmem_git.settings import Settings
from qmem_git.store import remotes
from qmem_git.store.recovery import RecoveryReport
from qmem_git.store.relocate import repository
from qmem_git.store.remotes import Credentials, Remote, Transport
from qmem_git.store.repo import Identity, init_repo
from qmem_git.store.state import ensure_scaffold
from qmem_git.store.sync import (
    Locker,
    SyncOptions,
    SyncResult,
    adopt_remote,
    sync_remote,
    tree_has_memories,
    writer_locker,
)
from qmem_git.store.walk import check_store
from qmem_git.store.workdir import iter_memory_files

if TYPE_CHECKING:
    from qmem_git.store.asis import AsIsResult

Progress = Callable[[str], None]


class SyncOutcome(NamedTuple):
    """A sync's result plus what recovery committed or repaired before it (Claude Code's
    folder: what it committed as is, ``snapshot``)."""

    result: SyncResult
    recovery: RecoveryReport | None = None
    snapshot: str | None = None

    def as_dict(self) -> dict[str, Any]:
        data = self.result.as_dict()
        data["recovered_commit"] = self.recovery.commit if self.recovery else None
        data["snapshot_commit"] = self.snapshot
        return data


class CloneOutcome(NamedTuple):
    """``mode``: ``cloned`` (adopted the remote's history), ``merged``, ``pushed``, or the
    sync's action when there was nothing to merge or push (``up-to-date``, ``fast-forward``)."""

    memory_root: str
    remote: Remote
    mode: str
    result: SyncResult

    def as_dict(self) -> dict[str, Any]:
        return {
            "memory_root": self.memory_root,
            "remote": self.remote.as_dict(),
            "mode": self.mode,
            **{k: v for k, v in self.result.as_dict().items() if k not in ("remote", "url")},
        }


# --- settings ---------------------------------------------------------------------------------


def credentials_for(settings: Settings) -> Credentials:
    env = settings.env
    return Credentials(
        env.get("QMEM_GIT_USERNAME") or None,
        env.get("QMEM_GIT_TOKEN") or env.get("QMEM_GIT_PASSWORD") or None,
    )


def timeout_for(settings: Settings) -> float:
    try:
        value = float(settings.env.get("QMEM_GIT_TIMEOUT", ""))
    except ValueError:
        return remotes.DEFAULT_TIMEOUT
    return value if value > 0 else remotes.DEFAULT_TIMEOUT


def _git_dir(settings: Settings) -> str:
    return repository(settings.layout.memory_root)


def _transport_factory(
    settings: Settings, remote: Remote, branch: str | None = None
) -> Callable[[bool], Transport]:
    """Transports to ``remote``, syncing its ``main`` or (a hub's) ``branch``."""

    def open_for(for_push: bool) -> Transport:
        transport = _open_transport(for_push)
        return transport._replace(branch=f"refs/heads/{branch}".encode()) if branch else transport

    def _open_transport(for_push: bool) -> Transport:
        return remotes.open_transport(
            remote.url,
            credentials=credentials_for(settings),
            # C git run for credentials reads this repository's config, never the .git an
            # agent may have left in the folder the command runs in
            env={**settings.env, "GIT_DIR": _git_dir(settings)},
            timeout=timeout_for(settings),
            for_push=for_push,
        )

    return open_for


# --- remotes ----------------------------------------------------------------------------------


def add_remote(settings: Settings, name: str, url: str) -> Remote:
    """``remote add``: local paths are stored absolute; the URL is not contacted."""
    require_store(settings)  # never a remote in a project's own .git/config
    normalized = remotes.normalize_url(url, settings.cwd)
    return remotes.add_remote(_git_dir(settings), name, normalized)


def remove_remote(settings: Settings, name: str) -> Remote:
    require_store(settings)
    return remotes.remove_remote(_git_dir(settings), name)


def list_remotes(settings: Settings) -> list[Remote]:
    """The remotes (an empty list when the store has no repository yet)."""
    if not os.path.isdir(_git_dir(settings)):
        return []
    return remotes.list_remotes(_git_dir(settings))


# --- sync -------------------------------------------------------------------------------------


def run_sync(
    settings: Settings,
    now: datetime,
    *,
    remote: str | None = None,
    dry_run: bool = False,
    push: bool = True,
    force: bool = False,
    progress: Progress | None = None,
    branch: str | None = None,
    via: Remote | None = None,
) -> SyncOutcome:
    """Fetch, fast-forward or merge, push; one merge commit at most (exit 5 on network errors).

    ``via`` and ``branch``: a remote that is not in the store's config (the hub) and the branch
    of it this store syncs. Claude Code's folder: its changes are committed as they are first
    (``store.asis``), and its MEMORY.md, Claude's own, is merged by lines, never rebuilt."""
    require_store(settings)
    if via is None:
        git_dir = _git_dir(settings)
        via = remotes.get_remote(git_dir, remote) if remote else remotes.default_remote(git_dir)
    options = _options(settings, dry_run=dry_run, push=push, force=force)
    identity = _identity(settings)
    snapshots: list[AsIsResult] = []
    result, report = sync_remote(
        settings.layout,
        via.name,
        _transport_factory(settings, via, branch),
        options,
        identity=identity,
        host=settings.host,
        now=now,
        lock=_locker(settings, identity, now, snapshots),
        progress=progress,
    )
    return SyncOutcome(result, report, snapshots[0].commit if snapshots else None)


def _identity(settings: Settings) -> Identity:
    # ops.runner and ops.lifecycle import the writer, the index and their modules at load
    # time: a push needs none of them (~10 ms), so they are imported where they are used
    from qmem_git.ops.runner import identity_for

    return identity_for(settings)


def _options(
    settings: Settings, *, dry_run: bool = False, push: bool = True, force: bool = False
) -> SyncOptions:
    """What a sync of this store does: Claude Code's MEMORY.md is Claude's, taken as is."""
    return SyncOptions(
        dry_run=dry_run,
        push=push,
        force=force,
        timeout=timeout_for(settings),
        index_as_is=settings.agent == "claude",
    )


def _locker(
    settings: Settings,
    identity: Identity,
    now: datetime,
    snapshots: list[AsIsResult] | None = None,
) -> Locker:
    """The writer lock as a sync takes it: one short tenure per phase that writes; in
    Claude Code's folder, committing what is there as is (into ``snapshots``) instead of Qwen
    Code's recovery."""
    if settings.agent == "claude":
        taken = [] if snapshots is None else snapshots

        from qmem_git.store.asis import as_is_tenure

        def lock(recover: bool) -> contextlib.AbstractContextManager[RecoveryReport | None]:
            return as_is_tenure(
                settings.layout,
                identity=identity,
                host=settings.host,
                now=now,
                lock_timeout=settings.lock_timeout,
                recover=recover,
                snapshots=taken,
            )

        return lock
    return writer_locker(
        settings.layout,
        identity=identity,
        host=settings.host,
        now=now,
        lock_timeout=settings.lock_timeout,
    )


# --- clone and init --remote ------------------------------------------------------------------


def run_clone(
    settings: Settings,
    url: str,
    now: datetime,
    *,
    merge: bool = False,
    name: str = remotes.DEFAULT_REMOTE,
    progress: Progress | None = None,
) -> CloneOutcome:
    """Create this project's memory from a remote; an existing store needs ``merge=True``."""
    layout = settings.layout
    check_store(layout)  # another project's folder is never cloned into
    if has_local_memories(settings) and not merge:
        raise QmemError(
            f"{layout.memory_root} already holds memories",
            "use `qmem-git clone --merge URL` to merge them with the remote's",
        )
    return connect(settings, url, now, name=name, progress=progress)


def connect(
    settings: Settings,
    url: str,
    now: datetime,
    *,
    name: str = remotes.DEFAULT_REMOTE,
    progress: Progress | None = None,
) -> CloneOutcome:
    """Attach a remote to this store: adopt its history when the store is empty, else sync.

    Used by ``clone`` and ``init --remote``. An empty store takes the remote's commits as they
    are (no merge commit); one with memories merges them in and pushes the result; an empty
    remote receives the local history.
    """
    normalized = remotes.normalize_url(url, settings.cwd)
    prepare_store(settings, now)
    known = {remote.name for remote in remotes.list_remotes(_git_dir(settings))}
    remote = _ensure_remote(settings, name, normalized)
    try:
        return attach(settings, remote, now, progress)
    except BaseException:
        if name not in known:  # a failed clone takes back the remote it added: retry works
            with contextlib.suppress(QmemError, OSError):
                remotes.remove_remote(_git_dir(settings), name)
        raise


def prepare_store(settings: Settings, now: datetime) -> None:
    """The store's repository (and, for Qwen's folders, its scaffold); nothing is written into
    Claude Code's folder."""
    layout = settings.layout
    if settings.agent == "claude":
        from qmem_git.ops.claude import init_claude

        check_store(layout)
        init_claude(settings)
    else:
        from qmem_git.ops.lifecycle import hook_command

        ensure_scaffold(layout, now)
        init_repo(layout, hook_command())


def attach(
    settings: Settings,
    remote: Remote,
    now: datetime,
    progress: Progress | None,
    branch: str | None = None,
) -> CloneOutcome:
    """Adopt ``remote``'s history (its ``branch``, default main) when the store is empty, else
    commit what is here and sync. ``remote`` need not be in the store's config (the hub)."""
    root = settings.layout.memory_root
    if not has_local_memories(settings):
        adopted = _adopt(settings, remote, now, progress, branch)
        if adopted.action == "cloned":
            return CloneOutcome(root, remote, "cloned", adopted)
    if settings.agent != "claude":  # Claude's folder: the sync commits it as it is first
        from qmem_git.ops.lifecycle import commit_existing

        commit_existing(settings, now)
    result = run_sync(settings, now, via=remote, branch=branch, progress=progress).result
    mode = "merged" if result.merge_commit else result.action
    return CloneOutcome(root, remote, mode, result)


def _adopt(
    settings: Settings,
    remote: Remote,
    now: datetime,
    progress: Progress | None,
    branch: str | None = None,
) -> SyncResult:
    identity = _identity(settings)
    return adopt_remote(
        settings.layout,
        remote.name,
        _transport_factory(settings, remote, branch),
        _options(settings),
        identity=identity,
        host=settings.host,
        now=now,
        lock=_locker(settings, identity, now),
        progress=progress,
    )


def _ensure_remote(settings: Settings, name: str, url: str) -> Remote:
    """Add the remote, or accept an existing one with the same URL."""
    git_dir = _git_dir(settings)
    for remote in remotes.list_remotes(git_dir):
        if remote.name == name:
            if remote.url != url:
                raise QmemError(
                    f"remote {name!r} already points at {remote.display_url}",
                    f"run `qmem-git remote remove {name}` first, or `qmem-git sync {name}`",
                )
            return remote
    return remotes.add_remote(git_dir, name, url)


def has_local_memories(settings: Settings) -> bool:
    """Memory documents in the work tree or in HEAD (an empty MEMORY.md does not count; in
    Claude Code's folder, MEMORY.md is Claude's own and counts unless empty)."""
    root = settings.layout.memory_root
    claude = settings.agent == "claude"
    if next(iter_memory_files(root), None) is not None:
        return True
    if claude and _size(os.path.join(root, INDEX_NAME)):
        return True
    if not os.path.isdir(repository(root)):
        return False
    from qmem_git.ops.lifecycle import has_commits

    return has_commits(root) and (claude or tree_has_memories(settings.layout))


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


# --- text for the CLI -------------------------------------------------------------------------


def sync_summary(result: SyncResult) -> str:
    """What a sync did, in a few lines (the CLI prints it; ``--json`` uses ``as_dict``)."""
    remote, head = result.remote, (result.head or "")[:12]
    theirs = (result.remote_head or "")[:12]
    if result.dry_run:
        done = {
            "fast-forward": f"Would fast-forward to {theirs} from {remote}",
            "pushed": f"Would push {head} to {remote}",
            "merged": f"Would merge {remote}/main into {head}",
            "ahead": f"{head} is ahead of {remote}; would not push (--no-push)",
        }
    else:
        pushed = f", pushed to {remote}" if result.pushed else " (not pushed)"
        done = {
            "fast-forward": f"Fast-forwarded to {head} from {remote}"
            if result.index_commit is None
            else f"Fast-forwarded from {remote}",
            "pushed": f"Pushed {head} to {remote}",
            "merged": f"Merged {remote}/main as {head}{pushed}",
            "ahead": f"{head} is ahead of {remote} (not pushed)",
        }
    done["up-to-date"] = f"Already up to date with {remote} ({head or 'no commits'})"
    done["empty"] = f"{remote} and this memory store are both empty"
    lines = [done.get(result.action, result.action)]
    changed = memory_paths(result.changed_paths)
    if changed:
        lines.append(f"  {len(changed)} file(s) changed")
    lines += [f"  reconciled {note.path}: {note.detail}" for note in result.reconciled]
    lines += index_lines(result)
    return "\n".join(lines)


def memory_paths(paths: list[str]) -> list[str]:
    """The memory files among ``paths``: MEMORY.md is generated, so it is not counted."""
    return [path for path in paths if path != INDEX_NAME]


def index_lines(result: SyncResult) -> list[str]:
    if result.index_commit is None:
        return []
    pushed = f", pushed to {result.remote}" if result.pushed else " (not pushed)"
    return [f"  MEMORY.md was stale; rebuilt it as {result.index_commit[:12]}{pushed}"]


def clone_summary(outcome: CloneOutcome) -> str:
    verbs = {
        "cloned": "Cloned",
        "merged": "Merged local memories with",
        "pushed": "Pushed local memories to",
        "fast-forward": "Fast-forwarded local memories from",
        "up-to-date": "Already up to date with",
    }
    head = (outcome.result.head or "")[:12]
    line = (
        f"{verbs.get(outcome.mode, outcome.mode)} {outcome.remote.name} "
        f"({outcome.remote.display_url}) in {outcome.memory_root}" + (f" at {head}" if head else "")
    )
    return "\n".join([line, *index_lines(outcome.result)])
