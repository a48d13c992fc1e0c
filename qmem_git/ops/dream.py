"""Dream: gate a scheduled consolidation and plan the mechanical pass as one ChangeSet (spec §8).

A scheduled dream runs as::

    gate = gate_dream(state_dir, chats_dir, session_id, now)
    if gate.proceed and (lock := try_acquire(state_dir, now)):
        with lock:
            plan = plan_dream_op(memory_root, now, session_id=session_id)
            apply the ChangeSet (if any), then merge ``plan.meta_updates`` into meta.json

``--force`` (a manual dream) skips the gates but still takes the lock.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from qmem_git.core.changes import ChangeSet
from qmem_git.core.dedupe import DreamPlan, plan_dream
from qmem_git.core.dreamgate import (
    DISABLED,
    FORCED,
    GateResult,
    evaluate_gates,
    skipped,
)
from qmem_git.core.statefile import iso_ms
from qmem_git.ops.models import DreamPlanner, Strategy
from qmem_git.ops.remember import unpinned
from qmem_git.store.consolidation import (
    list_session_files,
    lock_is_live,
    read_last_scan,
    record_scan,
)
from qmem_git.store.state import load_meta
from qmem_git.store.workdir import read_text, scan_documents

DEDUPED_TRAILER = "Qmem-Deduped"


@dataclass(frozen=True)
class DreamOpPlan:
    """The dream's commit (None when the store is already clean) and its meta.json updates."""

    changeset: ChangeSet | None
    deduped_entries: int
    touched_topics: tuple[str, ...]
    system_message: str | None
    meta_updates: dict[str, Any] = field(default_factory=dict)
    strategy: Strategy | None = None  # None: the plain mechanical pass, no trailer


def plan_dream_op(
    memory_root: str,
    now: datetime,
    *,
    session_id: str | None = None,
    manual: bool = False,
    planner: DreamPlanner | None = None,
) -> DreamOpPlan:
    """Scan the memory root and plan the dream (spec §8.4; §8.5 when ``manual``).

    ``planner`` (from ``ops.models.dream_planner``) may ask a model first; without one this is
    the mechanical pass.
    """
    docs = unpinned(scan_documents(memory_root))  # pinned/: never merged, moved or deleted

    def read(rel: str) -> str | None:
        return read_text(os.path.join(memory_root, rel))

    strategy: Strategy | None = None
    if planner is None:
        plan = plan_dream(docs, read)
    else:
        planned = planner(docs, read)
        plan, strategy = planned.plan, planned.strategy
    return DreamOpPlan(
        changeset=dream_changeset(plan, session_id, strategy),
        deduped_entries=plan.deduped_entries,
        touched_topics=tuple(plan.touched_topics),
        system_message=plan.system_message,
        meta_updates=dream_meta_updates(plan, now, session_id=session_id, manual=manual),
        strategy=strategy,
    )


def dream_changeset(
    plan: DreamPlan, session_id: str | None = None, strategy: Strategy | None = None
) -> ChangeSet | None:
    if plan.is_empty:
        return None
    return ChangeSet(
        op="dream",
        subject=dream_subject(plan),
        writes=dict(plan.writes),
        deletes=tuple(plan.deletes),
        topics=tuple(plan.touched_topics),
        removed=len(plan.deletes),
        session=session_id,
        trailers=((DEDUPED_TRAILER, str(plan.deduped_entries)),)
        + (strategy.trailers() if strategy else ()),
    )


def dream_subject(plan: DreamPlan) -> str:
    """``deduplicated 3 entries (user)``, or ``rewrote 2 files (user)`` for format-only changes."""
    topics = ", ".join(plan.touched_topics)
    if plan.deduped_entries:
        noun = "entry" if plan.deduped_entries == 1 else "entries"
        return f"deduplicated {plan.deduped_entries} {noun} ({topics})"
    count = len(plan.writes) + len(plan.deletes)
    return f"rewrote {count} {'file' if count == 1 else 'files'} ({topics})"


def dream_meta_updates(
    plan: DreamPlan, now: datetime, *, session_id: str | None = None, manual: bool = False
) -> dict[str, Any]:
    """meta.json fields a finished dream writes (spec §8.2 step 3, §8.4 steps 3-4, §8.5).

    A manual dream records its real touched topics and status (the source writes ``[]`` and
    ``noop`` even when files changed, which would make meta.json disagree with history).
    """
    stamp = iso_ms(now)
    updates: dict[str, Any] = {
        "updatedAt": stamp,
        "lastDreamAt": stamp,
        "lastDreamTouchedTopics": list(plan.touched_topics),
        "lastDreamStatus": "updated" if plan.touched_topics else "noop",
    }
    if session_id is not None:
        updates["lastDreamSessionId"] = session_id
    if manual:
        updates["recentSessionIdsSinceDream"] = []
    return updates


def gate_dream(
    state_dir: str,
    chats_dir: str,
    session_id: str,
    now: datetime,
    *,
    enabled: bool = True,
    force: bool = False,
) -> GateResult:
    """Spec §8.1 gates (24 hours, 5 sessions) against the state dir and the host's transcripts.

    Nothing is read when auto-dream is disabled. The caller ensures the scaffold; a missing
    meta.json reads as "never dreamed".
    """
    if force:
        return GateResult("proceed", FORCED)
    if not enabled:
        return skipped(DISABLED)
    result = evaluate_gates(
        enabled=True,
        meta=load_meta(state_dir),
        session_id=session_id,
        now=now,
        last_scan_at=read_last_scan(state_dir),
        session_mtimes=lambda: list_session_files(chats_dir),
        lock_live=lambda: lock_is_live(state_dir, now),
    )
    if result.scanned:
        record_scan(state_dir, now)
    return result
