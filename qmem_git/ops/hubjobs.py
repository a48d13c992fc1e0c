"""Syncing several stores: the current project's (``sync`` with a hub set), or every store on
the machine (``sync --all``), and ``hub show``'s map of the hub's branches to local stores.

Each store goes through its own remote when it has one, else through its branch on the hub
(:mod:`qmem_git.ops.hub`); one store's failure is reported and the next store goes on.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable
from datetime import datetime
from typing import Any, NamedTuple

from qmem_git.core.hubnames import store_of_branch
from qmem_git.errors import QmemError, UsageError
from qmem_git.ops.hub import (
    NO_HUB_HINT,
    adopt_from_hub,
    branch_for,
    hub_branches,
    kind_of,
    sync_store_via_hub,
)
from qmem_git.ops.sync import Progress, has_local_memories, sync_summary
from qmem_git.settings import Settings, build_settings
from qmem_git.store import hubstore, remotes
from qmem_git.store.relocate import repository
from qmem_git.store.sync import SyncResult

Classify = Callable[[Exception], tuple[str, int]]


class HubSync(NamedTuple):
    """One store's part of a multi-store sync: ``status`` synced, cloned, skipped or failed;
    ``via``: ``hub`` or the store's own remote; ``code``: the exit code of a failure."""

    store: str
    memory_root: str
    branch: str | None
    via: str | None
    status: str
    summary: str = ""
    result: dict[str, Any] | None = None
    error: str = ""
    code: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "memory_root": self.memory_root,
            "branch": self.branch,
            "via": self.via,
            "status": self.status,
            "summary": self.summary,
            "result": self.result,
            "error": self.error,
            "exit_code": self.code,
        }


# --- several stores ---------------------------------------------------------------------------


class Job(NamedTuple):
    """A store to sync: its kind, settings, and the project its branch is named from."""

    kind: str
    settings: Settings
    project: str | None


def project_jobs(settings: Settings, project: str | None) -> list[Job]:
    """The current project's stores: its Qwen tier, the user tier, Claude's folder."""
    env, home, cwd = settings.env, settings.home, settings.cwd
    jobs = []
    for kind, tier, agent in (
        ("project", "project", "qwen"),
        ("user", "user", "qwen"),
        ("claude", "project", "claude"),
    ):
        found = build_settings(
            env, project=project, cwd=cwd, home=home, with_model=False, tier=tier, agent=agent
        )
        jobs.append(Job(kind, found, found.layout.project_root or None))
    return jobs


def machine_jobs(settings: Settings) -> list[Job]:
    """Every store on this machine: Qwen's project stores under the base folder, the user
    tier, Claude's versioned folders; each with the project it recorded (None: unknown)."""
    from qmem_git.core.claudepaths import STATE_SUFFIX, memory_base
    from qmem_git.core.paths import base_dir

    env, home, cwd = settings.env, settings.home, settings.cwd
    user = build_settings(env, cwd=cwd, home=home, with_model=False, tier="user")
    jobs = [Job("user", user, None)]
    base = base_dir(env, home, cwd, settings.output_dir)
    for root in _memory_folders(base):
        if os.path.isdir(repository(root)):
            jobs.append(_recorded_job("project", root, settings, "qwen"))
    for root in _memory_folders(memory_base(settings.env, settings.home)):
        if os.path.isdir(root + STATE_SUFFIX) and os.path.isdir(repository(root)):
            jobs.append(_recorded_job("claude", root, settings, "claude"))
    return jobs


def _memory_folders(base: str) -> list[str]:
    return sorted(glob.glob(os.path.join(glob.escape(base), "projects", "*", "memory")))


def _recorded_job(kind: str, root: str, settings: Settings, agent: str) -> Job:
    project = hubstore.read_record(repository(root)).project
    found = build_settings(
        settings.env,
        memory_dir=root,
        project=project if project and os.path.isdir(project) else None,
        cwd=settings.cwd,
        home=settings.home,
        with_model=False,
        agent=agent,
    )
    return Job(kind, found, project)


def sync_jobs(
    jobs: list[Job],
    hub: str | None,
    now: datetime,
    *,
    dry_run: bool = False,
    push: bool = True,
    force: bool = False,
    progress: Progress | None = None,
    classify: Classify | None = None,
) -> list[HubSync]:
    """Sync each store in turn; a failure is reported (``classify``: its message and exit
    code, as the CLI words them) and the next store goes on."""
    flags = {"dry_run": dry_run, "push": push, "force": force}
    how = classify or _classify
    return [_sync_job(job, hub, now, progress=progress, classify=how, **flags) for job in jobs]


def _sync_job(
    job: Job,
    hub: str | None,
    now: datetime,
    *,
    dry_run: bool,
    push: bool,
    force: bool,
    progress: Progress | None,
    classify: Classify,
) -> HubSync:
    settings = job.settings
    root = settings.layout.memory_root
    entry = HubSync(job.kind, root, None, None, "skipped")
    flags = {"dry_run": dry_run, "push": push, "force": force}
    try:
        return _run_job(job, hub, now, entry, progress=progress, **flags)
    except Exception as exc:  # one store's failure, whatever it is, never stops the others
        message, code = classify(exc)
        return entry._replace(status="failed", error=message, code=code)


def _classify(exc: Exception) -> tuple[str, int]:
    """(message, exit code) of a store's failure when the caller gives no classifier."""
    if isinstance(exc, QmemError):
        return str(exc), exc.exit_code
    return f"{type(exc).__name__}: {exc}", 1


