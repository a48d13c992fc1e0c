"""``qmem-git status``: what the next write would commit, what it would hold back, and how
``main`` stands against each remote. Read-only: nothing is committed, moved or locked."""

from __future__ import annotations

from dataclasses import dataclass, field

from qmem_git.settings import Settings
from qmem_git.store.hubstore import HUB_REMOTE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmem_git.core.paths import Layout

WRITE_HEADER = "Uncommitted (the next write commits them):"
TEAM_HEADER = "Uncommitted (git add and commit them in the project):"


@dataclass(frozen=True)
class Status:
    """``uncommitted``: path -> A/M/D the next write commits; ``held``: path -> why it stays
    out; ``index_stale``: MEMORY.md differs from the rebuilt index; ``tracking``: (remote,
    ahead, behind)."""

    uncommitted: dict[str, str] = field(default_factory=dict)
    held: dict[str, str] = field(default_factory=dict)
    index_stale: bool = False
    tracking: tuple[tuple[str, int, int], ...] = ()
    hub_branch: str | None = None  # the branch on the hub this store last synced with

    def as_dict(self) -> dict[str, object]:
        return {
            "uncommitted": self.uncommitted,
            "held": self.held,
            "index_stale": self.index_stale,
            "tracking": [{"remote": r, "ahead": a, "behind": b} for r, a, b in self.tracking],
            "hub": self.hub(),
        }

    def hub(self) -> dict[str, object] | None:
        """The hub branch and ahead/behind against its tracking ref (None: never synced)."""
        if self.hub_branch is None:
            return None
        found = [(a, b) for remote, a, b in self.tracking if remote == HUB_REMOTE]
        ahead, behind = found[0] if found else (0, 0)
        return {"branch": self.hub_branch, "ahead": ahead, "behind": behind}


def _hub_branch(memory_root: str) -> str | None:
    from qmem_git.store.hubstore import read_record
    from qmem_git.store.relocate import repository

    return read_record(repository(memory_root)).branch


def read_status(settings: Settings) -> Status:
    """The store as it stands (the rules of ``store.recovery`` and ``ops.snapshot``)."""
    from qmem_git.ops.lifecycle import check_index
    from qmem_git.ops.required import require_repository
    from qmem_git.ops.snapshot import plan_snapshot
    from qmem_git.store.tracking import tracking

    require_repository(settings)
    layout = settings.layout
    if settings.agent == "claude":
        return _claude_status(settings)
    plan = plan_snapshot(
        layout.memory_root,
        layout.state_dir,
        previous_meta=None,
        quiet_seconds=settings.quiet_seconds,
    )
    return Status(
        uncommitted=dict(sorted(plan.statuses.items())),
        held=dict(sorted(plan.held.items())),
        index_stale=not check_index(settings).up_to_date,
        tracking=tuple(tracking(layout.memory_root)),
        hub_branch=_hub_branch(layout.memory_root),
    )


def render_status(status: Status) -> str:
    """Plain lines, like ``git status --short``, then what is held back and the remotes."""
    lines = [f" {kind} {rel}" for rel, kind in status.uncommitted.items()]
    if status.index_stale:
        lines.append(" M MEMORY.md (rebuilt by the next write)")
    if not lines:
        lines.append("Nothing to commit.")
    else:
        lines.insert(0, WRITE_HEADER)
    if status.held:
        lines.append("Held back (stay where they are, not committed):")
        lines += [f"  {rel}: {why}" for rel, why in status.held.items()]
    hub = status.hub()
    for remote, ahead, behind in status.tracking:
        if hub is not None and remote == HUB_REMOTE:
            continue
        lines.append(f"main is {ahead} ahead, {behind} behind {remote}/main")
    if hub is not None:
        lines.append(
            f"main is {hub['ahead']} ahead, {hub['behind']} behind the hub's {hub['branch']}"
        )
    return "\n".join(lines)


