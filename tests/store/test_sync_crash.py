"""A sync killed (kill -9), or stopped by a full disk, while it writes the fetched files into
the work tree leaves the old state or the new one: the old files are put back (by the sync
itself on a full disk, by the next writer after a kill: ``store.journal``) instead of being
committed as ``recover``. Whole processes; histories made with fast-import; the full disk is
a real small tmpfs (mounting one needs root)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from clihelpers import qmem
from conftest import require_tool
from helpers_git import git_argv
from servers import fsck_strict, git_in

FILES = 1500


def _doc(n: int, version: int) -> bytes:
    return (
        f"---\nname: m{n}\ndescription: crash memory {n}\ntype: user\n---\n\n"
        f"Crash fact {n}, revision {version}.\n"
    ).encode()


def _import(repo: Path, first: bool, count: int, version: int) -> None:
    message = f"import {version}\n".encode()
    lines = [
        b"commit refs/heads/main",
        f"committer t <t@x> {1_700_000_000 + version} +0000".encode(),
    ]
    lines += [f"data {len(message)}".encode(), message]
    if not first:
        lines.append(b"from refs/heads/main^0")
    for n in range(count):
        body = _doc(n, version)
        lines += [f"M 100644 inline user/m{n}.md".encode(), f"data {len(body)}".encode(), body]
    subprocess.run(
        [*git_argv(str(repo)), "fast-import", "--quiet"],
        input=b"\n".join(lines) + b"\n",
        check=True,
    )


def _kill_during_apply(memory: Path) -> bool:
    """Run a sync, kill -9 it once it has written some of the fetched files (and not all);
    True when it was caught there."""
    some, last = memory / "user" / "m700.md", memory / "user" / "m999.md"
    proc = subprocess.Popen(
        [sys.executable, "-m", "qmem_git", "--memory-dir", str(memory), "sync"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if some.exists():
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            return not last.exists()
        time.sleep(0.001)
    proc.wait()
    return False


def test_a_sync_killed_while_it_writes_the_work_tree_leaves_no_recover_commit(
    tmp_path: Path,
) -> None:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    _import(remote, True, 5, 1)
    memory = tmp_path / "memory"
    assert qmem(memory, "clone", str(remote)).code == 0
    before = git_in(memory, "rev-parse", "HEAD").strip()
    _import(remote, False, FILES, 2)  # the next sync fast-forwards over 1,500 new files
    remote_head = git_in(remote, "rev-parse", "main").strip()
    caught = _kill_during_apply(memory)
    assert caught, "the sync finished before it could be killed in its apply step"
    after = qmem(memory, "remember", "The writer after a killed sync starts from a clean state")
    assert after.code == 0, after.err
    subjects = git_in(memory, "log", "--format=%s").splitlines()
    assert not any(s.startswith("recover") for s in subjects), subjects
    parent = git_in(memory, "rev-parse", "HEAD~1").strip()
    assert parent in (before, remote_head)  # the old state or the new one, nothing between
    assert git_in(memory, "status", "--porcelain") == ""
    fsck_strict(memory)
    if parent == before:  # the old state: none of the fetched files stayed behind
        assert len(list((memory / "user").glob("m*.md"))) == 5


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs mounted for the test (root only; skipped elsewhere, failed under CI)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = (
        os.geteuid() == 0
        and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(disk)], capture_output=True
        ).returncode
        == 0
    )
    require_tool(mounted, "mounting a tmpfs (needs root)")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)


def _fill(disk: Path, leave: int) -> Path:
    """Take all but ``leave`` bytes of the disk (allocated, not sparse)."""
    filler = disk / "filler"
    stats = os.statvfs(disk)
    with filler.open("wb") as handle:
        os.posix_fallocate(handle.fileno(), 0, stats.f_bavail * stats.f_frsize - leave)
    return filler


def test_a_sync_stopped_by_a_full_disk_in_its_apply_step_leaves_no_recover_commit(
    tmp_path: Path, small_disk: Path
) -> None:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    _import(remote, True, 5, 1)
    memory = small_disk / "memory"
    assert qmem(memory, "clone", str(remote)).code == 0
    before = git_in(memory, "rev-parse", "HEAD").strip()
    _import(remote, False, FILES, 2)  # 1,500 files of one 4 KiB page each: 6 MiB
    remote_head = git_in(remote, "rev-parse", "main").strip()
    filler = _fill(small_disk, 1 << 20)  # room for the fetch (~200 KiB), not for the files
    synced = qmem(memory, "sync")
    assert synced.code == 4, synced.err  # disk full
    assert "space" in synced.err.lower(), synced.err
    assert git_in(memory, "rev-parse", "HEAD").strip() == before
    git_in(memory, "cat-file", "-e", remote_head)  # fetched and installed: the apply ran out
    assert len(list((memory / "user").glob("m*.md"))) == 5  # the fetched files taken back
    after = qmem(memory, "remember", "The writer after a full disk starts from a clean state")
    assert after.code == 0, after.err
    subjects = git_in(memory, "log", "--format=%s").splitlines()
    assert not any(s.startswith("recover") for s in subjects), subjects
    assert git_in(memory, "rev-parse", "HEAD~1").strip() == before
    assert git_in(memory, "status", "--porcelain") == ""
    fsck_strict(memory)
    filler.unlink()  # room again: the next sync takes the remote's files
    again = qmem(memory, "sync")
    assert again.code == 0, again.err
    assert (memory / "user" / f"m{FILES - 1}.md").exists()
    assert git_in(memory, "merge-base", "--is-ancestor", remote_head, "HEAD") == ""
    assert git_in(memory, "status", "--porcelain") == ""
    fsck_strict(memory)
