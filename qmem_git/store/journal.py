"""The one ChangeSet a writer is applying, written down before the work tree changes.

A ChangeSet touches several files before its single commit exists. Killed in between, the
work tree holds part of it, and crash recovery, which commits what it finds, would commit
half an operation as ``recover`` (half a dream: a duplicate deleted, its details not yet
merged). So ``store.repo`` records the ChangeSet here (durably) first and removes the record
once its commit and the git index are written; the next writer finds a record left behind
and, when the branch never moved, puts back the files the ChangeSet had changed (see
``store.recovery``). A killed command then did nothing, as it reported nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Literal

from qmem_git.store.workdir import fsync_dir

NAME = "qmem-apply.json"


class Journal:
    """``parent``: the commit the ChangeSet was applied on (None: the first). ``writes``: path
    -> blob id it wrote; ``deletes``: paths it removed."""

    __slots__ = ("deletes", "op", "parent", "writes")

    def __init__(
        self, op: str, parent: str | None, writes: dict[str, str], deletes: list[str]
    ) -> None:
        self.op = op
        self.parent = parent
        self.writes = writes
        self.deletes = deletes


def path_in(git_dir: str) -> str:
    return os.path.join(git_dir, NAME)


def begin(git_dir: str, journal: Journal) -> None:
    """Write the record and make it durable before any file of the ChangeSet changes."""
    data = {
        "op": journal.op,
        "parent": journal.parent,
        "writes": journal.writes,
        "deletes": journal.deletes,
    }
    path = path_in(git_dir)
    tmp = path + ".tmp"  # a fixed name (one writer holds the lock): a kill leaves no litter
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    fsync_dir(git_dir)


def end(git_dir: str) -> None:
    """The ChangeSet is committed (or undone): forget it."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path_in(git_dir))


def read(git_dir: str) -> Journal | Literal[False] | None:
    """The record left behind; None when there is none; False when it cannot be read (a kill
    while it was written: no file of the ChangeSet had changed yet)."""
    try:
        with open(path_in(git_dir), encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return False
    try:
        writes = {str(k): str(v) for k, v in dict(data["writes"]).items()}
        deletes = [str(p) for p in list(data["deletes"])]
        parent = data["parent"]
        return Journal(str(data["op"]), None if parent is None else str(parent), writes, deletes)
    except (KeyError, TypeError, ValueError):
        return False
