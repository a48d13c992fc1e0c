"""The one way a command writes memory: lock, recover, plan under the lock, commit.

This module imports nothing heavy at load time: a command that calls :func:`run_writer` with
``overlap=True`` before it has imported dulwich gets the work-tree survey started in a forked
child as soon as the lock is held (``store.survey``), and dulwich, the recovery code and the
plan's own modules are imported while the child scans.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from qmem_git.core.paths import Layout
from qmem_git.store import locks, survey

if TYPE_CHECKING:
    from qmem_git.core.changes import ChangeSet
    from qmem_git.store.recovery import RecoveryReport, Validator
    from qmem_git.store.repo import ApplyResult, Identity


class WriteResult(NamedTuple):
    """One writing command: what recovery did first, the planned ChangeSet, the commit."""

    recovery: RecoveryReport
    changeset: ChangeSet
    applied: ApplyResult


def run_writer(
    layout: Layout,
    plan: Callable[[], ChangeSet],
    *,
    identity: Identity | Callable[[], Identity],
    host: str,
    now: datetime,
    lock_timeout: float = 10.0,
    problem_of: Validator | None = None,
    recover_worktree: bool = True,
    overlap: bool = False,
    prepare: Callable[[], object] | None = None,
) -> WriteResult:
    """Lock, recover, plan under the lock, apply.

    ``recover_worktree=False`` leaves uncommitted work-tree changes for ``plan`` (companion
    snapshots commit them with their own op); locks, temp files and corruption are still handled.
    ``identity`` may be a function, called once the survey is under way (reading git config
    costs ~15 ms). ``overlap``: survey the work tree in a forked child (see the module doc);
    ``prepare`` then runs meanwhile too (the plan's imports, checks of its input).
    """
    # the tenure starts before recovery: its own commit may be interrupted too
    with locks.writer_tenure(layout, lock_timeout) as lock_fd:
        lock_fds = () if lock_fd is None else (lock_fd,)
        pending = None
        try:
            pending = survey.start(layout.memory_root, lock_fds) if overlap else None
            if prepare is not None:
                prepare()
            return _write(layout, plan, identity, host, now, problem_of, recover_worktree, pending)
        finally:
            if pending is not None:
                pending.close()


def _write(
    layout: Layout,
    plan: Callable[[], ChangeSet],
    identity: Identity | Callable[[], Identity],
    host: str,
    now: datetime,
    problem_of: Validator | None,
    recover_worktree: bool,
    pending: survey.Pending | None,
) -> WriteResult:
    from qmem_git.store import recovery
    from qmem_git.store.repo import apply_changeset
    from qmem_git.store.workdir import shared_scan

    who = identity() if callable(identity) else identity  # while the survey runs
    report, state = recovery.recover_for_write(
        layout,
        identity=who,
        host=host,
        now=now,
        problem_of=problem_of,
        commit_changes=recover_worktree,
        pending=pending,
    )
    files = state.files
    scope = shared_scan(layout.memory_root, files) if files is not None else None
    with scope or contextlib.nullcontext():
        changeset = plan()
        applied = apply_changeset(layout, changeset, identity=who, host=host, now=now, state=state)
    return WriteResult(report, changeset, applied)
