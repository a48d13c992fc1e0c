"""The lifecycle operations end to end: lock, plan, commit, then state files and telemetry.

Each ``run_*`` function is what one CLI command (or hook) calls. Machine-local state
(meta.json, the extraction cursor, telemetry) is written after the commit succeeds, so a
crash never records work that is not in history.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from qmem_git.core import telemetry
from qmem_git.core.changes import ChangeSet
from qmem_git.core.dreamgate import DISABLED
from qmem_git.core.statefile import iso_ms
from qmem_git.errors import NothingToDo, QmemError
from qmem_git.ops.dream import DreamOpPlan, gate_dream, plan_dream_op
from qmem_git.ops.extract import ExtractPlan, clean_session, plan_extract
from qmem_git.ops.forget import ForgetOpPlan, plan_forget_op
from qmem_git.ops.lifecycle import ensure_repository
from qmem_git.ops.models import Strategy
from qmem_git.ops.runner import Outcome, plan_and_execute
from qmem_git.settings import Settings
from qmem_git.store import state
from qmem_git.store.telemetry import record_event

if TYPE_CHECKING:
    from qmem_git.store.extractqueue import ExtractSlot

EMPTY = "nothing to change"


def _changeset_or_empty(cs: ChangeSet | None, op: str) -> ChangeSet:
    return cs if cs is not None else ChangeSet(op, EMPTY)


def _elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def emit_event(settings: Settings, name: str, now: datetime, **fields: object) -> None:
    """Append a telemetry event unless QMEM_TELEMETRY=0 (spec §7.10, §8.6, §10.1)."""
    if settings.telemetry:
        record_event(settings.layout.state_dir, telemetry.make_event(name, iso_ms(now), fields))


def _remember_own_stamps(settings: Settings) -> None:
    """Our own extract/dream stamps meta.json too; a later snapshot must not credit them to
    the companion tool, so the snapshot record is moved along with them."""
    from qmem_git.ops.snapshot import save_snapshot_meta

    save_snapshot_meta(settings.layout.state_dir, state.load_meta(settings.layout.state_dir))


# --------------------------------------------------------------------------- extract


@dataclass(frozen=True)
class ExtractOutcome:
    """``status``: completed, skipped (with ``skipped_reason``), queued behind a running one,
    or (a queued request run for another process) failed, with the error as the reason."""

    status: str
    plan: ExtractPlan | None = None
    outcome: Outcome | None = None
    skipped_reason: str | None = None
    followups: tuple[ExtractOutcome, ...] = ()


@dataclass(frozen=True)
class ExtractRequest:
    transcript: str
    session_id: str | None = None
    planner: str = "auto"  # --planner auto|heuristic|model (ops.models.model_for)

    def to_json(self) -> dict[str, Any]:
        """As queued for the running process, which may have another working directory."""
        return {
            "transcript": os.path.abspath(self.transcript),
            "sessionId": self.session_id,
            "planner": self.planner,
        }


def run_extract(
    settings: Settings, request: ExtractRequest, now: datetime, *, dry_run: bool = False
) -> ExtractOutcome:
    """Extract new durable facts from a transcript as one commit (spec §7).

    Across processes, one extraction runs per project; a request arriving meanwhile is
    queued (per session, the latest request wins) and run by the running process when its
    own is done. The queued requests of other sessions run even when this one fails; its
    error is raised after them.
    """
    from qmem_git.store.extractqueue import ExtractSlot

    ensure_repository(settings, now, dry_run=dry_run)
    if dry_run:
        return _extract_once(settings, request, now, dry_run=True)
    slot = ExtractSlot(settings.layout.state_dir)
    if not slot.acquire_or_queue(request.to_json()):
        return ExtractOutcome("queued")
    followups: list[ExtractOutcome] = []
    try:
        first = _own_extract(settings, request, now)
        followups += _run_queued(settings, slot, now)
        while slot.release():  # requests queued after our last look: ours to run
            followups += _run_queued(settings, slot, now)
    except BaseException:
        slot.abandon()  # interrupted: a request being run stays queued for the next holder
        raise
    if isinstance(first, QmemError):
        raise first
    return ExtractOutcome(
        first.status, first.plan, first.outcome, first.skipped_reason, tuple(followups)
    )


def _own_extract(
    settings: Settings, request: ExtractRequest, now: datetime
) -> ExtractOutcome | QmemError:
    """This process's own request; a QmemError is returned, raised once the queue is run."""
    try:
        return _extract_once(settings, request, now)
    except QmemError as exc:
        return exc


