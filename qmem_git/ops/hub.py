"""The hub: one remote for every store of this machine, one branch per store.

The hub's branch of a store (named from its project, ``core.hubnames``), the hub URL's check
(``hub set``), one store's sync through the hub (the ordinary engine, ``store.sync``, with the
store's branch instead of ``main``), and the hub's branch list (``hub show``). Syncing several
stores at once is :mod:`qmem_git.ops.hubjobs`.
"""

from __future__ import annotations

import os
from datetime import datetime

from qmem_git.core.hubnames import project_identity, store_branch
from qmem_git.core.paths import sanitize
from qmem_git.errors import UsageError
from qmem_git.ops.sync import (
    Progress,
    SyncOutcome,
    attach,
    credentials_for,
    prepare_store,
    run_sync,
    timeout_for,
)
from qmem_git.settings import Settings
from qmem_git.store import hubstore, remotes
from qmem_git.store.relocate import repository
from qmem_git.store.remotes import Remote
from qmem_git.store.sync import SyncResult

NO_HUB_HINT = "set one with `qmem-git hub set URL` (a bare repository, git://, https:// or ssh)"

# --- the setting ------------------------------------------------------------------------------


def check_hub_url(url: str, cwd: str) -> str:
    """Normalise and check ``url`` as ``remote add`` does (no network); refuse a password."""
    from urllib.parse import urlsplit

    normalized = remotes.normalize_url(url, cwd)
    if "://" in normalized and urlsplit(normalized).password is not None:
        raise UsageError(
            f"{remotes.redact(normalized)} holds a password; the hub setting never stores one",
            "give the URL without it and set QMEM_GIT_USERNAME / QMEM_GIT_TOKEN, or use a "
            "git credential helper",
        )
    return normalized


def branch_for(kind: str, settings: Settings, project_root: str | None = None) -> str:
    """The hub branch of the store ``kind`` (``project``, ``user``, ``claude``)."""
    if kind == "user":
        return store_branch("user", None, "")
    project = project_root or settings.layout.project_root
    if not project:
        raise UsageError(
            f"{settings.layout.memory_root} belongs to no known project, so it has no hub branch",
            "run `qmem-git sync` once inside the project, or add a remote of its own",
        )
    url = hubstore.origin_url(project)
    identity = project_identity(url) if url else ""
    return store_branch(kind, identity or None, _path_key(settings, project))


def _path_key(settings: Settings, project: str) -> str:
    """The store's folder name (``<base>/projects/<key>/memory``), else the sanitised path."""
    root = settings.layout.memory_root
    parent = os.path.dirname(root)
    shaped = os.path.basename(root) == "memory"
    if shaped and os.path.basename(os.path.dirname(parent)) == "projects":
        return os.path.basename(parent)
    return sanitize(project)


def kind_of(settings: Settings) -> str:
    if settings.agent == "claude":
        return "claude"
    return "user" if settings.layout.tier == "user" else "project"


# --- one store --------------------------------------------------------------------------------


def has_own_remote(settings: Settings) -> bool:
    git_dir = repository(settings.layout.memory_root)
    return os.path.isdir(git_dir) and bool(remotes.list_remotes(git_dir))


def sync_store_via_hub(
    settings: Settings,
    now: datetime,
    hub: str,
    branch: str,
    *,
    dry_run: bool = False,
    push: bool = True,
    force: bool = False,
    progress: Progress | None = None,
) -> SyncOutcome:
    """``sync`` of one existing store through the hub's ``branch``."""
    from qmem_git.ops.required import require_store

    require_store(settings)
    git_dir = repository(settings.layout.memory_root)
    _record(settings, git_dir)
    moved = False
    if dry_run:
        moved = hubstore.read_record(git_dir)[:2] != (hub, branch)
    else:
        hubstore.track(git_dir, hub, branch)
    return run_sync(
        settings,
        now,
        dry_run=dry_run,
        push=push,
        force=force or moved,
        progress=progress,
        via=Remote(hubstore.HUB_REMOTE, hub),
        branch=branch,
    )


def adopt_from_hub(
    settings: Settings, now: datetime, hub: str, branch: str, progress: Progress | None = None
) -> SyncResult:
    """A store not on this machine yet: make it and take the hub branch's history (as
    ``clone``); memories already in the folder are merged and pushed instead."""
    prepare_store(settings, now)
    git_dir = repository(settings.layout.memory_root)
    _record(settings, git_dir)
    hubstore.track(git_dir, hub, branch)
    return attach(settings, Remote(hubstore.HUB_REMOTE, hub), now, progress, branch).result


def _record(settings: Settings, git_dir: str) -> None:
    if settings.layout.project_root and kind_of(settings) != "user":
        hubstore.record_project(git_dir, settings.layout.project_root)


# --- hub show ---------------------------------------------------------------------------------


def hub_branches(settings: Settings, hub: str) -> dict[str, str]:
    """The hub's branches (one ref advertisement, bounded as a sync's)."""
    from qmem_git.store.sync import remote_branches

    transport = remotes.open_transport(
        hub,
        credentials=credentials_for(settings),
        env=dict(settings.env),
        timeout=timeout_for(settings),
    )
    return remote_branches(transport, timeout_for(settings))