def _claude_status(settings: Settings) -> Status:
    """Claude Code's folder: what a snapshot would commit (MEMORY.md is Claude's, as it is)."""
    from datetime import datetime, timezone

    from qmem_git.ops.claude import snapshot_claude
    from qmem_git.store.tracking import tracking

    plan = snapshot_claude(settings, datetime.now(timezone.utc), dry_run=True)
    return Status(
        uncommitted={change.path: change.status for change in plan.changes},
        held=dict(sorted(plan.held.items())),
        tracking=tuple(tracking(settings.layout.memory_root)),
        hub_branch=_hub_branch(settings.layout.memory_root),
    )


# --------------------------------------------------------------------------- every store

TEAM_NOTE = "committed in the project's repository (qmem-git only reads it)"


@dataclass(frozen=True)
class StoreStatus:
    """One store of this project and machine: where it is, whether it is set up, and (when
    it is) its :class:`Status`; ``error``: why it could not be read."""

    store: str
    memory_root: str
    repository: str
    exists: bool
    initialized: bool
    status: Status | None = None
    note: str = ""
    error: str = ""

    def as_dict(self) -> dict[str, object]:
        found = self.status or Status()
        return {
            "store": self.store,
            "memory_root": self.memory_root,
            "repository": self.repository,
            "exists": self.exists,
            "initialized": self.initialized,
            **found.as_dict(),
            "note": self.note,
            "error": self.error,
        }


def read_all(stores: list[tuple[str, Settings]]) -> list[StoreStatus]:
    """``status`` with no store named: each of ``stores`` (name, settings), read only; a store
    that is not there is listed as absent, never made."""
    return [_one(name, settings) for name, settings in stores]


def _one(name: str, settings: Settings) -> StoreStatus:
    import os

    from qmem_git.errors import QmemError
    from qmem_git.store.relocate import repository

    layout = settings.layout
    root = layout.memory_root
    team = layout.tier == "team"
    git_dir = layout.git_dir if team else repository(root)
    found = StoreStatus(name, root, git_dir, os.path.isdir(root), os.path.exists(git_dir))
    if not found.initialized:
        return found
    try:
        status = _team_status(layout) if team else read_status(settings)
    except QmemError as exc:
        return _replace(found, error=str(exc))
    return _replace(found, status=status, note=TEAM_NOTE if team else "")


def _replace(found: StoreStatus, **changes: object) -> StoreStatus:
    from dataclasses import replace

    return replace(found, **changes)  # type: ignore[arg-type]


def _team_status(layout: Layout) -> Status:
    """The team folder as the project's git sees it: what ``git add`` there would commit
    (``git status --porcelain``); a file a pre-commit hook refuses (a secret, too big) is
    held back. qmem-git never commits there, so there is no remote of its own."""
    import os

    from qmem_git.core.holdback import hold_reason
    from qmem_git.ops.teamhistory import team_porcelain

    uncommitted: dict[str, str] = {}
    held: dict[str, str] = {}
    for kind, rel in team_porcelain(layout):
        path = os.path.join(layout.memory_root, rel)
        why = None
        if kind != "D" and os.path.isfile(path) and not os.path.islink(path):
            with open(path, "rb") as handle:
                why = hold_reason(rel, handle.read())
        if why is None:
            uncommitted[rel] = kind
        else:
            held[rel] = why
    return Status(uncommitted=dict(sorted(uncommitted.items())), held=dict(sorted(held.items())))


def render_all(found: list[StoreStatus]) -> str:
    """One block per store: its name and place, then what :func:`render_status` says."""
    blocks = []
    for store in found:
        head = f"{store.store}: {store.memory_root}"
        if store.error:
            body = f"  cannot be read: {store.error}"
        elif not store.initialized:
            there = "the folder exists" if store.exists else "no folder"
            body = f"  not set up ({there}; no repository at {store.repository})"
        else:
            lines = render_status(store.status or Status()).splitlines()
            if store.note:  # the team tier: the project's git commits it, not qmem-git
                lines = [TEAM_HEADER if line == WRITE_HEADER else line for line in lines]
            lines += [store.note] if store.note else []
            body = "\n".join(f"  {line}" for line in lines)
        blocks.append(f"{head}\n{body}")
    return "\n".join(blocks)
