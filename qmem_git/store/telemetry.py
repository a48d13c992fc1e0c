"""Append-only telemetry log in the state dir, rotated at 1 MiB (never committed)."""

from __future__ import annotations

import os

# On the per-prompt path (recall telemetry): no typing, json or contextlib at import time.
TYPE_CHECKING = False
if TYPE_CHECKING:
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
    append_rotating(os.path.join(state_dir, TELEMETRY_FILE), (line + "\n").encode(), ROTATE_BYTES)


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def append_rotating(path: str, data: bytes, cap: int) -> None:
    """Append ``data``; past ``cap`` bytes the file first moves to ``<path>.1``. Never raises."""
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        if os.path.getsize(path) + len(data) > cap:
            os.replace(path, path + ".1")
    except OSError:
        pass
    try:
        # never through a symlink: a project's .qwen/hook.log -> ~/.bashrc must not be appended to
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW, 0o644)
    except OSError:
        return
    try:
        os.write(fd, data)
    except OSError:
        pass
    finally:
        os.close(fd)


def record_recall(
    state_dir: str, query_length: int, scanned: int, selected: int, strategy: str, ms: int
) -> None:
    """Spec §10.1 recall event, built without json (an import on the hot path); no query text."""
    import time

    now = time.time()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"
    append_line(
        state_dir,
        f'{{"event":"qwen-code.memory.recall","time":"{stamp}","query_length":{query_length},'
        f'"docs_scanned":{scanned},"docs_selected":{selected},"strategy":"{strategy}",'
        f'"duration_ms":{ms}}}',
    )


def read_events(state_dir: str) -> Iterator[dict[str, Any]]:
    """Events from the rotated file then the current one; bad lines are skipped."""
    import json

    base = os.path.join(state_dir, TELEMETRY_FILE)
    for path in (base + ".1", base):
        for line in _lines(path):
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                yield event


def _lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.readlines()
    except OSError:
        return []
