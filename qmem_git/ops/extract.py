"""Plan one extraction run over a transcript (spec §7.2-§7.9) as a ChangeSet and state updates.

Nothing here writes: the caller applies the ChangeSet (one commit) and, unless the run was
skipped, writes ``cursor`` to extract-cursor.json and merges ``meta_updates`` into meta.json —
both machine-local state files outside the commit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from qmem_git.core.changes import ChangeSet
from qmem_git.core.extract import (
    SKIP_MEMORY_TOOL,
    Message,
    drop_memory_turns,
    extraction_meta_updates,
    next_cursor,
    skipped_cursor,
    slice_messages,
    system_message,
)
from qmem_git.core.patches import Patch, PatchPlan, drop_secret_patches, normalize_patches
from qmem_git.core.planner import plan_heuristic
from qmem_git.core.text import clean_text
from qmem_git.integrations.transcripts import Transcript
from qmem_git.ops.models import PlannedPatches, Strategy
from qmem_git.ops.remember import patch_notes, plan_patches_on_disk

Planner = Callable[[list[Message]], "list[Patch] | PlannedPatches"]
"""Plain planners (``plan_heuristic``) return patches; ``ops.models`` planners add a strategy."""


@dataclass(frozen=True)
class ExtractPlan:
    """What an extraction run would do; ``changeset`` is None when no file changes."""

    changeset: ChangeSet | None
    patches: list[Patch]
    touched_topics: list[str]
    skipped_reason: str | None
    cursor: dict[str, Any]
    meta_updates: dict[str, Any]
    system_message: str | None = None
    dropped_secrets: list[str] = field(default_factory=list)
    bad_lines: int = 0
    strategy: Strategy | None = None  # None: a plain planner, no Qmem-Strategy trailer


@dataclass(frozen=True)
class ExtractSlice:
    """The part of a transcript one extraction plans (spec §7.2; agent-integration §4 rule 1).

    ``messages`` leaves out turns that wrote memory themselves; ``all_wrote_memory`` is True
    when every user message was left out for that reason (the run is skipped).
    """

    session: str | None
    messages: list[Message]
    next_offset: int
    all_wrote_memory: bool


def clean_session(session: str | None) -> str | None:
    """A session id as recorded (cursor, trailer): no control or half characters."""
    return clean_text(session) if session else session


def extract_slice(
    transcript: Transcript, session_id: str | None, cursor: Mapping[str, Any]
) -> ExtractSlice:
    """The messages after the cursor that the planner is asked about.

    ``plan_extract`` and ``ops.models.warm_extract`` (the model asked before the writer lock)
    both slice here, so the early answer matches the question asked under the lock.
    """
    session = clean_session(session_id or transcript.session_id)
    selected, next_offset = slice_messages(transcript.messages, cursor, session)
    eligible, all_wrote_memory = drop_memory_turns(selected)
    return ExtractSlice(session, eligible, next_offset, all_wrote_memory)


def plan_extract(
    memory_root: str,
    transcript: Transcript,
    session_id: str | None,
    cursor: Mapping[str, Any],
    now: datetime,
    *,
    planner: Planner = plan_heuristic,
) -> ExtractPlan:
    """Slice the transcript at the cursor, plan patches, and plan the files they change."""
    part = extract_slice(transcript, session_id, cursor)
    session = part.session
    if part.all_wrote_memory:
        return ExtractPlan(
            changeset=None,
            patches=[],
            touched_topics=[],
            skipped_reason=SKIP_MEMORY_TOOL,
            cursor=skipped_cursor(session, now),
            meta_updates={},
            bad_lines=transcript.bad_lines,
        )
    raw, strategy = run_planner(planner, part.messages)
    patches, dropped = drop_secret_patches(normalize_patches(raw))
    plan = plan_patches_on_disk(memory_root, patches, now)
    return ExtractPlan(
        changeset=extract_changeset(plan, session, strategy),
        patches=patches,
        touched_topics=plan.touched_topics,
        skipped_reason=None,
        cursor=next_cursor(session, part.next_offset, now),
        meta_updates=extraction_meta_updates(plan.touched_topics, session, now),
        system_message=system_message(plan.touched_topics),
        dropped_secrets=dropped,
        bad_lines=transcript.bad_lines,
        strategy=strategy,
    )


def run_planner(planner: Planner, messages: list[Message]) -> tuple[list[Patch], Strategy | None]:
    """The planner's patches and, when it reports one, its strategy."""
    result = planner(messages)
    if isinstance(result, PlannedPatches):
        return result.patches, result.strategy
    return result, None


def extract_changeset(
    plan: PatchPlan, session: str | None, strategy: Strategy | None = None
) -> ChangeSet | None:
    """One ``extract`` commit for the planned writes, or None when nothing changes."""
    if plan.is_empty:
        return None
    return ChangeSet(
        op="extract",
        subject=extract_subject(plan, session),
        writes=dict(plan.writes),
        topics=tuple(plan.touched_topics),
        added=len(plan.created),
        removed=0,
        session=session or None,
        notes=patch_notes(plan),
        trailers=strategy.trailers() if strategy else (),
    )


def extract_subject(plan: PatchPlan, session: str | None) -> str:
    """``2 memories from session abc123 (user, reference)``."""
    count = len(plan.created) + len(plan.updated)
    noun = "memory" if count == 1 else "memories"
    source = f"session {session[:12]}" if session else "transcript"
    return f"{count} {noun} from {source} ({', '.join(plan.touched_topics)})"
