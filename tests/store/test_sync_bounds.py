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
from helpers_git import gitdir
from hostile import HostileServer
from servers import fsck_strict, git_in

BOUND = 3.0


def _store(tmp_path: Path, url: str) -> Path:
    memory = tmp_path / "memory"
    memory.mkdir()
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


def _peak_mib(proc: subprocess.Popen[str]) -> tuple[int, float]:
    """Wait for ``proc``; its exit code and peak resident memory in MiB.

    Read from the child's own ``VmHWM`` while it runs: wait4's ``ru_maxrss`` also counts what
    the child had as a fork of this (large, late in the suite) test process before its exec.
    An unbounded flood grows for seconds, far longer than one poll interval.
    """
    peak = 0.0
    while proc.poll() is None:
        peak = max(peak, _high_water_mib(proc.pid))
        time.sleep(0.01)
    return proc.returncode, peak


def _high_water_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0  # exited, or a zombie without an address space


@pytest.mark.parametrize("kind", ["git", "http"])
def test_a_remote_flooding_ref_names_is_cut_off_while_it_streams(tmp_path: Path, kind: str) -> None:
    with HostileServer("flood", kind) as server:
        memory = _store(tmp_path, server.url())
        started = time.monotonic()
        proc = _sync(memory)
        assert proc.stderr is not None
        code, peak = _peak_mib(proc)
        err = proc.stderr.read()
        elapsed = time.monotonic() - started
    assert code == 5, err
    assert "refs" in err and "stopped reading" in err, err
    assert elapsed < BOUND + 8, elapsed
    assert 10 < peak < 150, peak  # read at all; unbounded, it grew by gigabytes
    fsck_strict(memory)


def test_a_path_remote_with_a_huge_ref_list_is_refused_before_it_is_read(
    tmp_path: Path,
) -> None:
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    line = "1" * 40 + " refs/heads/" + "x" * 60 + "{}\n"
    with (bare / "packed-refs").open("w") as out:
        out.writelines(line.format(n) for n in range(60_000))  # ~7 MiB
    memory = _store(tmp_path, str(bare))
    result = qmem(memory, "sync")
    assert result.code == 5, result.err
    assert "stopped reading" in result.err


def test_a_running_syncs_quarantine_survives_another_syncs_cleanup(tmp_path: Path) -> None:
    from qmem_git.store.sync import QUARANTINE_PREFIX, Quarantine, remove_stale_quarantines

    git_dir = tmp_path / "repo.git"
    subprocess.run(["git", "init", "-q", "--bare", str(git_dir)], check=True)
    live = Quarantine(str(git_dir), str(git_dir / "objects")).open()  # fetching, outside the lock
    dead = git_dir / f"{QUARANTINE_PREFIX}deadbeef"  # a killed sync's: nobody holds its lock
    (dead / "pack").mkdir(parents=True)
    try:
        remove_stale_quarantines(str(git_dir))
        assert Path(live.path).is_dir()
        assert not dead.exists()
    finally:
        live.discard()
    assert not Path(live.path).exists()


HUGE_MIB = 96  # of zeros: a pack of ~100 KiB that dulwich would inflate whole into memory


@pytest.fixture(scope="module")
def huge_seed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository (C git, loose objects) whose main ends in a commit adding a
    ``HUGE_MIB`` MiB memory file made of one sparse file."""
    seed = tmp_path_factory.mktemp("huge") / "seed"
    subprocess.run(["git", "init", "-q", "-b", "main", str(seed)], check=True)
    (seed / "user").mkdir()
    (seed / "user" / "a.md").write_text(
        "---\nname: a\ndescription: a small memory\ntype: user\n---\n\nA small fact.\n"
    )
    git_in(seed, "add", "-A")
    git_in(seed, "commit", "-q", "-m", "small")
    with (seed / "user" / "huge.md").open("wb") as sparse:
        sparse.truncate(HUGE_MIB << 20)
    git_in(seed, "add", "-A")
    git_in(seed, "commit", "-q", "-m", "huge")
    return seed


def _huge_remote(seed: Path, tmp_path: Path, packed: bool) -> Path:
    remote = tmp_path / "remote.git"
    # --no-local: git's own transfer packs the objects; a local clone links them loose
    extra = ["--no-local"] if packed else []
    subprocess.run(["git", "clone", "-q", "--bare", *extra, str(seed), str(remote)], check=True)
    loose = any((remote / "objects").glob("[0-9a-f][0-9a-f]/*"))
    assert loose != packed
    return remote


def _refused_with_bounded_memory(memory: Path, *args: str) -> None:
    before = git_in(memory, "rev-parse", "HEAD") if gitdir(memory).exists() else None
    proc = subprocess.Popen(
        [sys.executable, "-m", "qmem_git", "--memory-dir", str(memory), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    code, peak = _peak_mib(proc)
    err = proc.stderr.read()
    assert code == 5, err
    assert "larger than 4 MiB" in err, err
    assert 10 < peak < HUGE_MIB * 0.8, peak  # inflated, the blob alone is HUGE_MIB
    assert not (memory / "user" / "huge.md").exists()
    assert not list(gitdir(memory).glob("qmem-incoming-*"))
    if before is not None:
        assert git_in(memory, "rev-parse", "HEAD") == before
    fsck_strict(memory)


def test_a_huge_blob_in_a_packed_path_remote_is_refused_before_a_clone_inflates_it(
    tmp_path: Path, huge_seed: Path
) -> None:
    remote = _huge_remote(huge_seed, tmp_path, packed=True)
    _refused_with_bounded_memory(tmp_path / "memory", "clone", str(remote))


@pytest.mark.parametrize("scheme", ["path", "file"])
def test_a_huge_blob_in_a_path_remote_is_refused_before_a_sync_reads_it(
    tmp_path: Path, huge_seed: Path, scheme: str
) -> None:
    remote = _huge_remote(huge_seed, tmp_path, packed=scheme == "file")
    memory = _store(tmp_path, remote.as_uri() if scheme == "file" else str(remote))
    _refused_with_bounded_memory(memory, "sync")


def test_a_huge_blob_over_git_protocol_is_refused_before_it_is_inflated(
    tmp_path: Path, huge_seed: Path
) -> None:
    from servers import GitDaemon

    served = tmp_path / "served"
    served.mkdir()
    _huge_remote(huge_seed, served, packed=True)
    daemon = GitDaemon(served).start()
    try:
        memory = _store(tmp_path, daemon.url("remote.git"))
        _refused_with_bounded_memory(memory, "sync")
    finally:
        daemon.stop()
