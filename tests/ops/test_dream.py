"""Dream over real files: planning as a ChangeSet, meta updates, gates wired to the state dir."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from helpers_git import gitdir

from qmem_git.core.statefile import iso_ms, update_fields
from qmem_git.ops.dream import DreamOpPlan, gate_dream, plan_dream_op
from qmem_git.store.consolidation import LOCK_NAME, current_owner, render_lock, try_acquire
from qmem_git.store.state import load_meta

SESSION = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"


def memory(kind: str, body: str) -> str:
    return f"---\nname: M\ndescription: d\ntype: {kind}\n---\n\n{body}\n"


@pytest.fixture
def state(tmp_path: Path) -> Path:
    (tmp_path / "state" / "memory").mkdir(parents=True)
    return tmp_path / "state"


def put(root: Path, rel: str, text: str, mtime_s: float) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (mtime_s, mtime_s))


def apply(root: Path, plan: DreamOpPlan, state_dir: Path) -> None:
    """What store.apply + the meta writer do, minus git."""
    if plan.changeset is not None:
        for rel, text in plan.changeset.writes.items():
            (root / rel).write_text(text)
        for rel in plan.changeset.deletes:
            (root / rel).unlink()
    meta_path = state_dir / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    meta_path.write_text(json.dumps(update_fields(meta, plan.meta_updates), indent=2) + "\n")


def chats_with(tmp_path: Path, count: int, mtime_s: float | None = None) -> Path:
    chats = tmp_path / "chats"
    chats.mkdir(exist_ok=True)
    existing = len(list(chats.iterdir()))
    for i in range(existing, existing + count):
        path = chats / f"{i:08x}-0000-0000-0000-000000000000.jsonl"
        path.write_text("{}\n")
        if mtime_s is not None:
            os.utime(path, (mtime_s, mtime_s))
    return chats


NOW = datetime(2026, 4, 3, 10, 0, tzinfo=timezone.utc)


# --- planning (checklist 57-59) ---------------------------------------------------------------


def test_duplicate_files_become_one_dream_commit(state: Path) -> None:  # checklist 58
    root = state / "memory"
    put(root, "user/terse.md", memory("user", "User prefers terse responses."), 2000)
    put(root, "user/terse-duplicate.md", memory("user", "User prefers terse responses."), 1000)
    plan = plan_dream_op(str(root), NOW, session_id=SESSION)
    cs = plan.changeset
    assert cs is not None
    assert (cs.op, cs.subject) == ("dream", "deduplicated 1 entry (user)")
    assert cs.deletes == ("user/terse-duplicate.md",)
    assert (cs.topics, cs.removed, cs.session) == (("user",), 1, SESSION)
    assert cs.trailers == (("Qmem-Deduped", "1"),)
    assert plan.deduped_entries == 1
    assert plan.touched_topics == ("user",)
    assert plan.system_message == "Managed auto-memory dream updated: user.md"
    assert plan.meta_updates == {
        "updatedAt": "2026-04-03T10:00:00.000Z",
        "lastDreamAt": "2026-04-03T10:00:00.000Z",
        "lastDreamTouchedTopics": ["user"],
        "lastDreamStatus": "updated",
        "lastDreamSessionId": SESSION,
    }


def test_in_file_duplicates(state: Path) -> None:  # checklist 57
    root = state / "memory"
    put(root, "user/prefs.md", memory("user", "B\n\na\n\nb"), 1000)
    plan = plan_dream_op(str(root), NOW)
    assert plan.changeset is not None
    assert plan.changeset.writes == {"user/prefs.md": memory("user", "a\n\nb")}
    assert plan.changeset.subject == "deduplicated 1 entry (user)"
    assert plan.deduped_entries == 1


def test_clean_store_is_a_noop(state: Path) -> None:  # checklist 59
    root = state / "memory"
    put(root, "user/a.md", memory("user", "Alpha fact"), 1000)
    plan = plan_dream_op(str(root), NOW)
    assert plan.changeset is None
    assert plan.touched_topics == ()
    assert plan.system_message is None
    assert plan.meta_updates["lastDreamStatus"] == "noop"
    assert plan.meta_updates["lastDreamTouchedTopics"] == []
    assert "lastDreamSessionId" not in plan.meta_updates


def test_format_only_change_has_a_rewrite_subject(state: Path) -> None:
    root = state / "memory"
    put(root, "project.md", memory("project", "# Project Memory\n\n- Freeze Friday"), 1000)
    plan = plan_dream_op(str(root), NOW)
    assert plan.changeset is not None
    assert plan.changeset.subject == "rewrote 1 file (project)"
    assert plan.changeset.trailers == (("Qmem-Deduped", "0"),)


def test_manual_dream_resets_the_legacy_session_list(state: Path) -> None:
    plan = plan_dream_op(str(state / "memory"), NOW, session_id=SESSION, manual=True)
    assert plan.meta_updates["recentSessionIdsSinceDream"] == []
    assert plan.meta_updates["lastDreamSessionId"] == SESSION


def test_missing_memory_root_plans_nothing(tmp_path: Path) -> None:
    assert plan_dream_op(str(tmp_path / "none"), NOW).changeset is None


# --- gates wired to files (checklist 50-55) ---------------------------------------------------


def write_meta(state: Path, **fields: Any) -> None:
    (state / "meta.json").write_text(json.dumps({"version": 1, **fields}))


def test_disabled_reads_and_creates_nothing(tmp_path: Path) -> None:  # checklist 55
    state = tmp_path / "absent"
    result = gate_dream(str(state), str(tmp_path / "chats"), SESSION, NOW, enabled=False)
    assert (result.status, result.reason) == ("skipped", "disabled")
    assert not state.exists()


def test_same_session_and_min_hours_from_meta(state: Path, tmp_path: Path) -> None:
    chats = str(chats_with(tmp_path, 5))
    write_meta(state, lastDreamSessionId=SESSION)
    assert gate_dream(str(state), chats, SESSION, NOW).reason == "same_session"
    write_meta(state, lastDreamAt=iso_ms(NOW - timedelta(hours=2)))
    assert gate_dream(str(state), chats, SESSION, NOW).reason == "min_hours"
    assert not (state / "dream-scan.json").exists()


def test_corrupt_meta_reads_as_never_dreamed(state: Path, tmp_path: Path) -> None:
    (state / "meta.json").write_text("{oops")
    assert load_meta(str(state)) == {}
    (state / "meta.json").write_text("[1]")
    assert load_meta(str(state)) == {}
    now = datetime.now(timezone.utc)
    assert gate_dream(str(state), str(chats_with(tmp_path, 5)), SESSION, now).proceed


def test_session_count_gate_and_the_cross_process_throttle(state: Path, tmp_path: Path) -> None:
    chats = chats_with(tmp_path, 4)
    first = gate_dream(str(state), str(chats), SESSION, NOW)
    assert (first.reason, first.sessions) == ("min_sessions", 4)  # checklist 52
    assert load_meta(str(state)) == {}
    chats_with(tmp_path, 3)
    later = gate_dream(str(state), str(chats), SESSION, NOW + timedelta(minutes=5))
    assert (later.reason, later.scanned) == ("min_sessions", False)  # checklist 53
    after = gate_dream(str(state), str(chats), SESSION, NOW + timedelta(minutes=11))
    assert after.proceed
    assert after.sessions == 7


def test_transcripts_older_than_the_last_dream_do_not_count(state: Path, tmp_path: Path) -> None:
    last = NOW - timedelta(days=2)
    write_meta(state, lastDreamAt=iso_ms(last))
    chats = chats_with(tmp_path, 5, mtime_s=last.timestamp() - 60)
    (chats / f"{SESSION}.jsonl").write_text("")
    (chats / "notes.jsonl").write_text("")
    assert gate_dream(str(state), str(chats), SESSION, NOW).reason == "min_sessions"


def test_live_lock_skips_and_stale_locks_are_cleared(state: Path, tmp_path: Path) -> None:
    chats = str(chats_with(tmp_path, 5))
    now = datetime.now(timezone.utc)
    lock = state / LOCK_NAME
    lock.write_text(render_lock(current_owner()))
    assert gate_dream(str(state), chats, SESSION, now).reason == "locked"  # checklist 54
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    lock.write_text(str(proc.pid))
    later = now + timedelta(minutes=11)
    assert gate_dream(str(state), chats, SESSION, later).proceed
    assert not lock.exists()
    lock.write_text(str(os.getpid()))
    old = time.time() - 7200
    os.utime(lock, (old, old))
    assert gate_dream(str(state), chats, SESSION, later + timedelta(minutes=11)).proceed
    assert not lock.exists()


def test_force_skips_every_gate(state: Path, tmp_path: Path) -> None:
    write_meta(state, lastDreamSessionId=SESSION)
    result = gate_dream(str(state), str(tmp_path), SESSION, NOW, enabled=False, force=True)
    assert (result.status, result.reason) == ("proceed", "forced")


# --- a whole scheduled dream (checklist 56) ---------------------------------------------------


def test_completed_scheduled_dream_records_meta_and_frees_the_lock(
    state: Path, tmp_path: Path
) -> None:
    root = state / "memory"
    put(root, "user/a.md", memory("user", "Same fact"), 2000)
    put(root, "user/b.md", memory("user", "Same fact"), 1000)
    write_meta(state, createdAt="x")
    now = datetime.now(timezone.utc)
    gate = gate_dream(str(state), str(chats_with(tmp_path, 5)), SESSION, now)
    assert gate.proceed
    lock = try_acquire(str(state), now)
    assert lock is not None
    with lock:
        plan = plan_dream_op(str(root), now, session_id=SESSION)
        apply(root, plan, state)
    meta = load_meta(str(state))
    assert meta["lastDreamAt"] == iso_ms(now)
    assert meta["lastDreamSessionId"] == SESSION
    assert meta["lastDreamStatus"] == "updated"
    assert list(meta)[:2] == ["version", "createdAt"]
    assert not (state / LOCK_NAME).exists()
    assert not (root / "user/b.md").exists()
    assert plan_dream_op(str(root), now).changeset is None
    assert gate_dream(str(state), str(tmp_path / "chats"), SESSION, now).reason == "same_session"


# --- telemetry trigger (spec §8.6) ------------------------------------------------------------


def test_scheduled_dream_is_auto_and_forced_dream_is_manual(tmp_path: Path) -> None:
    from qmem_git.core.telemetry import DREAM
    from qmem_git.ops.pipeline import run_dream
    from qmem_git.settings import build_settings
    from qmem_git.store.telemetry import read_events

    env = {"HOME": str(tmp_path), "QMEM_HOST": "h"}
    settings = build_settings(
        env, memory_dir=str(tmp_path / "state" / "memory"), home=str(tmp_path)
    )
    chats = Path(settings.chats_dir)
    chats.mkdir(parents=True)
    for i in range(5):
        (chats / f"{i:08x}-0000-0000-0000-000000000000.jsonl").write_text("{}\n")
    now = datetime.now(timezone.utc)
    assert run_dream(settings, now, session_id=SESSION).status == "noop"
    assert run_dream(settings, now, session_id=SESSION).skipped_reason == "same_session"
    assert run_dream(settings, now, session_id=SESSION, force=True).status == "noop"
    events = [e for e in read_events(settings.layout.state_dir) if e["event"] == DREAM]
    assert [e["trigger"] for e in events] == ["auto", "manual"]


def test_qmem_auto_dream_0_skips_scheduled_dreams_before_touching_anything(
    tmp_path: Path,
) -> None:  # checklist 55, through the real command
    memory = tmp_path / "state" / "memory"
    memory.mkdir(parents=True)  # --memory-dir must exist; nothing is made in it or beside it
    env = {**os.environ, "QMEM_AUTO_DREAM": "0"}
    args = [sys.executable, "-m", "qmem_git", "--json", "--memory-dir", str(memory), "dream"]
    done = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"status": "skipped", "skipped_reason": "disabled"}
    assert os.listdir(tmp_path / "state") == ["memory"] and os.listdir(memory) == []
    forced = subprocess.run([*args, "--force"], capture_output=True, text=True, env=env)
    assert forced.returncode == 0 and gitdir(memory).is_dir()  # a manual dream still runs
