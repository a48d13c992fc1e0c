"""consolidation.lock liveness with real processes, scan record, transcripts (§8.1-8.3)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psutil
import pytest

from qmem_git.store.consolidation import (
    LOCK_NAME,
    STALE_AFTER,
    LockOwner,
    _remove_if_unchanged,
    current_owner,
    list_session_files,
    lock_is_live,
    owner_is_alive,
    parse_lock,
    read_last_scan,
    record_scan,
    render_lock,
    try_acquire,
)


def now() -> datetime:
    return datetime.now(timezone.utc)


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def write_lock(state: Path, content: str, age_s: float = 0) -> Path:
    path = state / LOCK_NAME
    path.write_text(content)
    if age_s:
        stamp = time.time() - age_s
        os.utime(path, (stamp, stamp))
    return path


# --- parsing ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "owner"),
    [
        ("123", LockOwner(123)),
        (" 123\n", LockOwner(123)),
        ("123\n1712345678.120000\n", LockOwner(123, 1712345678.12)),
        ('{"pid": 123, "started": 1712345678.12}', LockOwner(123, 1712345678.12)),
        ('{"pid": 123}', LockOwner(123)),
        ("", None),
        ("0", None),
        ("-5", None),
        ("abc", None),
        ("12abc", None),
        ("123 nan", None),
        ("123 x", None),
        ("1 2 3", None),
        ("{not json", None),
        ("[1]", None),
        ('{"pid": true}', None),
        ('{"pid": "123"}', None),
        ('{"pid": 5, "started": "x"}', None),
        ("١٢٣", None),
    ],
)
def test_parse_lock(content: str, owner: LockOwner | None) -> None:
    assert parse_lock(content) == owner


def test_rendered_lock_starts_with_the_decimal_pid_line() -> None:
    # Qwen Code reads parseInt(content.trim()): the first line must be the bare PID
    owner = current_owner()
    text = render_lock(owner)
    assert text.split("\n")[0] == str(os.getpid())
    assert parse_lock(text) == LockOwner(owner.pid, round(owner.started or 0, 6))
    assert render_lock(LockOwner(7)) == "7\n"


# --- liveness (checklist 54) ------------------------------------------------------------------


def test_missing_lock_is_not_live(tmp_path: Path) -> None:
    assert lock_is_live(str(tmp_path), now()) is False


def test_lock_held_by_this_process_is_live(tmp_path: Path) -> None:
    path = write_lock(tmp_path, render_lock(current_owner()))
    assert lock_is_live(str(tmp_path), now()) is True
    assert path.exists()


def test_qwen_code_plain_pid_lock_of_a_live_process_is_live(tmp_path: Path) -> None:
    write_lock(tmp_path, str(os.getpid()))
    assert lock_is_live(str(tmp_path), now()) is True


def test_lock_of_a_dead_pid_is_removed(tmp_path: Path) -> None:
    path = write_lock(tmp_path, str(dead_pid()))
    assert lock_is_live(str(tmp_path), now()) is False
    assert not path.exists()


def test_reused_pid_with_another_start_time_counts_as_dead(tmp_path: Path) -> None:
    started = psutil.Process().create_time()
    path = write_lock(tmp_path, render_lock(LockOwner(os.getpid(), started - 3600)))
    assert lock_is_live(str(tmp_path), now()) is False
    assert not path.exists()


def test_garbage_lock_is_removed(tmp_path: Path) -> None:
    path = write_lock(tmp_path, "not a pid at all")
    assert lock_is_live(str(tmp_path), now()) is False
    assert not path.exists()


def test_lock_older_than_an_hour_is_removed_even_with_a_live_pid(tmp_path: Path) -> None:
    path = write_lock(tmp_path, render_lock(current_owner()), age_s=3601)
    assert lock_is_live(str(tmp_path), now()) is False
    assert not path.exists()


def test_lock_just_under_an_hour_old_is_still_live(tmp_path: Path) -> None:
    write_lock(tmp_path, str(os.getpid()), age_s=3500)
    assert lock_is_live(str(tmp_path), now()) is True


def test_zombie_holder_is_dead() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 10
        while psutil.Process(proc.pid).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert owner_is_alive(LockOwner(proc.pid)) is False
    finally:
        proc.wait()


def test_holder_we_may_not_inspect_is_treated_as_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    def denied(pid: int) -> psutil.Process:
        raise psutil.AccessDenied(pid)

    monkeypatch.setattr(psutil, "Process", denied)
    assert owner_is_alive(LockOwner(4242, 1.0)) is True


# --- acquire / release ------------------------------------------------------------------------


def test_acquire_is_exclusive_and_released_on_exit(tmp_path: Path) -> None:
    state = str(tmp_path)
    lock = try_acquire(state, now())
    assert lock is not None
    with lock:
        assert parse_lock((tmp_path / LOCK_NAME).read_text()) == lock.owner
        assert try_acquire(state, now()) is None
    assert not (tmp_path / LOCK_NAME).exists()


def test_lock_is_released_when_the_dream_fails(tmp_path: Path) -> None:
    lock = try_acquire(str(tmp_path), now())
    assert lock is not None
    with pytest.raises(RuntimeError), lock:
        raise RuntimeError("dream failed")
    assert not (tmp_path / LOCK_NAME).exists()


def test_acquire_takes_over_a_stale_lock(tmp_path: Path) -> None:
    write_lock(tmp_path, str(dead_pid()))
    lock = try_acquire(str(tmp_path), now())
    assert lock is not None
    lock.release()


def test_acquire_refuses_a_live_qwen_code_lock(tmp_path: Path) -> None:
    write_lock(tmp_path, str(os.getpid()))
    assert try_acquire(str(tmp_path), now()) is None


def test_release_leaves_a_lock_that_is_no_longer_ours(tmp_path: Path) -> None:
    lock = try_acquire(str(tmp_path), now())
    assert lock is not None
    write_lock(tmp_path, "999999\n1.0\n")
    lock.release()
    assert (tmp_path / LOCK_NAME).read_text() == "999999\n1.0\n"
    lock.release()


def test_acquire_creates_the_state_dir(tmp_path: Path) -> None:
    state = tmp_path / "state"
    lock = try_acquire(str(state), now())
    assert lock is not None
    lock.release()
    assert state.is_dir()


# --- throttle record and transcript listing ---------------------------------------------------


def test_scan_record_round_trip(tmp_path: Path) -> None:
    assert read_last_scan(str(tmp_path)) is None
    moment = datetime(2026, 4, 1, 8, 0, tzinfo=timezone.utc)
    record_scan(str(tmp_path), moment)
    assert read_last_scan(str(tmp_path)) == moment
    data = json.loads((tmp_path / "dream-scan.json").read_text())
    assert data == {"lastSessionScanAt": "2026-04-01T08:00:00.000Z"}


@pytest.mark.parametrize("content", ["{broken", "[]", '{"lastSessionScanAt": 5}'])
def test_unreadable_scan_record_reads_as_never(tmp_path: Path, content: str) -> None:
    (tmp_path / "dream-scan.json").write_text(content)
    assert read_last_scan(str(tmp_path)) is None


def test_list_session_files(tmp_path: Path) -> None:
    assert list_session_files(str(tmp_path / "missing")) == []
    chats = tmp_path / "chats"
    chats.mkdir()
    (chats / "a.jsonl").write_text("")
    os.utime(chats / "a.jsonl", ns=(1_500_000_000, 1_500_000_000))
    (chats / "dangling.jsonl").symlink_to(chats / "nowhere")
    assert list_session_files(str(chats)) == [("a.jsonl", 1500.0)]


def test_stale_window_constant_matches_spec() -> None:
    assert timedelta(hours=1) == STALE_AFTER


def test_release_after_the_lock_vanished_is_harmless(tmp_path: Path) -> None:
    lock = try_acquire(str(tmp_path), now())
    assert lock is not None
    (tmp_path / LOCK_NAME).unlink()
    assert lock.is_held() is False
    lock.release()


def test_stale_removal_spares_a_lock_replaced_meanwhile(tmp_path: Path) -> None:
    path = write_lock(tmp_path, "garbage")
    other = tmp_path / "other"
    other.write_text("x")
    _remove_if_unchanged(str(path), os.stat(other))
    assert path.exists()
    path.unlink()
    _remove_if_unchanged(str(path), os.stat(other))