def _run_queued(settings: Settings, slot: ExtractSlot, now: datetime) -> list[ExtractOutcome]:
    """Run the queued requests, oldest first, until none is left; one that fails does not
    stop the others (its process already reported ``queued``, so it is only recorded)."""
    results = []
    while (data := slot.take_queued()) is not None:
        current = _request_from(data)
        if current is None:
            continue  # not a request: nothing to run
        try:
            results.append(_extract_once(settings, current, now))
        except QmemError as exc:
            results.append(ExtractOutcome("failed", skipped_reason=exc.message))
    return results


def _request_from(data: dict[str, Any] | None) -> ExtractRequest | None:
    if not data or not isinstance(data.get("transcript"), str):
        return None
    session = data.get("sessionId")
    planner = data.get("planner")
    return ExtractRequest(
        data["transcript"],
        session if isinstance(session, str) else None,
        planner if isinstance(planner, str) else "auto",
    )


def _extract_once(
    settings: Settings, request: ExtractRequest, now: datetime, *, dry_run: bool = False
) -> ExtractOutcome:
    from qmem_git.integrations.transcripts import read_transcript
    from qmem_git.ops.models import extract_planner, model_for, warm_extract
    from qmem_git.store.workdir import scan_documents

    started = time.monotonic()
    layout = settings.layout
    model = model_for(request.planner, settings.model)
    transcript = read_transcript(request.transcript, (layout.memory_root,))
    session = clean_session(request.session_id or transcript.session_id)
    planner = extract_planner(model, lambda: scan_documents(layout.memory_root))
    if model is not None:  # ask the model before taking the writer lock
        warm_extract(planner, transcript, request.session_id, state.session_cursor(layout, session))
    extract_plan, outcome = plan_and_execute(
        settings,
        lambda: plan_extract(
            layout.memory_root,
            transcript,
            request.session_id,
            state.session_cursor(layout, session),
            now,
            planner=planner,
        ),
        lambda p: _changeset_or_empty(p.changeset, "extract"),
        now,
        dry_run=dry_run,
    )
    if extract_plan.skipped_reason:
        status = "skipped"
    else:
        status = "completed"
        if not dry_run:
            state.write_cursor(layout, extract_plan.cursor)
            state.record_session(layout, extract_plan.cursor)
            state.update_meta(layout, extract_plan.meta_updates, now)
            _remember_own_stamps(settings)
    if not dry_run:
        emit_event(
            settings,
            telemetry.EXTRACT,
            now,
            trigger="manual",
            status=status,
            skipped_reason=extract_plan.skipped_reason,
            patches_count=len(extract_plan.patches),
            touched_topics=",".join(extract_plan.touched_topics),
            duration_ms=_elapsed_ms(started),
            **_strategy_fields(extract_plan.strategy),
        )
    return ExtractOutcome(status, extract_plan, outcome, extract_plan.skipped_reason)


def _strategy_fields(strategy: Strategy | None) -> dict[str, str | None]:
    """Telemetry fields naming who planned (``Strategy.as_dict``); none for a plain planner."""
    return strategy.as_dict() if strategy is not None else {}


# --------------------------------------------------------------------------- dream


@dataclass(frozen=True)
class DreamOutcome:
    status: str  # "updated", "noop", "skipped"
    skipped_reason: str | None = None
    plan: DreamOpPlan | None = None
    outcome: Outcome | None = None


