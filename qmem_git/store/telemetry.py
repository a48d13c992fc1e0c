"""Append-only telemetry log in the state dir, rotated at 1 MiB (never committed)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any

TELEMETRY_FILE = "telemetry.jsonl"
ROTATE_BYTES = 1024 * 1024


def record_event(state_dir: str, event: Mapping[str, Any]) -> None:
    """Append one JSON line; rotate to ``telemetry.jsonl.1`` past 1 MiB. Best effort."""
    import json

    append_line(state_dir, json.dumps(event, ensure_ascii=False, separators=(",", ":")))


def append_line(state_dir: str, line: str) -> None:
    """Append one already-encoded JSON record (the recall hot path builds it without json)."""
    path = os.path.join(state_dir, TELEMETRY_FILE)
    line += "\n"
    with contextlib.suppress(OSError):
        if os.path.getsize(path) + len(line) > ROTATE_BYTES:
            os.replace(path, path + ".1")
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)


def read_events(state_dir: str) -> Iterator[dict[str, Any]]:
    """Events from the rotated file then the current one; bad lines are skipped."""
    import json

    base = os.path.join(state_dir, TELEMETRY_FILE)
    for path in (base + ".1", base):
        for line in _lines(path):
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if isinstance(event, dict):
                    yield event


def _lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.readlines()
    except OSError:
        return []
