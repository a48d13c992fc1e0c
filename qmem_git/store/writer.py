"""The one way a command writes memory: lock, recover, plan under the lock, commit.

A writer's first steps (:class:`WriterStart`: take the lock, mark the tenure, start the
work-tree survey) import nothing heavy, so a command that takes them before its other imports
(the ``remember`` fast path) gets the survey going in a forked child at once, and dulwich, the
recovery code and the plan's own modules load while the child scans (``store.survey``).
"""

from __future__ import annotations

from qmem_git.store import locks, survey

TYPE_CHECKING = False  # typing, datetime and collections.abc load after the fork
if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime
    from types import TracebackType

    from qmem_git.core.changes import ChangeSet
    from qmem_git.core.paths import Layout
    from qmem_git.store.recovery import RecoveryReport, Validator
    from qmem_git.store.repo import ApplyResult, Identity


class WriteResult:
    """One writing command: what recovery did first, the planned ChangeSet, the commit."""

    __slots__ = ("applied", "changeset", "recovery")

    def __init__(
        self, recovery: RecoveryReport, changeset: ChangeSet, applied: ApplyResult
    ) -> None:
        self.recovery = recovery
        self.changeset = changeset
        self.applied = applied


class WriterStart:
    """A writer's first steps, as a context manager: the writer lock held, the tenure marked
    and, with ``overlap``, the work-tree survey started in a forked child. Pass the entered
    object to :func:`run_writer`; leaving it reaps the child and releases the lock.
    """

    def __init__(self, layout: Layout, lock_timeout: float, *, overlap: bool = True) -> None:
        self.layout = layout
        self.pending: survey.Pending | None = None
        self._tenure = locks.writer_tenure(layout, lock_timeout)
        self._overlap = overlap

    def __enter__(self) -> WriterStart:
        lock_fd = self._tenure.__enter__()
        if self._overlap:
            try:
                fds = () if lock_fd is None else (lock_fd,)
                self.pending = survey.start(self.layout.memory_root, fds)
            except BaseException:
                self._tenure.__exit__(None, None, None)
                raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if self.pending is not None:
                self.pending.close()
                self.pending = None
        finally:
            self._tenure.__exit__(kind, exc, tb)


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
    started: WriterStart | None = None,
    quiet_seconds: float = 0.0,
) -> WriteResult:
    """Lock, recover, plan under the lock, apply.

    ``recover_worktree=False`` leaves uncommitted work-tree changes for ``plan`` (companion
    snapshots commit them with their own op); locks, temp files and corruption are still handled.
    ``identity`` may be a function, called once the survey is under way (reading git config
    costs ~15 ms).
    ``started``: the caller's entered :class:`WriterStart` for ``layout`` (then ``lock_timeout``
    and whether the survey runs in a forked child were its business), still held when this
    returns. ``quiet_seconds``: files changed more recently are held back as still being
    written (``store.recovery``).
    """
    rules = (problem_of, quiet_seconds)
    if started is not None:
        return _write(layout, plan, identity, host, now, rules, recover_worktree, started)
    with WriterStart(layout, lock_timeout, overlap=False) as begun:
        return _write(layout, plan, identity, host, now, rules, recover_worktree, begun)


def _write(
    layout: Layout,
    plan: Callable[[], ChangeSet],
    identity: Identity | Callable[[], Identity],
    host: str,
    now: datetime,
    rules: tuple[Validator | None, float],
    recover_worktree: bool,
    started: WriterStart,
) -> WriteResult:
    import contextlib

    from qmem_git.store import recovery
    from qmem_git.store.doccache import cache_path
    from qmem_git.store.repo import apply_changeset, rebuild_only
    from qmem_git.store.workdir import shared_scan

    who = identity() if callable(identity) else identity  # while the survey runs
    if started.pending is not None and started.pending.forked:
        from qmem_git.core.index import warm_up

        warm_up()  # the parent would wait for the child anyway
    report, state = recovery.recover_for_write(
        layout,
        identity=who,
        host=host,
        now=now,
        problem_of=rules[0],
        commit_changes=recover_worktree,
        pending=started.pending,
        quiet_seconds=rules[1],
    )
    files = state.files
    scope = None
    if files is not None:
        cache = cache_path(layout.state_dir)
        scope = shared_scan(layout.memory_root, files, state.cuts, state.changed, cache)
    with scope or contextlib.nullcontext():
        changeset = plan()
        if report.held and report.commit is None and recover_worktree:
            changeset = changeset._replace(held={**dict(report.held), **changeset.held})
        applied = apply_changeset(layout, changeset, identity=who, host=host, now=now, state=state)
    if applied.commit is not None:
        changeset = rebuild_only(changeset)  # what was committed, as its message says
    return WriteResult(report, changeset, applied)
