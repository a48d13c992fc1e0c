"""The dream scheduler gates over plain values (spec §8.1; checklist 50-55)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from qmem_git.core.dreamgate import (
    GateResult,
    count_sessions,
    evaluate_gates,
    is_throttled,
    last_dream_ms,
)
from qmem_git.core.statefile import iso_ms

NOW = datetime(2026, 4, 10, 12, 0, tzinfo=timezone.utc)
SESSION = "11111111-2222-3333-4444-555555555555"


def sid(n: int) -> str:
    return f"{n:08x}-0000-0000-0000-000000000000"


def sessions(count: int, mtime_ms: float | None = None) -> list[tuple[str, float]]:
    stamp = NOW.timestamp() * 1000 if mtime_ms is None else mtime_ms
    return [(f"{sid(i)}.jsonl", stamp) for i in range(count)]


def never_called() -> Any:
    raise AssertionError("probe must not run")


def gates(
    meta: dict[str, Any] | None = None,
    *,
    enabled: bool = True,
    last_scan_at: datetime | None = None,
    files: Callable[[], list[tuple[str, float]]] = lambda: sessions(5),
    lock_live: Callable[[], bool] = lambda: False,
) -> GateResult:
    return evaluate_gates(
        enabled=enabled,
        meta=meta or {},
        session_id=SESSION,
        now=NOW,
        last_scan_at=last_scan_at,
        session_mtimes=files,
        lock_live=lock_live,
    )


def test_disabled_is_returned_before_any_probe() -> None:  # checklist 55
    result = gates(enabled=False, files=never_called, lock_live=never_called)
    assert (result.status, result.reason, result.scanned) == ("skipped", "disabled", False)


def test_same_session() -> None:  # checklist 50
    result = gates({"lastDreamSessionId": SESSION}, files=never_called)
    assert result.reason == "same_session"


def test_min_hours_blocks_a_recent_dream() -> None:  # checklist 51
    meta = {"lastDreamAt": iso_ms(NOW - timedelta(hours=2))}
    assert gates(meta, files=never_called).reason == "min_hours"


def test_min_hours_passes_when_never_dreamed_or_unparsable_or_old_enough() -> None:
    assert gates({}).proceed
    assert gates({"lastDreamAt": "not a date"}).proceed
    assert gates({"lastDreamAt": iso_ms(NOW - timedelta(hours=24))}).proceed


def test_four_sessions_are_not_enough_five_are() -> None:  # checklist 52
    low = gates(files=lambda: sessions(4))
    assert (low.reason, low.scanned, low.sessions) == ("min_sessions", True, 4)
    ok = gates(files=lambda: sessions(5))
    assert (ok.status, ok.reason, ok.scanned, ok.sessions) == ("proceed", None, True, 5)


def test_session_counting_rule() -> None:  # checklist 52
    since = NOW.timestamp() * 1000 - 1000
    files = [
        *sessions(3),
        ("notes.jsonl", NOW.timestamp() * 1000),
        (f"{SESSION}.jsonl", NOW.timestamp() * 1000),
        (f"{sid(9)}.jsonl", since),  # not strictly newer
        (f"{sid(8)}.jsonl", since - 1),
        (f"{sid(7)}.json", NOW.timestamp() * 1000),
        ("ABCDEF0123456789ABCDEF0123456789.jsonl", NOW.timestamp() * 1000),
        ("a" * 37 + ".jsonl", NOW.timestamp() * 1000),
        ("a" * 31 + ".jsonl", NOW.timestamp() * 1000),
    ]
    assert count_sessions(files, SESSION, since) == 4


def test_files_older_than_the_last_dream_do_not_count() -> None:
    last = NOW - timedelta(days=2)
    meta = {"lastDreamAt": iso_ms(last)}
    old = sessions(5, last.timestamp() * 1000)
    assert gates(meta, files=lambda: old).reason == "min_sessions"
    assert last_dream_ms(meta) == last.timestamp() * 1000
    assert last_dream_ms({}) == 0


def test_throttled_scan_reports_min_sessions_without_scanning() -> None:  # checklist 53
    result = gates(last_scan_at=NOW - timedelta(minutes=5), files=never_called)
    assert (result.reason, result.scanned) == ("min_sessions", False)


def test_scan_runs_again_after_ten_minutes() -> None:
    assert gates(last_scan_at=NOW - timedelta(minutes=10)).proceed


@pytest.mark.parametrize(
    ("offset", "throttled"),
    [
        (None, False),
        (timedelta(minutes=-1), False),
        (timedelta(0), True),
        (timedelta(minutes=9), True),
    ],
)
def test_is_throttled(offset: timedelta | None, throttled: bool) -> None:
    last = None if offset is None else NOW - offset
    assert is_throttled(NOW, last) is throttled


def test_live_lock_skips_as_locked() -> None:  # checklist 54
    result = gates(lock_live=lambda: True)
    assert (result.reason, result.scanned) == ("locked", True)


def test_lock_probe_runs_only_after_the_session_gate() -> None:
    assert gates(files=lambda: sessions(1), lock_live=never_called).reason == "min_sessions"
