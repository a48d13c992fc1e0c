"""Commit a folder another program owns exactly as it is (Claude Code's auto-memory).

Claude Code writes its memories and its own ``MEMORY.md`` (a different index format from Qwen
Code's), so nothing here writes into the folder: every ``*.md`` (``MEMORY.md`` included) is
committed byte for byte, and a file that must not be committed (``core.holdback``: a secret,
over the size limit, not UTF-8, still being written) stays out of history, its HEAD version
kept. One commit per snapshot, under the store's writer lock, by compare-and-swap. A sync
of the folder (``as_is_tenure``) commits it this way before it writes the fetched or merged
files.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from qmem_git.core.changes import ChangeSet, FileChange, render_commit_message
from qmem_git.core.claudepaths import claude_memory_type
from qmem_git.core.entries import topics_of
from qmem_git.core.holdback import BEING_WRITTEN, hold_reason
from qmem_git.core.limits import INDEX_NAME
from qmem_git.errors import RepoLocked
from qmem_git.store.walk import memory_paths

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from datetime import datetime

    from qmem_git.core.paths import Layout
    from qmem_git.store.recovery import RecoveryReport
    from qmem_git.store.repo import Identity, Repository

SOURCE_TRAILER = ("Qmem-Source", "claude")


@dataclass(frozen=True)
class AsIsResult:
    """The commit made (None: nothing changed, or a dry run), its changes and message, and
    the files left out of it (path -> why)."""

    commit: str | None
    changes: list[FileChange]
    message: str
    held: dict[str, str] = field(default_factory=dict)


def snapshot_as_is(
    layout: Layout,
    *,
    identity: Callable[[], Identity],
    host: str,
    now: datetime,
    lock_timeout: float,
    quiet_seconds: float,
    dry_run: bool = False,
) -> AsIsResult:
    """One commit of every change in the folder since HEAD, files taken as they are."""
    from qmem_git.store.locks import writer_lock

    with writer_lock(layout, lock_timeout):
        return commit_as_is(
            layout,
            identity=identity,
            host=host,
            now=now,
            quiet_seconds=quiet_seconds,
            dry_run=dry_run,
        )


def commit_as_is(
    layout: Layout,
    *,
    identity: Callable[[], Identity],
    host: str,
    now: datetime,
    quiet_seconds: float,
    dry_run: bool = False,
) -> AsIsResult:
    """:func:`snapshot_as_is` for a caller that holds the writer lock."""
    from qmem_git.store.repo import Repository

    with Repository(layout.memory_root) as repo:
        branch, parent = repo.head()
        base = repo.tree_of(parent)
        old = repo.flatten(base)
        touched, contents, held = _survey(layout.memory_root, old, quiet_seconds)
        changes = [_status(rel, old, touched) for rel in sorted(touched)]
        cs = _changeset(changes, contents, held)
        message = render_commit_message(cs, host, changes)
        if not changes or dry_run:
            return AsIsResult(None, changes, message, held)
        _store(repo, contents)
        tree = repo.build_tree(base, touched)
        commit = repo.write_commit(tree, [parent] if parent else [], identity(), now, message)
        if not repo.move_branch(branch, parent, commit, f"snapshot: {cs.subject}"):
            raise RepoLocked(
                "another program committed in the memory repository meanwhile",
                hint="run the command again",
            )
        from qmem_git.store.repo import update_index

        update_index(repo, touched, commit)
        return AsIsResult(commit, changes, message, held)


@contextlib.contextmanager
def as_is_tenure(
    layout: Layout,
    *,
    identity: Identity,
    host: str,
    now: datetime,
    lock_timeout: float,
    recover: bool,
    snapshots: list[AsIsResult],
) -> Iterator[RecoveryReport | None]:
    """The writer lock as a sync of this folder takes it (``store.sync.Locker``). With
    ``recover``, first what a killed writer left is cleared, then every change in the folder
    is committed as it is (appended to ``snapshots``), files that must not be committed held
    back: never Qwen Code's recovery, which would rebuild MEMORY.md. No file is held back as
    still being written (``quiet_seconds`` 0, as a Qwen store's sync): the sync writes the
    folder next, so what is there must be in history first."""
    from qmem_git.store import locks
    from qmem_git.store.recovery import clear_interrupted
    from qmem_git.store.repo import Repository

    with locks.writer_tenure(layout, lock_timeout):
        if not recover:
            yield None
            return
        with Repository(layout.memory_root) as repo:
            cleared = clear_interrupted(repo)
        done = commit_as_is(layout, identity=lambda: identity, host=host, now=now, quiet_seconds=0)
        snapshots.append(done)
        said = () if done.commit is None else (_committed(done),)
        yield cleared._replace(
            held=tuple(sorted(done.held.items())), warnings=cleared.warnings + said
        )


def _committed(done: AsIsResult) -> str:
    assert done.commit is not None
    return f"committed {len(done.changes)} changed file(s) as {done.commit[:12]} (op snapshot)"


def _survey(
    root: str, old: dict[str, str], quiet_seconds: float
) -> tuple[dict[str, str | None], dict[str, bytes], dict[str, str]]:
    """(path -> new blob id or None for deleted, new contents, held-back paths)."""
    from qmem_git.store.repo import blob_id

    paths = memory_paths(root)
    if os.path.isfile(os.path.join(root, INDEX_NAME)):
        paths.append(INDEX_NAME)
    quiet_ns = time.time_ns() - int(quiet_seconds * 1e9)
    touched: dict[str, str | None] = {}
    contents: dict[str, bytes] = {}
    held: dict[str, str] = {}
    for rel in paths:
        data, mtime_ns = _read(os.path.join(root, rel))
        why = hold_reason(rel, data) if data is not None else "unreadable"
        if why is None and mtime_ns > quiet_ns:
            why = BEING_WRITTEN
        if why is not None or data is None:
            held[rel] = why or "unreadable"
            continue
        sha = blob_id(data)
        if old.get(rel) != sha:
            touched[rel], contents[rel] = sha, data
    for rel in old:
        if rel not in touched and rel not in held and rel not in paths:
            touched[rel] = None
    return touched, contents, held


def _read(path: str) -> tuple[bytes | None, int]:
    try:
        with open(path, "rb") as handle:
            return handle.read(), os.fstat(handle.fileno()).st_mtime_ns
    except OSError:
        return None, 0


def _status(rel: str, old: dict[str, str], touched: dict[str, str | None]) -> FileChange:
    if touched[rel] is None:
        return FileChange("D", rel)
    return FileChange("M" if rel in old else "A", rel)


def _changeset(
    changes: list[FileChange], contents: dict[str, bytes], held: dict[str, str]
) -> ChangeSet:
    kinds = (claude_memory_type(data.decode("utf-8")) for data in contents.values())
    statuses = {c.status for c in changes}
    verb = "add" if statuses == {"A"} else "delete" if statuses == {"D"} else "update"
    what = changes[0].path if len(changes) == 1 else f"{len(changes)} memory files"
    return ChangeSet(
        op="snapshot",
        subject=f"{verb} {what} (Claude Code)" if changes else "nothing to change",
        topics=topics_of(kind for kind in kinds if kind),
        held=held,
        trailers=(SOURCE_TRAILER,),
    )


def _store(repo: Repository, contents: dict[str, bytes]) -> None:
    from dulwich.objects import Blob

    for data in contents.values():
        repo.add(Blob.from_string(data))
