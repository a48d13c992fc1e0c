"""How old a memory is, in the words the recall block uses (spec §10.5, §15.6)."""

from __future__ import annotations

DAY_MS = 86_400_000


def age_days(mtime_ms: float, now_ms: float) -> int:
    """Whole days since the file was written; never negative (a clock skew reads as today)."""
    return max(0, int((now_ms - mtime_ms) // DAY_MS))


def age_text(days: int) -> str:
    """``today``, ``yesterday`` or ``N days ago``."""
    if days <= 0:
        return "today"
    if days == 1:
        return "yesterday"
    return f"{days} days ago"


def saved_line(mtime_ms: float, now_ms: float) -> str:
    """The ``Saved <age>.`` line under a memory's heading."""
    return f"Saved {age_text(age_days(mtime_ms, now_ms))}."


def freshness_text(days: int) -> str:
    """The staleness warning; empty for memories at most one day old (normative wording)."""
    if days <= 1:
        return ""
    return (
        f"This memory is {days} days old. Memories are point-in-time observations, not live "
        "state — claims about code behavior or file:line citations may be outdated. Verify "
        "against current code before asserting as fact."
    )
