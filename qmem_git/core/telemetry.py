"""Telemetry events (spec §7.10, §8.6, §10.1) and their summary; never memory text or queries."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

EXTRACT = "qwen-code.memory.extract"
DREAM = "qwen-code.memory.dream"
RECALL = "qwen-code.memory.recall"
FORGET = "qmem-git.memory.forget"

# Only these fields may ever be recorded: counts, statuses, durations, topic names.
ALLOWED_FIELDS: Mapping[str, frozenset[str]] = {
    EXTRACT: frozenset(
        {
            "trigger",
            "status",
            "skipped_reason",
            "patches_count",
            "touched_topics",
            "duration_ms",
            "strategy",
            "model_fallback",
        }
    ),
    DREAM: frozenset(
        {
            "trigger",
            "status",
            "deduped_entries",
            "touched_topics",
            "touched_topics_count",
            "duration_ms",
            "strategy",
            "model_fallback",
        }
    ),
    RECALL: frozenset({"query_length", "docs_scanned", "docs_selected", "strategy", "duration_ms"}),
    FORGET: frozenset(
        {"status", "removed_entries", "touched_topics", "duration_ms", "strategy", "model_fallback"}
    ),
}


def make_event(name: str, time_iso: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """An event record keeping only the allowed fields of that event."""
    allowed = ALLOWED_FIELDS[name]
    record: dict[str, Any] = {"event": name, "time": time_iso}
    record.update({key: value for key, value in fields.items() if key in allowed})
    return record


@dataclass
class OpStats:
    """Per-event counts, status mix and duration percentiles."""

    count: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    durations: list[float] = field(default_factory=list)

    def percentile(self, q: float) -> float | None:
        if not self.durations:
            return None
        ordered = sorted(self.durations)
        rank = max(1, math.ceil(q * len(ordered)))
        return ordered[rank - 1]


def summarize(events: Iterable[Mapping[str, Any]]) -> dict[str, OpStats]:
    """Group events by name; status is ``status`` or, for recall, the ``strategy``."""
    stats: dict[str, OpStats] = {}
    for event in events:
        name = event.get("event")
        if not isinstance(name, str):
            continue
        entry = stats.setdefault(name, OpStats())
        entry.count += 1
        status = event.get("status", event.get("strategy"))
        if isinstance(status, str):
            entry.statuses[status] += 1
        duration = event.get("duration_ms")
        if isinstance(duration, (int, float)) and not isinstance(duration, bool):
            entry.durations.append(float(duration))
    return stats
