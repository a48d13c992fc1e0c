"""A local remote (a path or ``file://``) opened as a fetch from it or a push into it reads it.

A shared remote is a plain bare repository: its git dir is the path, with ``objects/`` and
``refs/``. One is opened here from its config, refs and object store directly; anything else
(a checkout's ``.git``, a linked worktree, a repository with extensions, shared permissions or
``core.worktree``) by dulwich's ``Repo``, which handles all of those. ``dulwich.repo`` (with
its worktree, hooks and subprocess modules) costs ~5 ms to import and each ``Repo`` another
~0.5 ms to set up, on every push and fetch.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import TracebackType

    from dulwich.config import ConfigFile, StackedConfig
    from dulwich.object_store import DiskObjectStore
    from dulwich.objects import ObjectID
    from dulwich.refs import Ref, RefsContainer
    from dulwich.repo import Repo


class LocalRepository:
    """``git_dir``, ``config`` (the repository's over the user's, as ``Repo.get_config_stack``),
    ``refs``, ``object_store`` and ``bare`` (a checkout's ``.git`` is not, whatever dulwich
    says) of the repository at ``path``; dulwich's errors (``NotGitRepository``) when there is
    none. Close it (``with``) to unmap its packs."""

    def __init__(self, path: str) -> None:
        self._repo: Repo | None = None
        self._store: DiskObjectStore | None = None
        own = self._own = plain_bare_config(path)
        if own is None:
            self._open_with_dulwich(path)
            return
        from dulwich.config import StackedConfig
        from dulwich.refs import DiskRefsContainer

        self.git_dir = path
        self.config: StackedConfig = StackedConfig(
            [own, *StackedConfig.default_backends()], writable=own
        )
        self.bare = bool(own.get_boolean((b"core",), b"bare", True))
        self.refs: RefsContainer = DiskRefsContainer(path, path, logger=self._write_reflog)

    @property
    def object_store(self) -> DiskObjectStore:
        """Opened on first use: a push reads only the remote's refs and config."""
        if self._store is None:
            from dulwich.object_store import DiskObjectStore

            if self._own is None:
                assert self._repo is not None and isinstance(
                    self._repo.object_store, DiskObjectStore
                )
                self._store = self._repo.object_store
            else:
                objects = os.path.join(self.git_dir, "objects")
                self._store = DiskObjectStore.from_config(objects, self._own)
        return self._store

    def _open_with_dulwich(self, path: str) -> None:
        from dulwich.repo import Repo

        repo = self._repo = Repo(path)
        self.git_dir = repo.controldir()
        self.config = repo.get_config_stack()
        # dulwich calls the .git folder of a checkout bare; its config says otherwise
        self.bare = bool(repo.bare and repo.get_config().get_boolean(b"core", b"bare", True))
        self.refs = repo.refs

    def _write_reflog(self, *line: bytes | int | None) -> None:
        """A reflog line, written as dulwich's Repo writes it (its committer identity rules):
        called only when a ref update is logged, which a bare remote does not by default."""
        from dulwich.repo import Repo

        with Repo(self.git_dir) as repo:
            repo._write_reflog(*line)  # type: ignore[arg-type]

    def get_refs(self) -> dict[Ref, ObjectID]:
        return self.refs.as_dict()

    def close(self) -> None:
        if self._repo is not None:
            self._repo.close()
        elif self._store is not None:
            self._store.close()

    def __enter__(self) -> LocalRepository:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def plain_bare_config(path: str) -> ConfigFile | None:
    """The config of a plain bare repository at ``path`` (``objects/`` and ``refs/``, no
    ``.git`` or ``commondir``, format 0 or 1, no extensions, ``core.sharedRepository`` or
    ``core.worktree``), else None."""
    if os.path.lexists(os.path.join(path, ".git")) or os.path.lexists(
        os.path.join(path, "commondir")
    ):
        return None
    if not (
        os.path.isdir(os.path.join(path, "objects")) and os.path.isdir(os.path.join(path, "refs"))
    ):
        return None
    from dulwich.config import ConfigFile

    try:
        config = ConfigFile.from_path(os.path.join(path, "config"))
    except (OSError, ValueError):
        return None  # missing or unreadable: dulwich's Repo says what is wrong
    if any(True for _ in config.items((b"extensions",))):
        return None
    if _has(config, b"sharedRepository") or _has(config, b"worktree"):
        return None
    try:
        version = config.get((b"core",), b"repositoryformatversion").strip()
    except KeyError:
        version = b"0"
    return config if version in (b"0", b"1") else None


def _has(config: ConfigFile, name: bytes) -> bool:
    try:
        config.get((b"core",), name)
    except KeyError:
        return False
    return True