def run_dream(
    settings: Settings,
    now: datetime,
    *,
    session_id: str | None = None,
    force: bool = False,
    dry_run: bool = False,
    planner: str = "auto",
    transcripts_dir: str | None = None,
) -> DreamOutcome:
    """Gate (spec §8.1, skipped by ``force``), take consolidation.lock, dedupe as one commit.

    ``transcripts_dir``: where the session gate counts transcripts (default: Qwen Code's
    chats folder; a Claude Code hook passes the folder of its own transcript).

    Telemetry records ``trigger`` ``manual`` for a forced dream and ``auto`` for a scheduled
    (gated) one (spec §8.6).
    """
    from qmem_git.ops.models import dream_planner, model_for, warm_dream
    from qmem_git.store.consolidation import try_acquire

    if not force and not settings.auto_dream:  # spec §8.1: before any file is created or read
        return DreamOutcome("skipped", DISABLED)
    model = model_for(planner, settings.model)
    dreamer = dream_planner(model)
    ensure_repository(settings, now, dry_run=dry_run)
    layout = settings.layout
    chats = transcripts_dir or settings.chats_dir
    gate = gate_dream(layout.state_dir, chats, session_id or "", now, force=force)
    if not gate.proceed:
        return DreamOutcome("skipped", gate.reason)

    def plan() -> DreamOpPlan:
        return plan_dream_op(
            layout.memory_root, now, session_id=session_id, manual=force, planner=dreamer
        )

    def changeset_of(p: DreamOpPlan) -> ChangeSet:
        return _changeset_or_empty(p.changeset, "dream")

    if dry_run:
        dry_plan, dry_outcome = plan_and_execute(settings, plan, changeset_of, now, dry_run=True)
        return DreamOutcome("dry-run", None, dry_plan, dry_outcome)
    lock = try_acquire(layout.state_dir, now)
    if lock is None:
        return DreamOutcome("skipped", "locked")
    started = time.monotonic()
    with lock:
        if model is not None:  # ask the model before taking the writer lock
            warm_dream(dreamer, layout.memory_root)
        dream_plan, outcome = plan_and_execute(settings, plan, changeset_of, now)
        state.update_meta(layout, dream_plan.meta_updates, now)
        _remember_own_stamps(settings)
    status = "updated" if dream_plan.touched_topics else "noop"
    emit_event(
        settings,
        telemetry.DREAM,
        now,
        trigger="manual" if force else "auto",
        status=status,
        deduped_entries=dream_plan.deduped_entries,
        touched_topics=",".join(dream_plan.touched_topics),
        touched_topics_count=len(dream_plan.touched_topics),
        duration_ms=_elapsed_ms(started),
        **_strategy_fields(dream_plan.strategy),
    )
    return DreamOutcome(status, None, dream_plan, outcome)


# --------------------------------------------------------------------------- forget


@dataclass(frozen=True)
class ForgetOutcome:
    plan: ForgetOpPlan
    outcome: Outcome


def run_forget(
    settings: Settings,
    now: datetime,
    *,
    query: str | None,
    ids: Sequence[str] = (),
    dry_run: bool = False,
    planner: str = "auto",
) -> ForgetOutcome:
    """Remove matching entries as one commit (spec §11); nothing matched is an error."""
    from qmem_git.ops.models import forget_selector, model_for, warm_forget

    model = model_for(planner, settings.model)
    selector = forget_selector(model)
    ensure_repository(settings, now, dry_run=dry_run)
    layout = settings.layout
    started = time.monotonic()
    if model is not None and not ids:  # ask the model before taking the writer lock
        warm_forget(selector, layout.memory_root, query)
    forget_plan, outcome = plan_and_execute(
        settings,
        lambda: plan_forget_op(
            layout.memory_root, query=query, ids=ids, now=now, selector=selector
        ),
        lambda p: _changeset_or_empty(p.changeset, "forget"),
        now,
        dry_run=dry_run,
    )
    if not forget_plan.matches:
        raise NothingToDo(
            f"no memory matches {query!r}" if query else "no memory matches those ids",
            "list what is there with 'qmem-git recall <words>' or look at MEMORY.md",
        )
    if not dry_run:
        state.update_meta(layout, forget_plan.meta_updates, now)
        emit_event(
            settings,
            telemetry.FORGET,
            now,
            status="updated" if outcome.commit else "noop",
            removed_entries=forget_plan.removed_count,
            touched_topics=",".join(outcome.changeset.topics),
            duration_ms=_elapsed_ms(started),
            **_strategy_fields(forget_plan.strategy),
        )
    return ForgetOutcome(forget_plan, outcome)


# --------------------------------------------------------------------------- restore


@dataclass(frozen=True)
class RestoreOutcome:
    candidates: list[Any] = field(default_factory=list)
    outcome: Outcome | None = None


def run_restore(
    settings: Settings,
    now: datetime,
    *,
    query: str | None,
    ids: Sequence[str] = (),
    from_rev: str | None = None,
    dry_run: bool = False,
) -> RestoreOutcome:
    """Bring back memories a forget or dream removed, as one commit."""
    from qmem_git.ops.restore import find_restorable, plan_restore

    ensure_repository(settings, now, dry_run=dry_run)
    root = settings.layout.memory_root
    candidates, outcome = plan_and_execute(
        settings,
        lambda: find_restorable(root, query, ids, from_rev, pending=dry_run),
        lambda found: plan_restore(root, found),
        now,
        dry_run=dry_run,
    )
    return RestoreOutcome(candidates, outcome)
