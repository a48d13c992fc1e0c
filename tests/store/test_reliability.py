"""Real writer processes: kill -9 at random moments, concurrent writers, stale locks, corruption.

Writers are ``tests/store/_writer.py`` subprocesses, which print ``OK <path> <commit>`` only after
the commit is made; whatever printed OK must be in HEAD afterwards.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers_git import git_argv, gitdir

from qmem_git.core.paths import Layout
from qmem_git.store.repo import init_repo
from qmem_git.store.workdir import render_index

WRITER = str(Path(__file__).with_name("_writer.py"))
KILL_RUNS = 50


def git(root: str | Path, *args: str) -> str:
    done = subprocess.run([*git_argv(str(root)), *args], capture_output=True, text=True)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout


def writer(root: str, *rels: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, WRITER, root, *rels],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def committed_ok(output: str) -> list[str]:
    return [line.split()[1] for line in output.splitlines() if line.startswith("OK ")]


def assert_healthy(root: str) -> None:
    """No lock or temp leftovers, fsck clean, index clean, MEMORY.md = a fresh rebuild."""
    leftovers = [
        str(p)
        for p in gitdir(root).rglob("*")
        if (p.name.endswith(".lock") and p.name != "qmem.lock") or "tmp_obj" in p.name
    ]
    assert leftovers == []
    assert not [p for p in Path(root).rglob("*qmem-tmp-*")]
    git(root, "fsck", "--strict")
    assert git(root, "status", "--porcelain") == ""
    assert Path(root, "MEMORY.md").read_text() == render_index(root).text


def head_paths(root: str) -> set[str]:
    return set(git(root, "ls-tree", "-r", "--name-only", "HEAD").split())


@pytest.fixture
def root(tmp_path: Path) -> str:
    lay = Layout(str(tmp_path / "state" / "memory"), str(tmp_path / "state"), "explicit", "")
    init_repo(lay, "true")
    return lay.memory_root


def test_kill_9_at_random_moments_loses_nothing_that_was_acknowledged(root: str) -> None:
    rng = random.Random(20260401)
    start = time.monotonic()
    single = _time_one_write(root)
    acknowledged: list[str] = []
    for run in range(KILL_RUNS):
        proc = writer(root, f"user/k{run:03d}.md")
        time.sleep(rng.uniform(single * 0.4, single * 1.1))  # most of a run is start-up
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        acknowledged += committed_ok(out)
    final = writer(root, "user/final.md")
    out, err = final.communicate()
    assert final.returncode == 0, err
    acknowledged += committed_ok(out)
    assert "user/final.md" in acknowledged
    assert set(acknowledged) <= head_paths(root)
    assert_healthy(root)
    assert time.monotonic() - start < 60


def _time_one_write(root: str) -> float:
    """Duration of one writer process here, so kills land across its whole run."""
    start = time.monotonic()
    proc = writer(root, "user/warmup.md")
    out, err = proc.communicate()
    assert proc.returncode == 0 and committed_ok(out) == ["user/warmup.md"], err
    return time.monotonic() - start


def test_four_concurrent_writers_lose_nothing(root: str) -> None:
    procs = [writer(root, *(f"user/w{p}/m{i:02d}.md" for i in range(50))) for p in range(4)]
    acknowledged: list[str] = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        acknowledged += committed_ok(out)
    assert len(acknowledged) == 200
    assert set(acknowledged) <= head_paths(root)
    assert git(root, "rev-list", "--count", "HEAD").strip() == "200"
    assert_healthy(root)


def test_stale_locks_left_behind_are_recovered(root: str) -> None:
    proc = writer(root, "user/first.md")
    assert proc.communicate()[0].startswith("OK")
    git_dir = Path(gitdir(root))
    for path in (git_dir / "index.lock", git_dir / "refs" / "heads" / "main.lock"):
        path.write_text("")
        os.utime(path, (time.time() - 300, time.time() - 300))
    proc = writer(root, "user/second.md")
    _, err = proc.communicate()
    assert proc.returncode == 0, err
    assert {"user/first.md", "user/second.md"} <= head_paths(root)
    assert_healthy(root)


def test_truncated_loose_object_stops_the_writer(root: str) -> None:
    proc = writer(root, "user/first.md")
    assert proc.communicate()[0].startswith("OK")
    head = git(root, "rev-parse", "HEAD").strip()
    obj = Path(gitdir(root), "objects", head[:2], head[2:])
    obj.chmod(0o644)
    obj.write_bytes(obj.read_bytes()[:-8])
    proc = writer(root, "user/second.md")
    out, err = proc.communicate()
    assert proc.returncode != 0 and "RepoCorrupt" in err and out == ""
    assert not Path(root, "user", "second.md").exists()
