"""store.locks: the writer lock and stale git lock detection."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers_git import git_argv

from qmem_git.core.paths import Layout
from qmem_git.errors import QmemError, RepoLocked
from qmem_git.store import locks
from qmem_git.store.repo import init_repo

HOLD = """
import sys, time
from qmem_git.core.paths import Layout
from qmem_git.store.locks import writer_lock
layout = Layout(sys.argv[1], sys.argv[1], "explicit", "")
with writer_lock(layout, 5):
    print("held", flush=True)
    time.sleep(60)
"""


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    lay = Layout(str(tmp_path / "s" / "memory"), str(tmp_path / "s"), "explicit", "")
    init_repo(lay, "true")
    return lay


def test_second_writer_times_out_with_repo_locked(layout: Layout) -> None:
    with locks.writer_lock(layout, 1):
        start = time.monotonic()
        with pytest.raises(RepoLocked) as caught, locks.writer_lock(layout, 0.2):
            pass
        assert 0.15 < time.monotonic() - start < 2
    assert caught.value.exit_code == 3
    assert "busy" in caught.value.message and caught.value.hint
    with locks.writer_lock(layout, 0):  # released again
        pass


def test_lock_of_a_killed_holder_is_free(layout: Layout) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, layout.memory_root], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        with pytest.raises(RepoLocked), locks.writer_lock(layout, 0.1):
            pass
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        with locks.writer_lock(layout, 2):
            pass
    finally:
        proc.kill()
        proc.wait()


def test_writer_lock_needs_a_repo(tmp_path: Path) -> None:
    lay = Layout(str(tmp_path / "nothing"), str(tmp_path), "explicit", "")
    with pytest.raises(QmemError, match="qmem-git init"), locks.writer_lock(lay, 1):
        pass


def test_old_lock_files_are_stale_young_ones_are_not(layout: Layout) -> None:
    git_dir = layout.git_dir
    old = os.path.join(git_dir, "index.lock")
    young = os.path.join(git_dir, "refs", "heads", "main.lock")
    os.makedirs(os.path.dirname(young), exist_ok=True)
    for path in (old, young):
        Path(path).write_text("")
    os.utime(old, (time.time() - 60, time.time() - 60))
    assert locks.stale_git_locks(git_dir, None) == [old]


def test_lock_files_of_a_dead_writer_are_stale_at_once(layout: Layout) -> None:
    git_dir = layout.git_dir
    Path(git_dir, locks.TENURE_NAME).write_text(f"999999999 {time.time_ns() - 10**9}\n")
    young = os.path.join(git_dir, "index.lock")
    Path(young).write_text("")
    since = locks.dead_writer_since(git_dir)
    assert since is not None
    assert locks.stale_git_locks(git_dir, since) == [young]


def test_own_tenure_is_not_a_dead_writer(layout: Layout) -> None:
    git_dir = layout.git_dir
    locks.begin_tenure(git_dir)
    assert locks.read_tenure(git_dir) is not None
    assert locks.dead_writer_since(git_dir) is None
    locks.end_tenure(git_dir)
    assert locks.read_tenure(git_dir) is None


def test_live_git_process_protects_its_lock(layout: Layout) -> None:
    git_dir = layout.git_dir
    lock = os.path.join(git_dir, "index.lock")
    Path(layout.memory_root, "x.md").write_text("x\n")
    subprocess.run([*git_argv(layout.memory_root), "add", "x.md"], check=True)
    editor = subprocess.Popen(  # a human `git commit -a` with the editor open holds index.lock
        [*git_argv(layout.memory_root), "-c", "core.editor=sleep 30;:", "commit", "-qa", "-n"],
        cwd=layout.memory_root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(lock) and time.monotonic() < deadline:
            time.sleep(0.02)
        os.utime(lock, (time.time() - 60, time.time() - 60))
        assert locks.git_running_in(layout.memory_root)
        assert locks.stale_git_locks(git_dir, None) == []
    finally:
        editor.kill()
        editor.wait()


def test_new_tenure_inherits_a_dead_writers_start(layout: Layout) -> None:
    git_dir = layout.git_dir
    dead_start = time.time_ns() - 10**9
    Path(git_dir, locks.TENURE_NAME).write_text(f"999999999 {dead_start}\n")  # older format
    assert locks.begin_tenure(git_dir) == dead_start
    assert locks.dead_writer_since(git_dir) == dead_start  # recovery runs after begin_tenure
    tenure = locks.read_tenure(git_dir)
    assert tenure is not None and tenure.pid == os.getpid() and tenure.inherited_ns == dead_start
    # if this writer dies too, the next one still treats the first one's leftovers as garbage
    Path(git_dir, locks.TENURE_NAME).write_text(f"999999998 {time.time_ns()} {dead_start}\n")
    assert locks.dead_writer_since(git_dir) == dead_start
    locks.end_tenure(git_dir)
    assert locks.begin_tenure(git_dir) is None
    locks.end_tenure(git_dir)


def test_object_locks_are_searched_only_after_a_dead_writer(layout: Layout) -> None:
    git_dir = layout.git_dir
    lock = os.path.join(git_dir, "objects", "ab", "c" * 38 + ".lock")
    os.makedirs(os.path.dirname(lock), exist_ok=True)
    Path(lock).write_text("")
    os.utime(lock, (time.time() - 60, time.time() - 60))
    assert locks.stale_git_locks(git_dir, None) == []
    assert locks.stale_git_locks(git_dir, time.time_ns() - 120 * 10**9) == [lock]


def test_writer_tenure_marks_the_tenure_while_the_lock_is_held(layout: Layout) -> None:
    git_dir = layout.git_dir
    with locks.writer_tenure(layout, 1) as fd:
        assert fd is not None
        tenure = locks.read_tenure(git_dir)
        assert tenure is not None and tenure.pid == os.getpid()
        with pytest.raises(RepoLocked), locks.writer_lock(layout, 0):
            pass
    assert locks.read_tenure(git_dir) is None
    with pytest.raises(ValueError), locks.writer_tenure(layout, 1):
        raise ValueError("boom")
    assert locks.read_tenure(git_dir) is None  # ended on errors too
    with locks.writer_lock(layout, 0):  # and the lock is free again
        pass


TRY_HOLD = """
import sys
from qmem_git.store.locks import TryLock
assert TryLock(sys.argv[1]).acquire()
assert "filelock" not in sys.modules
print("held", flush=True)
sys.stdin.readline()
"""


def test_try_lock_is_exclusive_and_never_waits(tmp_path: Path) -> None:
    path = str(tmp_path / "slot.lock")
    first, second = locks.TryLock(path), locks.TryLock(path)
    assert first.acquire() and first.held
    assert first.acquire()  # already ours
    start = time.monotonic()
    assert not second.acquire() and not second.held
    assert time.monotonic() - start < 0.5
    first.release()
    assert not first.held and os.path.exists(path)  # the file stays for the next holder
    assert second.acquire()
    second.release()
    second.release()  # releasing a lock not held is a no-op


def test_try_lock_of_another_process_frees_when_it_dies(tmp_path: Path) -> None:
    path = str(tmp_path / "slot.lock")
    proc = subprocess.Popen(
        [sys.executable, "-c", TRY_HOLD, path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        lock = locks.TryLock(path)
        assert not lock.acquire()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert lock.acquire()
        lock.release()
    finally:
        proc.kill()
        proc.wait()
