"""Settings the earliest steps of a command need before ``settings`` (dataclasses, the model
configuration) is imported: the writer-lock timeout, read by ``remember``'s fast path ahead of
everything else so its work-tree survey starts at once."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

DEFAULT_LOCK_TIMEOUT = 30.0


def lock_timeout(env: Mapping[str, str]) -> float:
    """``QMEM_LOCK_TIMEOUT`` in seconds (negative or ``inf``: wait as long as it takes); the
    default when unset or not a number (``nan`` included)."""
    return seconds(env.get("QMEM_LOCK_TIMEOUT"), DEFAULT_LOCK_TIMEOUT)


def seconds(value: str | None, default: float) -> float:
    try:
        number = float(value) if value else default
    except ValueError:
        return default
    return default if number != number else number  # NaN is the one value not equal to itself


def current_dir() -> str:
    """``os.getcwd()``, or a usage error when the folder the command runs in was removed."""
    import os

    try:
        return os.getcwd()
    except FileNotFoundError:
        from qmem_git.errors import UsageError

        raise UsageError(
            "the current folder no longer exists",
            "cd to an existing folder and run the command again",
        ) from None
