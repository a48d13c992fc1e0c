"""``qmem-git status``: what the next write would commit, what it would hold back, and how
``main`` stands against each remote. Read-only: nothing is committed, moved or locked."""

from __future__ import annotations

from dataclasses import dataclass, field

from qmem_git.settings import Settings


@dataclass(frozen=True)
class Status:
    """``uncommitted``: path -> A/M/D the next write commits; ``held``: path -> why it stays
    out; ``index_stale``: MEMORY.md differs from the rebuilt index; ``tracking``: (remote,
    ahead, behind)."""

    uncommitted: dict[str, str] = field(default_factory=dict)
    held: dict[str, str] = field(default_factory=dict)
    index_stale: bool = False
    tracking: tuple[tuple[str, int, int], ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {
            "uncommitted": self.uncommitted,
            "held": self.held,
            "index_stale": self.index_stale,
            "tracking": [{"remote": r, "ahead": a, "behind": b} for r, a, b in self.tracking],
        }


def read_status(settings: Settings) -> Status:
    """The store as it stands (the rules of ``store.recovery`` and ``ops.snapshot``)."""
    from qmem_git.ops.lifecycle import check_index, require_repository
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
    )


def render_status(status: Status) -> str:
    """Plain lines, like ``git status --short``, then what is held back and the remotes."""
    lines = [f" {kind} {rel}" for rel, kind in status.uncommitted.items()]
    if status.index_stale:
        lines.append(" M MEMORY.md (rebuilt by the next write)")
    if not lines:
        lines.append("Nothing to commit.")
    else:
        lines.insert(0, "Uncommitted (the next write commits them):")
    if status.held:
        lines.append("Held back (stay where they are, not committed):")
        lines += [f"  {rel}: {why}" for rel, why in status.held.items()]
    for remote, ahead, behind in status.tracking:
        lines.append(f"main is {ahead} ahead, {behind} behind {remote}/main")
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
    )
