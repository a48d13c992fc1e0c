"""Run one writing operation: lock, recover, plan under the lock, apply as one commit."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from qmem_git.store.writer import run_writer

if TYPE_CHECKING:  # annotations only: this module is on the fast path, before dulwich
    from qmem_git.core.changes import ChangeSet
    from qmem_git.settings import Settings
    from qmem_git.store.recovery import RecoveryReport
    from qmem_git.store.repo import ApplyResult, Identity
    from qmem_git.store.writer import WriterStart


class Outcome(NamedTuple):
    """What a writing command did: the ChangeSet it planned and the commit it made (if any)."""

    changeset: ChangeSet
    commit: str | None
    recovery: RecoveryReport | None
    applied: ApplyResult | None = None


def identity_for(settings: Settings) -> Identity:
    """GIT_AUTHOR_NAME/EMAIL when set (as C git does), else the user's git config.

    With both set the config is not read at all; else it is read once per state of its
    files (``store.identity``: dulwich's config module costs ~15 ms).
    """
    from qmem_git.store.identity import config_identity
    from qmem_git.store.relocate import repository
    from qmem_git.store.repo import Identity, identity_from_git_config

    if settings.author_name and settings.author_email:
        return Identity(settings.author_name, settings.author_email)
    config = config_identity(repository(settings.layout.memory_root), settings.env, settings.home)
    identity = identity_from_git_config(settings.host, config)
    return Identity(settings.author_name or identity.name, settings.author_email or identity.email)


def execute(
    settings: Settings,
    plan: Callable[[], ChangeSet],
    now: datetime,
    *,
    dry_run: bool = False,
    recover_worktree: bool = True,
    started: WriterStart | None = None,
) -> Outcome:
    """Plan and (unless ``dry_run``) commit; ``plan`` runs under the writer lock.

    ``started``: the lock already taken and the survey forked by the caller (``store.writer``).
    """
    if dry_run:
        return Outcome(plan(), None, None)
    result = run_writer(
        settings.layout,
        plan,
        identity=lambda: identity_for(settings),
        host=settings.host,
        now=now,
        lock_timeout=settings.lock_timeout,
        recover_worktree=recover_worktree,
        started=started,
        quiet_seconds=settings.quiet_seconds,
    )
    commit = result.applied.commit if result.applied else None
    return Outcome(result.changeset, commit, result.recovery, result.applied)


P = TypeVar("P")


def plan_and_execute(
    settings: Settings,
    plan: Callable[[], P],
    changeset_of: Callable[[P], ChangeSet],
    now: datetime,
    *,
    dry_run: bool = False,
    recover_worktree: bool = True,
    started: WriterStart | None = None,
) -> tuple[P, Outcome]:
    """:func:`execute` for operations whose plan carries more than its ChangeSet.

    ``plan`` still runs under the writer lock; its full result comes back with the outcome.
    """
    planned: list[P] = []

    def changeset() -> ChangeSet:
        planned.append(plan())
        return changeset_of(planned[-1])

    outcome = execute(
        settings,
        changeset,
        now,
        dry_run=dry_run,
        recover_worktree=recover_worktree,
        started=started,
    )
    return planned[-1], outcome
