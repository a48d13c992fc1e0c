"""Companion mode: turn what Qwen Code's own auto-memory changed into one commit.

The operation is inferred from meta.json: Qwen Code stamps ``lastExtractionAt`` /
``lastDreamAt`` when it extracts or dreams, so a stamp newer than the one recorded at the last
snapshot says which of them produced the change. A tiny record in the state dir
(``snapshot-meta.json``) keeps those stamps between snapshots.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from qmem_git.core.changes import ChangeSet
from qmem_git.core.entries import entry_delta, memory_type, topics_of
from qmem_git.core.holdback import BEING_WRITTEN, SYMLINK, hold_reason
from qmem_git.core.statefile import dumps_state, parse_iso
from qmem_git.store.recovery import WorkChange, case_collisions
from qmem_git.store.repo import blocked_by
from qmem_git.store.state import load_meta, read_json_object
from qmem_git.store.walk import memory_paths
from qmem_git.store.workdir import atomic_write, files_in_scan

if TYPE_CHECKING:
    from datetime import datetime

    from qmem_git.ops.runner import Outcome
    from qmem_git.settings import Settings
    from qmem_git.store.writer import WriterStart

SNAPSHOT_META = "snapshot-meta.json"
RECORD_VERSION = 1
TRACKED_KEYS = (
    "lastExtractionAt",
    "lastExtractionSessionId",
    "lastDreamAt",
    "lastDreamSessionId",
)
SOURCE_TRAILER = ("Qmem-Source", "snapshot")

Validator = Callable[[str, bytes], "str | None"]  # why a file may not be committed, or None


@dataclass(frozen=True)
class SnapshotPlan:
    """The commit to make (None when nothing committable changed), the files it leaves where
    they are, uncommitted, and the meta stamps the caller saves with
    :func:`save_snapshot_meta` once the commit is made."""

    changeset: ChangeSet | None
    held: dict[str, str] = field(default_factory=dict)  # path -> why
    meta: dict[str, Any] = field(default_factory=dict)
    statuses: dict[str, str] = field(default_factory=dict)  # path -> A/M/D it commits


def load_snapshot_meta(state_dir: str) -> dict[str, Any] | None:
    """The meta stamps recorded at the last snapshot, or None before the first one."""
    record = read_json_object(os.path.join(state_dir, SNAPSHOT_META))
    if record is None or record.get("version") != RECORD_VERSION:
        return None
    meta = record.get("meta")
    return meta if isinstance(meta, dict) else None


def save_snapshot_meta(state_dir: str, meta: dict[str, Any]) -> None:
    """Record the stamps this snapshot saw (atomic write, versioned)."""
    kept = {key: meta[key] for key in TRACKED_KEYS if key in meta}
    record = {"version": RECORD_VERSION, "meta": kept}
    atomic_write(os.path.join(state_dir, SNAPSHOT_META), dumps_state(record).encode("utf-8"))


def plan_snapshot(
    memory_root: str,
    state_dir: str,
    *,
    previous_meta: dict[str, Any] | None,
    problem_of: Validator = hold_reason,
    op: str | None = None,
    quiet_seconds: float = 0.0,
) -> SnapshotPlan:
    """Everything that differs from HEAD as one ChangeSet; files that must not be committed
    (``core.holdback``) stay where they are and are listed in ``held`` (and in the commit).

    ``op`` overrides the inference (``snapshot --op OP``). ``quiet_seconds``: files changed
    more recently are held back as still being written.
    """
    from qmem_git.store.recovery import changed_paths, worktree_changes

    meta = load_meta(state_dir)
    changes = worktree_changes(memory_root, changed_paths(memory_root))
    writes: dict[str, str] = {}
    deletes: list[str] = []
    held: dict[str, str] = {}
    quiet_ns = time.time_ns() - int(quiet_seconds * 1e9)
    for change in changes:
        why = _held(memory_root, change, problem_of, quiet_ns)
        if why is not None:
            held[change.path] = why
        elif change.data is None:
            deletes.append(change.path)
        else:
            writes[change.path] = change.data.decode("utf-8")
    new = [c.path for c in changes if c.status == "A" and c.path in writes]
    clashes = case_collisions(new, _memory_files(memory_root)) if new else {}
    for rel, problem in clashes.items():
        del writes[rel]
        held[rel] = problem
    kept = [c for c in changes if c.path in writes or c.path in deletes]
    snapshot = {key: meta[key] for key in TRACKED_KEYS if key in meta}
    if not kept:
        return SnapshotPlan(None, held, snapshot)
    statuses = {c.path: c.status for c in kept}
    chosen = op or infer_op(meta, previous_meta, only_deletions=not writes)
    changeset = _changeset(chosen, kept, writes, deletes, meta)
    changeset = changeset._replace(mtimes=_file_times(memory_root, writes), held=held)
    return SnapshotPlan(changeset, held, snapshot, statuses)


def _memory_files(memory_root: str) -> Collection[str]:
    """The memory files on disk: the writer's own scan when there is one, else a walk."""
    scanned = files_in_scan(memory_root)
    return memory_paths(memory_root) if scanned is None else scanned


