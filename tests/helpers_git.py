"""Fixture memory repositories built with C git, so history tests never depend on our writer.

Commits carry messages rendered by ``core.changes.render_commit_message`` (the real trailer
format) and pinned author/committer dates, so ``git log`` order and our order can be compared.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

from qmem_git.core.changes import ChangeSet, FileChange, render_commit_message
from qmem_git.core.entries import render_entries
from qmem_git.core.model import Entry
from qmem_git.core.paths import git_dir_of

BASE_TIME = 1_700_000_000
HOST = "testhost"


def memory_text(kind: str, name: str, *summaries: str | Entry, description: str = "") -> str:
    """A memory file in the spec §4.1 shape with the given entries."""
    entries = [s if isinstance(s, Entry) else Entry(s) for s in summaries]
    body = render_entries(entries)
    return f"---\nname: {name}\ndescription: {description or name}\ntype: {kind}\n---\n\n{body}\n"


def gitdir(root: str | os.PathLike[str]) -> Path:
    """The repository of the memory root ``root``: ``<root>.git`` beside it (``git_dir_of``)."""
    return Path(git_dir_of(os.fspath(root)))


def git_argv(root: str | os.PathLike[str]) -> list[str]:
    """``git`` run in ``root``: on its memory repository (``<root>.git``, work tree ``root``,
    as ``qmem-git git`` runs it) when there is one, else as ``git -C root`` finds a repo."""
    argv = ["git", "-C", os.fspath(root)]
    if gitdir(root).is_dir():
        argv += [f"--git-dir={gitdir(root)}", f"--work-tree={os.fspath(root)}"]
    return argv


def init_memory_git(root: str | os.PathLike[str]) -> Path:
    """A memory root made with C git as qmem-git lays it out: the folder, and its repository
    ``<root>.git`` beside it on ``main`` (``core.worktree`` names the folder)."""
    Path(root).mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            "git",
            f"--git-dir={gitdir(root)}",
            f"--work-tree={os.fspath(root)}",
            "init",
            "-q",
            "-b",
            "main",
        ],
        check=True,
        capture_output=True,
    )
    return Path(root)


class GitRepo:
    """A memory root driven by C git (its repository beside it, as qmem-git keeps it);
    ``time`` advances one minute per commit."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.time = BASE_TIME
        root.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")
        self.git("config", "commit.gpgsign", "false")

    @property
    def path(self) -> str:
        return str(self.root)

    def git(self, *args: str, env: Mapping[str, str] | None = None, stdin: str = "") -> str:
        result = subprocess.run(
            ["git", f"--git-dir={gitdir(self.root)}", f"--work-tree={self.root}", *args],
            cwd=self.root,
            input=stdin,
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, **(env or {})},
        )
        return result.stdout

    def write(self, rel: str, text: str) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    def delete(self, rel: str) -> None:
        (self.root / rel).unlink()

    def read(self, rel: str) -> str | None:
        path = self.root / rel
        return path.read_text(encoding="utf-8") if path.exists() else None

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").strip()

    def stage(self, writes: Mapping[str, str], deletes: Iterable[str]) -> list[FileChange]:
        for rel, text in writes.items():
            self.write(rel, text)
        for rel in deletes:
            self.delete(rel)
        self.git("add", "-A")
        status = self.git("diff", "--cached", "--name-status", "--no-renames")
        return [FileChange(line[0], line.split("\t", 1)[1]) for line in status.splitlines()]

    def commit_message(self, message: str, *, time: int | None = None) -> str:
        self.time = time if time is not None else self.time + 60
        stamp = f"{self.time} +0000"
        env = {"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
        self.git("commit", "-q", "--allow-empty", "-F", "-", env=env, stdin=message)
        return self.head()

    def op(
        self,
        op: str,
        subject: str,
        writes: Mapping[str, str] | None = None,
        deletes: Iterable[str] = (),
        *,
        topics: tuple[str, ...] = (),
        added: int = 0,
        removed: int = 0,
        time: int | None = None,
    ) -> str:
        """One qmem-style operation commit; returns its sha."""
        cs = ChangeSet(op, subject, dict(writes or {}), tuple(deletes), topics, added, removed)
        return self.apply(cs, time=time)

    def apply(self, cs: ChangeSet, *, time: int | None = None) -> str:
        """Stand-in for ``store.apply`` in tests: write, delete, commit with trailers."""
        changes = self.stage(cs.writes, cs.deletes)
        return self.commit_message(render_commit_message(cs, HOST, changes), time=time)

    def plain(
        self,
        subject: str,
        writes: Mapping[str, str] | None = None,
        deletes: Iterable[str] = (),
        *,
        time: int | None = None,
    ) -> str:
        """A commit made by another tool: no file lines, no trailers."""
        self.stage(writes or {}, deletes)
        return self.commit_message(subject + "\n", time=time)

    def name_status(self, *revs: str) -> set[tuple[str, str]]:
        out = self.git("diff", "--name-status", "--no-renames", *revs)
        return {(line[0], line.split("\t", 1)[1]) for line in out.splitlines()}

    def branch(self, name: str, start: str = "HEAD") -> None:
        self.git("checkout", "-q", "-b", name, start)

    def checkout(self, name: str) -> None:
        self.git("checkout", "-q", name)

    def merge(self, branch: str, message: str, *, time: int | None = None) -> str:
        """A true merge commit (``--no-ff``) of ``branch`` into the current branch."""
        self.time = time if time is not None else self.time + 60
        stamp = f"{self.time} +0000"
        env = {"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
        self.git("merge", "-q", "--no-ff", "--no-edit", "-m", message, branch, env=env)
        return self.head()
