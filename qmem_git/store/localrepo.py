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
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import TracebackType

    from dulwich.object_store import DiskObjectStore
    from dulwich.objects import ObjectID
    from dulwich.refs import Ref, RefsContainer
    from dulwich.repo import Repo

    from qmem_git.store.plainconfig import ConfigReader, FileReader


class LocalRepository:
    """``git_dir``, ``config`` (the repository's over the user's, as ``Repo.get_config_stack``),
    ``refs``, ``object_store`` and ``bare`` (a checkout's ``.git`` is not, whatever dulwich
    says) of the repository at ``path``; dulwich's errors (``NotGitRepository``) when there is
    none. Close it (``with``) to unmap its packs. ``env``: the environment naming the user's
    config files (git's variables); without it dulwich reads them from the process's."""

    def __init__(self, path: str, env: Mapping[str, str] | None = None) -> None:
        self._repo: Repo | None = None
        self._store: DiskObjectStore | None = None
        self._config: ConfigReader | None = None
        self._env = env
        own = self._own = plain_bare_config(path)
        if own is None:
            self._open_with_dulwich(path)
            return
        from dulwich.refs import DiskRefsContainer

        self.git_dir = path
        self.bare = bool(own.get_boolean((b"core",), b"bare", True))
        self.refs: RefsContainer = DiskRefsContainer(path, path, logger=self._write_reflog)

    @property
    def config(self) -> ConfigReader:
        """Read on first use: a fetch reads none of it."""
        if self._config is None:
            self._config = self._config_stack()
        return self._config

    def _config_stack(self) -> ConfigReader:
        from qmem_git.store.plainconfig import PlainConfig, PlainStack, read_plain_stack

        own, files = self._own, self._user_files()
        if isinstance(own, PlainConfig) and files is not None:
            user = read_plain_stack(files)
            if user is not None:
                return PlainStack([own, *user.backends])
        from dulwich.config import ConfigFile, StackedConfig

        if not isinstance(own, ConfigFile):
            own = ConfigFile.from_path(os.path.join(self.git_dir, "config"))
        if files is None:
            return StackedConfig([own, *StackedConfig.default_backends()], writable=own)
        backends = [own]
        for path in files:  # what default_backends reads, from the environment given
            try:
                backends.append(ConfigFile.from_path(path))
            except FileNotFoundError:
                continue
        return StackedConfig(backends, writable=own)

    def _user_files(self) -> list[str] | None:
        """The user's config files git reads, from ``env`` (None without one)."""
        if self._env is None:
            return None
        from qmem_git.store.identity import config_files

        return config_files(self._env, self._env.get("HOME") or os.path.expanduser("~"))

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
                own: Any = self._own  # from_config asks only get, get_boolean
                self._store = DiskObjectStore.from_config(objects, own)
        return self._store

    def _open_with_dulwich(self, path: str) -> None:
        from dulwich.repo import Repo

        repo = self._repo = Repo(path)
        self.git_dir = repo.controldir()
        self._config = repo.get_config_stack()
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


def plain_bare_config(path: str) -> FileReader | None:
    """The config of a plain bare repository at ``path`` (``objects/`` and ``refs/``, no
    ``.git`` or ``commondir``, format 0 or 1, no extensions, ``core.sharedRepository`` or
    ``core.worktree``), else None. Read by :mod:`~qmem_git.store.plainconfig` when it is
    plain, else by dulwich."""
    if os.path.lexists(os.path.join(path, ".git")) or os.path.lexists(
        os.path.join(path, "commondir")
    ):
        return None
    if not (
        os.path.isdir(os.path.join(path, "objects")) and os.path.isdir(os.path.join(path, "refs"))
    ):
        return None
    config = _read_config(path)
    if config is None:
        return None
    if any(True for _ in config.items((b"extensions",))):
        return None
    if _has(config, b"sharedRepository") or _has(config, b"worktree"):
        return None
    try:
        version = config.get((b"core",), b"repositoryformatversion").strip()
    except KeyError:
        version = b"0"
    return config if version in (b"0", b"1") else None


def _read_config(git_dir: str) -> FileReader | None:
    from qmem_git.errors import RepoCorrupt
    from qmem_git.store.gitconfig import read_config_fast

    try:
        return read_config_fast(git_dir)
    except (OSError, RepoCorrupt):
        return None  # missing or unreadable: dulwich's Repo says what is wrong


def _has(config: FileReader, name: bytes) -> bool:
    try:
        config.get((b"core",), name)
    except KeyError:
        return False
    return True
