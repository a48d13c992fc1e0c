"""MEMORY.md as the agent builds it for each of Qwen Code's tiers: the project and user tiers
share ``buildManagedAutoMemoryIndex`` (newest first); the team tier has its own format
(:mod:`qmem_git.core.teamindex`). A team folder is known by its place,
``<git root>/.qwen/team-memory``, so every reader (``index``, ``validate``, the hooks) agrees."""

from __future__ import annotations

import os

from qmem_git.core.index import IndexResult, index_is_current
from qmem_git.core.paths import is_team_root
from qmem_git.core.teamindex import build_team_index
from qmem_git.errors import UnsafePath
from qmem_git.store.workdir import atomic_write, index_path, read_text, render_index, scan_documents

EVERY_DOCUMENT = 1 << 30  # the team scan sorts every memory by path before it keeps 200


def expected_index(root: str) -> IndexResult:
    """The MEMORY.md the agent would write for the memory folder ``root`` now."""
    if is_team_root(os.path.abspath(root).replace(os.sep, "/")):
        return build_team_index(scan_documents(root, EVERY_DOCUMENT))
    return render_index(root)


def write_team_index(root: str) -> tuple[bool, IndexResult]:
    """Rewrite the team folder's MEMORY.md when it is stale (never committed: the project's
    git does that); (whether it was written, the index)."""
    if os.path.islink(root):
        raise UnsafePath(
            f"{root} is a symbolic link: the team index would be written outside the project",
            hint="make .qwen/team-memory a real folder of the project (as Qwen Code requires)",
        )
    expected = expected_index(root)
    if index_is_current(read_text(index_path(root)), expected):
        return False, expected
    atomic_write(index_path(root), expected.text.encode("utf-8"))
    return True, expected
