"""A sync killed (kill -9) while it writes the fetched files into the work tree leaves the old
state or the new one: the next writer puts the old files back (``store.journal``) instead of
committing the fetched ones as ``recover``. Whole processes; histories made with fast-import."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from clihelpers import qmem
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
