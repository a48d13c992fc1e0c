"""A remote can neither stall a sync nor hold up the writers meanwhile: the fetch waits on the
network without the writer lock, and ``QMEM_GIT_TIMEOUT`` bounds the whole exchange (not each
read). Whole ``qmem-git`` processes against loopback servers that misbehave (tests/hostile.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clihelpers import qmem
from hostile import HostileServer
from servers import fsck_strict, git_in

BOUND = 3.0


def _store(tmp_path: Path, url: str) -> Path:
    memory = tmp_path / "memory"
    assert qmem(memory, "remember", "Sync bounds need one memory to start with").code == 0
    assert qmem(memory, "remote", "add", "origin", url).code == 0
    return memory


def _sync(memory: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "qmem_git", "--memory-dir", str(memory), "sync"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "QMEM_GIT_TIMEOUT": str(BOUND)},
    )


def _wait_for_client(server: HostileServer, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while server.connections == 0 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert server.connections >= 1, "the sync never reached the server"


@pytest.mark.parametrize("kind", ["git", "http"])
def test_a_dripping_remote_neither_stalls_the_sync_nor_blocks_a_writer(
    tmp_path: Path, kind: str
) -> None:
    with HostileServer("drip", kind, interval=0.5) as server:
        memory = _store(tmp_path, server.url())
        started = time.monotonic()
        proc = _sync(memory)
        _wait_for_client(server, proc)
        writer = qmem(
            memory,
            "remember",
            "A writer commits while the sync waits on the network",
            env={"QMEM_LOCK_TIMEOUT": "1"},
        )
        still_waiting = proc.poll() is None
        _, err = proc.communicate(timeout=60)
        elapsed = time.monotonic() - started
    assert writer.code == 0, writer.err
    assert still_waiting, "the sync ended before the writer ran: nothing was shown"
    assert proc.returncode == 5, err
    assert "timed out" in err
    assert elapsed < BOUND + 8, elapsed  # process start, imports, the store: not the drip
    assert "A writer commits" in git_in(memory, "log", "-1", "--format=%s%n%b")
    assert git_in(memory, "status", "--porcelain") == ""
    fsck_strict(memory)
