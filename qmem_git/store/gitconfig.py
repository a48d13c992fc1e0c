"""Reading a memory repository's ``.git/config``: damage is RepoCorrupt (exit 6), with the way
out, never dulwich's bare ValueError."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from qmem_git.errors import RepoCorrupt

if TYPE_CHECKING:
    from dulwich.config import ConfigFile

    from qmem_git.store.plainconfig import FileReader


def read_git_config(git_dir: str) -> ConfigFile:
    """``git_dir``'s config file, parsed; RepoCorrupt when it cannot be parsed."""
    from dulwich.config import ConfigFile

    path = os.path.join(git_dir, "config")
    try:
        return ConfigFile.from_path(path)
    except ValueError as exc:  # dulwich: "expected trailing ]", invalid escapes, bad UTF-8, ...
        raise config_damaged(git_dir, exc) from exc


def read_config_fast(git_dir: str) -> FileReader:
    """``git_dir``'s config to read: by :mod:`~qmem_git.store.plainconfig` when it is plain
    (no ``dulwich.config`` import, ~8 ms of a push), else as :func:`read_git_config`."""
    from qmem_git.store.plainconfig import read_plain

    try:
        plain = read_plain(os.path.join(git_dir, "config"))
    except OSError:
        plain = None  # dulwich says what is wrong
    return plain if plain is not None else read_git_config(git_dir)


def config_damaged(git_dir: str, exc: BaseException) -> RepoCorrupt:
    path = os.path.join(git_dir, "config")
    return RepoCorrupt(
        f"memory repository is corrupt: {path} cannot be read ({exc})",
        hint=f"fix or remove the damaged lines of {path} (`git config -f {path} --list` "
        "names the first one); qmem-git adds its own settings back on the next write",
    )
