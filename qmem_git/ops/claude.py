"""``--agent claude``: Claude Code's own auto-memory folder as a store qmem-git only versions.

Claude Code owns the folder (its memories and its own ``MEMORY.md``): qmem-git commits what is
there as it is (``store.asis``) and reads it (recall, validate, log, diff, status), and shares
it through a remote (remote, sync, clone: only what Claude wrote, fetched or merged, is written
into it; its MEMORY.md is merged by lines, never rebuilt). The commands that would write their
own content into it (remember, extract, forget, dream, index, undo, restore, ...) refuse it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from qmem_git.errors import UsageError

if TYPE_CHECKING:
    from datetime import datetime

    from qmem_git.core.validate import Finding
    from qmem_git.ops.validate import Report
    from qmem_git.settings import Settings
    from qmem_git.store.asis import AsIsResult

# what reads Claude's folder, commits it as it is, or shares it (by command path)
CLAUDE_COMMANDS = frozenset(
    {
        "init",
        "sync",
        "clone",
        "remote",
        "remote add",
        "remote remove",
        "remote list",
        "where",
        "snapshot",
        "recall",
        "validate",
        "log",
        "show",
        "diff",
        "history",
        "status",
        "stats",
        "doctor",
        "review",
        "git",
        "hook",
        "install-tasks",
        "demo",
    }
)


def check_claude_command(command: str) -> None:
    """Refuse a command that would write into Claude Code's folder (exit 2)."""
    if command in CLAUDE_COMMANDS:
        return
    raise UsageError(
        f"`{command}` would write into Claude Code's auto-memory folder, which Claude owns",
        "qmem-git only versions, reads and shares it (snapshot, log, diff, recall, validate, "
        "sync); "
        "run the command without --agent claude for qmem-git's own store",
    )


def snapshot_claude(settings: Settings, now: datetime, *, dry_run: bool = False) -> AsIsResult:
    """Commit Claude's folder as it is (the repository is made on first use)."""
    from qmem_git.ops.runner import identity_for
    from qmem_git.store.asis import snapshot_as_is

    layout = settings.layout
    if not os.path.isdir(layout.git_dir):
        if dry_run:
            raise UsageError(
                f"{layout.memory_root} has no repository yet (--dry-run writes nothing)",
                "run `qmem-git --agent claude init` first",
            )
        init_claude(settings)
    return snapshot_as_is(
        layout,
        identity=lambda: identity_for(settings),
        host=settings.host,
        now=now,
        lock_timeout=settings.lock_timeout,
        quiet_seconds=settings.quiet_seconds,
        dry_run=dry_run,
    )


def init_claude(settings: Settings) -> bool:
    """Make the repository beside Claude's folder and qmem-git's state folder; True when the
    repository is new. Claude's folder itself gets nothing written into it."""
    from qmem_git.ops.lifecycle import hook_command, record_project
    from qmem_git.store.repo import init_repo

    layout = settings.layout
    os.makedirs(layout.state_dir, exist_ok=True)
    created = init_repo(layout, hook_command(), settings.lock_timeout).created
    record_project(settings)  # the hub names this folder's branch from its project
    return created


CLAUDE_INDEX_RULES = frozenset({"index-missing", "index-stale", "index-limit"})


def claude_report(report: Report, memory_root: str) -> Report:
    """A validation report as it applies to Claude Code's folder: its ``MEMORY.md`` is Claude's
    own index (no Qwen index rules), and a memory whose ``type`` is nested under
    ``metadata:`` (Claude's shape) has one."""
    from qmem_git.ops.validate import Report

    kept = []
    for finding in report.findings:
        if finding.rule in CLAUDE_INDEX_RULES:
            continue
        if _missing_type(finding) and _nested_type(memory_root, finding.path):
            continue
        kept.append(finding)
    return Report(tuple(kept), report.files_checked)


def _missing_type(finding: Finding) -> bool:
    """``core.validate``'s finding for a frontmatter without a top-level ``type``."""
    return finding.rule == "frontmatter-field" and "'type'" in finding.message


def _nested_type(memory_root: str, path: str) -> bool:
    from qmem_git.core.claudepaths import claude_memory_type

    try:
        with open(os.path.join(memory_root, path), encoding="utf-8") as handle:
            return claude_memory_type(handle.read()) is not None
    except (OSError, UnicodeDecodeError):
        return False