def _run_job(
    job: Job,
    hub: str | None,
    now: datetime,
    entry: HubSync,
    *,
    dry_run: bool,
    push: bool,
    force: bool,
    progress: Progress | None,
) -> HubSync:
    from qmem_git.ops.sync import run_sync

    settings = job.settings
    git_dir = repository(settings.layout.memory_root)
    exists = os.path.isdir(git_dir)
    if job.kind == "claude":
        skipped = _claude_skip(settings, exists)
        if skipped:
            return entry._replace(summary=skipped)
    if exists and remotes.list_remotes(git_dir):
        outcome = run_sync(
            settings, now, dry_run=dry_run, push=push, force=force, progress=progress
        )
        remote = outcome.result.remote
        return _done(entry._replace(via=remote), outcome.result)
    if hub is None:
        return entry._replace(summary="no remote and no hub")
    if job.kind != "user" and not job.project:
        return entry._replace(
            summary="skipped: its project is not recorded "
            "(run `qmem-git sync` once in that project)"
        )
    branch = _job_branch(job, git_dir if exists else None)
    entry = entry._replace(branch=branch, via="hub")
    if exists:
        outcome = sync_store_via_hub(
            settings, now, hub, branch, dry_run=dry_run, push=push, force=force, progress=progress
        )
        return _done(entry, outcome.result)
    return _new_store(settings, now, hub, branch, entry, dry_run=dry_run, progress=progress)


def branch_of_store(settings: Settings) -> str:
    """The hub branch of the existing store ``settings`` names: its project is the one given,
    else the one its repository recorded."""
    git_dir = repository(settings.layout.memory_root)
    project = settings.layout.project_root or hubstore.read_record(git_dir).project
    return _job_branch(Job(kind_of(settings), settings, project or None), git_dir)


def _job_branch(job: Job, git_dir: str | None) -> str:
    """The store's hub branch, from its project; the branch it last used when the project's
    folder is gone from this machine (its ``origin`` cannot be read any more)."""
    if job.kind != "user" and job.project and not os.path.isdir(job.project) and git_dir:
        last = hubstore.read_record(git_dir).branch
        if last:
            return last
    return branch_for(job.kind, job.settings, job.project)


def _new_store(
    settings: Settings,
    now: datetime,
    hub: str,
    branch: str,
    entry: HubSync,
    *,
    dry_run: bool,
    progress: Progress | None,
) -> HubSync:
    """A store with no repository here: adopt its branch when the hub has it; publish the
    memories already in the folder (Qwen wrote them) when it does not; else nothing."""
    on_hub = branch in hub_branches(settings, hub)
    if not on_hub and not has_local_memories(settings):
        return entry._replace(summary=f"nothing here and no branch {branch} on the hub")
    if dry_run:
        verb = "would clone" if on_hub else "would publish"
        return entry._replace(summary=f"{verb} {branch} (no repository here yet)")
    return _done(entry, adopt_from_hub(settings, now, hub, branch, progress))


def _claude_skip(settings: Settings, exists: bool) -> str:
    """Why Claude's folder is not synced now ('' when it is)."""
    from qmem_git.core.claudepaths import STATE_SUFFIX

    if not exists or not os.path.isdir(settings.layout.memory_root + STATE_SUFFIX):
        return "not versioned (run `qmem-git --agent claude init` to version it)"
    from qmem_git.ops.claude import check_claude_command

    try:
        check_claude_command("sync")
    except UsageError as exc:
        return f"not synced: {exc.message}"
    return ""


def _done(entry: HubSync, result: SyncResult) -> HubSync:
    status = "cloned" if result.action == "cloned" else "synced"
    return entry._replace(status=status, summary=sync_summary(result), result=result.as_dict())


def first_failure(found: list[HubSync]) -> int:
    """The exit code of the first store that failed (0: none did)."""
    return next((entry.code for entry in found if entry.status == "failed"), 0)


def render(found: list[HubSync]) -> str:
    lines = []
    for entry in found:
        where = f" ({entry.via}{':' + entry.branch if entry.branch else ''})" if entry.via else ""
        head = f"{entry.store}{where}: "
        if entry.status == "failed":
            lines.append(f"{head}failed: {entry.error}")
            continue
        text = entry.summary or entry.status
        first, *rest = text.splitlines()
        lines.append(head + first)
        lines += rest
    return "\n".join(lines)


# --- hub show ---------------------------------------------------------------------------------


def show(settings: Settings, hub: str | None) -> dict[str, Any]:
    """``hub show``: the URL and each branch with the local store it belongs to."""
    if hub is None:
        return {"hub": None, "branches": []}
    local = _local_branches(settings)
    branches = [
        {"branch": name, "commit": sha, "kind": store_of_branch(name), "store": local.get(name)}
        for name, sha in sorted(hub_branches(settings, hub).items())
    ]
    return {"hub": remotes.redact(hub), "branches": branches}


def _local_branches(settings: Settings) -> dict[str, str]:
    """branch -> memory root, for the stores of this machine whose branch is known."""
    found: dict[str, str] = {}
    jobs = machine_jobs(settings) + project_jobs(settings, None)
    for job in jobs:
        if not os.path.isdir(repository(job.settings.layout.memory_root)):
            continue
        if job.kind != "user" and not job.project:
            continue
        try:
            branch = branch_for(job.kind, job.settings, job.project)
        except QmemError:
            continue
        found.setdefault(branch, job.settings.layout.memory_root)
    return found


def render_show(data: dict[str, Any]) -> str:
    if data["hub"] is None:
        return f"No hub set: {NO_HUB_HINT}"
    lines = [f"hub: {data['hub']}"]
    if not data["branches"]:
        lines.append("  no branches yet (the first `qmem-git sync` publishes this machine's)")
    for branch in data["branches"]:
        owner = branch["store"] or "not on this machine"
        lines.append(f"  {branch['branch']}\t{branch['commit'][:12]}\t{owner}")
    return "\n".join(lines)
