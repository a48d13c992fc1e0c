"""What a command needs before it starts: a memory repository (and, to write, a memory folder).

Apart from :mod:`qmem_git.ops.lifecycle` (index checks, init, ``git`` commands), whose imports
a ``sync`` does not need: a push imports this, not those (~10 ms).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from qmem_git.store.relocate import repository
from qmem_git.store.walk import check_store

if TYPE_CHECKING:
    from qmem_git.settings import Settings


def require_repository(settings: Settings) -> None:
    require(settings, "")


def require_store(settings: Settings) -> None:
    """:func:`require_repository` for a command that writes: the folder must also be a memory
    folder (``walk.check_store``); reading commands work on any store."""
    require(settings, "")
    check_store(settings.layout)


def require(settings: Settings, why: str) -> None:
    """A usage error (``why`` said in it) when the store has no repository yet."""
    from qmem_git.errors import UsageError

    if not os.path.isdir(repository(settings.layout.memory_root)):
        check_store(settings.layout)  # a project's folder: say so, not "run init" (init refuses)
        reason = f" ({why})" if why else ""
        raise UsageError(
            f"{settings.layout.memory_root} is not a memory repository{reason}",
            "run 'qmem-git init' first",
        )
