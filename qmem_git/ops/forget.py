"""Forget: select entries by query or explicit ids and plan their removal as one ChangeSet (§11)."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from qmem_git.core.changes import ChangeSet
from qmem_git.core.forget import (
    Candidate,
    ForgetPlan,
    list_candidates,
    plan_forget,
    select_by_ids,
    select_heuristic,
)
from qmem_git.core.model import Document
from qmem_git.core.names import check_path_safety
from qmem_git.core.statefile import iso_ms
from qmem_git.core.text import clip, normalize_space
from qmem_git.errors import UsageError
from qmem_git.ops.models import ForgetSelector, Strategy
from qmem_git.ops.remember import unpinned
from qmem_git.store.walk import is_memory_path
from qmem_git.store.workdir import FileInfo, load_document, read_text, scan_documents

_ID_SUFFIX = re.compile(r":\d+$")  # "path:N" names entry N of a multi-entry file

SUBJECT_QUERY_CHARS = 60
"""Queries are cut in the subject: it is one line, and a query may hold something private."""


@dataclass(frozen=True)
class ForgetOpPlan:
    """The forget's commit (None when nothing matched or nothing changed) and what it reports."""

    changeset: ChangeSet | None
    matches: tuple[Candidate, ...]
    removed_count: int
    system_message: str | None
    removed: tuple[Candidate, ...] = ()
    meta_updates: dict[str, Any] = field(default_factory=dict)
    strategy: Strategy | None = None  # None: ids, or the plain heuristic without a selector


def list_forget_candidates(memory_root: str) -> list[Candidate]:
    """Every entry with its forget id, for listing and ``--dry-run``."""
    return list_candidates(scan_documents(memory_root))


def plan_forget_op(
    memory_root: str,
    *,
    query: str | None,
    ids: Sequence[str],
    now: datetime,
    limit: int | None = None,
    session_id: str | None = None,
    selector: ForgetSelector | None = None,
) -> ForgetOpPlan:
    """Select by ``ids`` or by ``query`` (unlimited by default) and plan the removal.

    ``selector`` (from ``ops.models.forget_selector``) may ask a model (spec §11.2); without one
    a query selects by the substring heuristic.
    """
    if ids and query and query.strip():
        raise UsageError("give either a query or --id, not both", "drop the query or the ids")
    docs = scan_documents(memory_root)
    if ids:
        docs += _named_documents(memory_root, docs, ids)
    # a query never selects from pinned/ (the person's); --id names exactly what to remove
    candidates = list_candidates(docs if ids else unpinned(docs))
    strategy: Strategy | None = None
    if ids:
        matches = select_by_ids(candidates, ids)
    elif selector is not None:
        selected = selector(candidates, (query or "").strip(), limit)
        matches, strategy = selected.matches, selected.strategy
    else:
        matches = select_heuristic(candidates, (query or "").strip(), limit)
    if not matches:
        return ForgetOpPlan(None, (), 0, None, strategy=strategy)
    plan = plan_forget(docs, matches, lambda rel: read_text(os.path.join(memory_root, rel)))
    subject = forget_subject(plan, query, ids)
    return ForgetOpPlan(
        changeset=forget_changeset(plan, subject, session_id, strategy),
        matches=tuple(matches),
        removed_count=plan.removed_count,
        system_message=plan.system_message,
        removed=tuple(plan.removed),
        meta_updates={"updatedAt": iso_ms(now)} if plan.touched_topics else {},
        strategy=strategy,
    )


def _named_documents(memory_root: str, docs: list[Document], ids: Sequence[str]) -> list[Document]:
    """Files named by ``ids`` that the scan left out (it reads only the newest 200, spec §5)."""
    scanned = {doc.relative_path for doc in docs}
    found: list[Document] = []
    for rel in dict.fromkeys(_ID_SUFFIX.sub("", cid) for cid in ids):
        if rel in scanned or not is_memory_path(rel) or check_path_safety(rel):
            continue
        path = os.path.join(memory_root, rel)
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode):
            doc = load_document(FileInfo(rel, path, info.st_mtime_ns, info.st_size))
            if doc is not None:
                found.append(doc)
    return found


def forget_changeset(
    plan: ForgetPlan, subject: str, session_id: str | None, strategy: Strategy | None = None
) -> ChangeSet | None:
    if plan.is_empty:
        return None
    return ChangeSet(
        op="forget",
        subject=subject,
        writes=dict(plan.writes),
        deletes=tuple(plan.deletes),
        topics=tuple(plan.touched_topics),
        removed=plan.entries_removed,
        session=session_id,
        trailers=strategy.trailers() if strategy else (),
    )


def forget_subject(plan: ForgetPlan, query: str | None, ids: Sequence[str]) -> str:
    """``forgot 2 entries matching "terse"`` or ``forgot 1 entry by id``."""
    count = plan.entries_removed
    what = f"forgot {count} {'entry' if count == 1 else 'entries'}"
    if ids:
        return f"{what} by id"
    return f'{what} matching "{clip(normalize_space(query or ""), SUBJECT_QUERY_CHARS)}"'