def _held(memory_root: str, change: WorkChange, problem_of: Validator, quiet_ns: int) -> str | None:
    """Why ``change`` must stay out of the commit, or None. A path behind a symlink, or that
    is one now, reads as deleted: it is held, so HEAD's version is kept."""
    if change.data is not None:
        problem = problem_of(change.path, change.data)
        if problem is None and _mtime_ns(memory_root, change.path) > quiet_ns:
            return BEING_WRITTEN
        return problem
    link = linked_folder(memory_root, change.path)
    if link is not None:
        return f"{SYMLINK} ({link} is a symlink)"
    return SYMLINK if os.path.islink(os.path.join(memory_root, change.path)) else None


def _mtime_ns(memory_root: str, rel: str) -> int:
    try:
        return os.lstat(os.path.join(memory_root, rel)).st_mtime_ns
    except OSError:
        return 0


def linked_folder(memory_root: str, rel: str) -> str | None:
    """The folder on ``rel``'s path that is a symlink, or None: never looked through, so what
    lies behind it is neither read nor committed as deleted."""
    blocker = blocked_by(memory_root, rel)
    if blocker is None or blocker == rel:
        return None
    return blocker if os.path.islink(os.path.join(memory_root, blocker)) else None


def _file_times(memory_root: str, paths: Iterable[str]) -> dict[str, int]:
    """Each file's own time (whole seconds): a memory another tool wrote keeps its age."""
    times = {}
    for rel in paths:
        with contextlib.suppress(OSError):
            times[rel] = os.lstat(os.path.join(memory_root, rel)).st_mtime_ns // 1_000_000_000
    return times


def infer_op(meta: dict[str, Any], previous: dict[str, Any] | None, *, only_deletions: bool) -> str:
    """extract / dream when its meta stamp advanced (the later wins), else forget / edit."""
    extracted = _advanced(meta, previous, "lastExtractionAt")
    dreamed = _advanced(meta, previous, "lastDreamAt")
    if extracted and dreamed:
        return "dream" if dreamed >= extracted else "extract"
    if extracted:
        return "extract"
    if dreamed:
        return "dream"
    return "forget" if only_deletions else "edit"


def _advanced(meta: dict[str, Any], previous: dict[str, Any] | None, key: str) -> float | None:
    """The new stamp (epoch s) when it is later than the recorded one, else None."""
    now = parse_iso(meta.get(key))
    if now is None:
        return None
    before = parse_iso((previous or {}).get(key))
    if before is not None and now <= before:
        return None
    return now.timestamp()


def _changeset(
    op: str,
    kept: list[WorkChange],
    writes: dict[str, str],
    deletes: list[str],
    meta: dict[str, Any],
) -> ChangeSet:
    added = removed = 0
    for change in kept:
        before = _text(change.old_data)
        plus, minus = entry_delta(change.path, before, writes.get(change.path))
        added, removed = added + plus, removed + minus
    topics = topics_of(memory_type(c.path, writes.get(c.path), _text(c.old_data)) for c in kept)
    return ChangeSet(
        op=op,
        subject=_subject(kept),
        writes=writes,
        deletes=tuple(deletes),
        topics=topics,
        added=added,
        removed=removed,
        session=_session(op, meta),
        trailers=(SOURCE_TRAILER,),
    )


def _subject(kept: list[WorkChange]) -> str:
    statuses = {c.status for c in kept}
    verb = "add" if statuses == {"A"} else "delete" if statuses == {"D"} else "update"
    what = kept[0].path if len(kept) == 1 else f"{len(kept)} memory files"
    return f"{verb} {what} (snapshot)"


def _session(op: str, meta: dict[str, Any]) -> str | None:
    key = {"extract": "lastExtractionSessionId", "dream": "lastDreamSessionId"}.get(op)
    value = meta.get(key) if key else None
    return value if isinstance(value, str) and value else None


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "replace")


@dataclass(frozen=True)
class SnapshotOutcome:
    outcome: Outcome
    held: dict[str, str] = field(default_factory=dict)  # path -> why it was not committed


def run_snapshot(
    settings: Settings,
    now: datetime,
    *,
    op: str | None = None,
    dry_run: bool = False,
    started: WriterStart | None = None,
) -> SnapshotOutcome:
    """Commit what another tool (Qwen Code's own memory) changed, op inferred (companion mode).

    Files that must not be committed stay where they are and are reported (``held``).
    ``started``: the writer lock the fast path took on a store already set up, with the
    survey forked (``store.writer``)."""
    from qmem_git.ops.runner import plan_and_execute

    if started is None:
        from qmem_git.ops.lifecycle import ensure_repository

        ensure_repository(settings, now, dry_run=dry_run)
    layout = settings.layout

    def plan() -> SnapshotPlan:
        return plan_snapshot(
            layout.memory_root,
            layout.state_dir,
            previous_meta=load_snapshot_meta(layout.state_dir),
            op=op,
            quiet_seconds=settings.quiet_seconds,
        )

    def changeset_of(p: SnapshotPlan) -> ChangeSet:
        return p.changeset or ChangeSet(op or "snapshot", "nothing to change", held=p.held)

    snap, outcome = plan_and_execute(
        settings,
        plan,
        changeset_of,
        now,
        dry_run=dry_run,
        recover_worktree=False,
        started=started,
    )
    if not dry_run:
        save_snapshot_meta(layout.state_dir, snap.meta)
    return SnapshotOutcome(outcome, dict(snap.held))
