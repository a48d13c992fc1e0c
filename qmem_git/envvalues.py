"""Settings the earliest steps of a command need before ``settings`` (dataclasses, the model
configuration) is imported: the writer-lock timeout, read by ``remember``'s fast path ahead of
everything else so its work-tree survey starts at once."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

DEFAULT_LOCK_TIMEOUT = 30.0
# The hooks' background watcher (integrations.watcher): how long the memory folder must stay
# unchanged before what the agent wrote there is committed, and how long after the agent's
# process is gone it keeps watching before the session-end steps run.
DEFAULT_WATCH_QUIET = 3.0
DEFAULT_WATCH_GRACE = 5.0
MAX_WATCH_SECONDS = 600.0


def lock_timeout(env: Mapping[str, str]) -> float:
    """``QMEM_LOCK_TIMEOUT`` in seconds (negative or ``inf``: wait as long as it takes); the
    default when unset or not a number (``nan`` included)."""
    return seconds(env.get("QMEM_LOCK_TIMEOUT"), DEFAULT_LOCK_TIMEOUT)


def watch_seconds(env: Mapping[str, str]) -> tuple[float, float]:
    """(quiet, grace) from ``QMEM_WATCH_QUIET`` and ``QMEM_WATCH_GRACE``, each kept within 0 to
    10 minutes; the default when unset or not a number."""
    quiet = seconds(env.get("QMEM_WATCH_QUIET"), DEFAULT_WATCH_QUIET)
    grace = seconds(env.get("QMEM_WATCH_GRACE"), DEFAULT_WATCH_GRACE)
    return min(max(quiet, 0.0), MAX_WATCH_SECONDS), min(max(grace, 0.0), MAX_WATCH_SECONDS)


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
