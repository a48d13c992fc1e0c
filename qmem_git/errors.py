"""One error hierarchy; ``cli.py`` maps ``exit_code`` to the process exit status."""

from __future__ import annotations


class QmemError(Exception):
    """Base error: ``message`` says what went wrong, ``hint`` how to fix it."""

    exit_code = 1

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} (hint: {self.hint})" if self.hint else self.message


class UsageError(QmemError):
    exit_code = 2


class InvalidMemoryFile(QmemError):
    exit_code = 1


class UnsafePath(QmemError):
    exit_code = 1


class SecretDetected(QmemError):
    exit_code = 1


class NothingToDo(QmemError):
    """A request that matched nothing (restore/forget/undo with no target)."""

    exit_code = 1


class RepoLocked(QmemError):
    exit_code = 3


class FileSystemRefused(QmemError):
    """The disk is full, or a file or folder may not be written (permission, read-only)."""

    exit_code = 4


class RemoteError(QmemError):
    exit_code = 5


class RepoCorrupt(QmemError):
    exit_code = 6


class BranchLost(RepoCorrupt):
    """``main`` is missing or damaged in a repository with history; ``commit`` is the one to
    point it back at (``qmem-git doctor --fix``), None when none was found."""

    def __init__(self, message: str, hint: str = "", commit: str | None = None) -> None:
        super().__init__(message, hint)
        self.commit = commit


class ModelError(QmemError):
    exit_code = 1
