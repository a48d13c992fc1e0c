"""``qmem-git remember``: one memory from the user, filtered and named as in §7.6-§7.7."""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import datetime

from qmem_git.core.changes import ChangeSet
from qmem_git.core.model import MEMORY_TYPES, Document, MemoryType
from qmem_git.core.names import is_pinned
from qmem_git.core.patches import (
    Patch,
    PatchPlan,
    clean_detail,
    clean_summary,
    patch_secrets,
    plan_patches,
    rejection_reason,
    size_problem,
    title_for,
)
from qmem_git.core.planner import topic_of
from qmem_git.errors import QmemError, SecretDetected, UsageError
from qmem_git.store.workdir import TakenPaths, read_text, scan_documents


class MemoryRejected(QmemError):
    """The text is not a durable memory (too short, a question, temporary); nothing is written."""

    exit_code = 1


def plan_remember(
    memory_root: str,
    text: str,
    *,
    kind: str | None = None,
    why: str | None = None,
    how: str | None = None,
    now: datetime,
) -> ChangeSet:
    """One ``remember`` commit; an empty ChangeSet when the same memory is already saved."""
    return plan_patch(memory_root, remember_patch(text, kind=kind, why=why, how=how), now)


def plan_patch(memory_root: str, patch: Patch, now: datetime) -> ChangeSet:
    """:func:`plan_remember` for a patch already checked by :func:`remember_patch`."""
    plan = plan_patches_on_disk(memory_root, [patch], now)
    title = title_for(patch.summary)
    if plan.is_empty:
        return ChangeSet(op="remember", subject=f"already saved: {title}")
    verb = "add" if plan.created else "update"
    return ChangeSet(
        op="remember",
        subject=f"{verb} {title} ({patch.topic})",
        writes=dict(plan.writes),
        topics=tuple(plan.touched_topics),
        added=len(plan.created),
        notes=patch_notes(plan),
    )


def plan_patches_on_disk(memory_root: str, patches: Iterable[Patch], now: datetime) -> PatchPlan:
    """Spec §7.7 file plan for ``patches`` over the memory files now in ``memory_root``.

    Shared by ``remember`` and ``ops.extract``; kept here because ``remember``'s fast path
    must not import the extraction modules.
    """
    return plan_patches(
        unpinned(scan_documents(memory_root)),  # pinned/ is the person's: never updated
        patches,
        read_text=lambda rel: read_text(os.path.join(memory_root, rel)) or "",
        path_taken=TakenPaths(memory_root),
        now_ms=int(now.timestamp() * 1000),
    )


def patch_notes(plan: PatchPlan) -> tuple[str, ...]:
    """``created <path>`` / ``updated <path>`` lines a ChangeSet reports."""
    return tuple(f"created {rel}" for rel in plan.created) + tuple(
        f"updated {rel}" for rel in plan.updated
    )


def remember_patch(
    text: str, *, kind: str | None = None, why: str | None = None, how: str | None = None
) -> Patch:
    """The one patch ``remember`` applies, or an error saying why the text cannot be saved."""
    summary = clean_summary(text)
    reason = rejection_reason(summary)
    if reason is not None:
        hint = (
            "remove the conflict marker line (<<<<<<<, =======, >>>>>>>) from the text"
            if "conflict marker" in reason
            else "state a durable fact of at least 12 characters, without temporal words "
            "(today, now, currently, this session, temporary, for this task)"
        )
        raise MemoryRejected(f"not saved: {reason}", hint)
    patch = Patch(
        topic=_topic(kind, summary),
        summary=summary,
        why=clean_detail(why),
        how_to_apply=clean_detail(how),
    )
    too_long = size_problem(patch)
    if too_long is not None:
        raise MemoryRejected(
            f"not saved: {too_long}", "save the fact itself; link to a document for details"
        )
    rules = patch_secrets(patch)
    if rules:
        raise SecretDetected(
            f"not saved: the text contains a secret ({', '.join(rules)})",
            "remove the credential; memories are committed and may be synced",
        )
    return patch


def _topic(kind: str | None, summary: str) -> MemoryType:
    """``--type`` when given; else the type by Qwen's definitions (``core.sentences``), else
    the spec's §7.5 step 4 keyword topic, else ``user``: ``We deploy with bg.sh`` is a
    project fact, not a cross-project user memory."""
    if kind is None:
        return topic_of(summary) or "user"
    for memory_type in MEMORY_TYPES:
        if kind == memory_type:
            return memory_type
    raise UsageError(
        f"memory type {kind!r} is not one of {', '.join(MEMORY_TYPES)}",
        "pass --type user, feedback, project or reference",
    )


def unpinned(docs: list[Document]) -> list[Document]:
    """``docs`` without those in ``pinned/`` (any case): extraction, dream and a query forget
    never write, move or delete there (Qwen Code 0.24's rule for its own agents)."""
    return [doc for doc in docs if not is_pinned(doc.relative_path)]
