"""store.receive: a push into a local repository behaves like ``git push`` to it.

dulwich's LocalGitClient writes the target's refs directly; qmem-git's local push quarantines
the objects, runs ``pre-receive`` / ``update`` / ``post-receive`` / ``post-update`` and honours
``receive.denyNonFastForwards`` and ``receive.denyDeletes``. C git is the reference: the same
hook refuses C git's push of the same commit, and ``git fsck --strict`` checks the target.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers_git import git_argv
from servers import Machine, fsck_strict, git_in, init_bare

from qmem_git.errors import RemoteError
from qmem_git.store import remotes
from qmem_git.store.remotes import Credentials
from qmem_git.store.repo import Repository
from qmem_git.store.sync import RepoObjects, pack_records

ZERO = "0" * 40


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    return init_bare(tmp_path / "remote.git")


@pytest.fixture
def machine(tmp_path: Path, remote: Path) -> Machine:
    """A machine whose first memory is already on the remote."""
    m = Machine(tmp_path, "a", [1_700_000_000])
    m.remember("The release train leaves every Tuesday")
    m.connect(str(remote))
    return m


def hook(remote: Path, name: str, script: str, *, folder: str = "hooks", mode: int = 0o755) -> Path:
    path = remote / folder / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(script)
    path.chmod(mode)
    return path


def main_of(remote: Path) -> str:
    return git_in(remote, "rev-parse", "main").strip()


def has_object(repo: Path, sha: str) -> bool:
    proc = subprocess.run([*git_argv(str(repo)), "cat-file", "-e", sha], capture_output=True)
    return proc.returncode == 0


REFUSING_PRE_RECEIVE = """#!/bin/sh
pwd > "$GIT_DIR/pre-receive.cwd"
while read old new ref; do
  echo "$old $new $ref" >> "$GIT_DIR/pre-receive.in"
  git cat-file -t "$new" > "$GIT_DIR/pre-receive.sees"
done
echo "memory pushes are frozen for maintenance" >&2
exit 1
"""


def test_pre_receive_refusal_is_exit_5_with_its_message_and_nothing_lands(
    machine: Machine, remote: Path
) -> None:
    hook(remote, "pre-receive", REFUSING_PRE_RECEIVE)
    before = main_of(remote)
    machine.remember("Deploys need two approvals from the platform team")
    with pytest.raises(RemoteError) as caught:
        machine.sync()
    assert caught.value.exit_code == 5
    assert caught.value.message == (
        "the remote refused the push: pre-receive hook declined: "
        "memory pushes are frozen for maintenance"
    )
    new = machine.head()
    assert main_of(remote) == before
    assert (remote / "pre-receive.in").read_text() == f"{before} {new} refs/heads/main\n"
    assert (remote / "pre-receive.cwd").read_text().strip() == str(remote)
    assert (remote / "pre-receive.sees").read_text().strip() == "commit"  # the quarantine
    assert not has_object(remote, new)  # refused objects are not moved in
    assert not [p for p in os.listdir(remote / "objects") if p.startswith("tmp_objdir")]
    fsck_strict(remote)
    c_git = subprocess.run(
        [*git_argv(str(machine.root)), "push", str(remote), "main"],
        capture_output=True,
        text=True,
    )
    assert c_git.returncode != 0 and "pre-receive hook declined" in c_git.stderr
    (remote / "hooks" / "pre-receive").unlink()
    assert machine.sync().pushed
    assert main_of(remote) == new


def test_update_hook_gets_ref_old_new_and_can_refuse(machine: Machine, remote: Path) -> None:
    hook(remote, "update", '#!/bin/sh\necho "$1 $2 $3" > "$GIT_DIR/update.args"\nexit 7\n')
    before = main_of(remote)
    machine.remember("The on-call rotation changes every Monday morning")
    with pytest.raises(RemoteError, match="update hook declined") as caught:
        machine.sync()
    assert caught.value.exit_code == 5
    assert main_of(remote) == before
    args = (remote / "update.args").read_text().split()
    assert args == ["refs/heads/main", before, machine.head()]
    fsck_strict(remote)


def test_post_receive_and_post_update_run_after_the_update_and_cannot_undo_it(
    machine: Machine, remote: Path
) -> None:
    hook(remote, "post-receive", '#!/bin/sh\ncat > "$GIT_DIR/post-receive.in"\nexit 1\n')
    hook(remote, "post-update", '#!/bin/sh\necho "$@" > "$GIT_DIR/post-update.args"\nexit 1\n')
    before = main_of(remote)
    machine.remember("Staging databases are reset every night")
    assert machine.sync().pushed
    assert main_of(remote) == machine.head()
    line = f"{before} {machine.head()} refs/heads/main\n"
    assert (remote / "post-receive.in").read_text() == line
    assert (remote / "post-update.args").read_text().strip() == "refs/heads/main"
    fsck_strict(remote)


def test_core_hooks_path_of_the_target_is_honoured(machine: Machine, remote: Path) -> None:
    git_in(remote, "config", "core.hooksPath", "custom-hooks")
    hook(
        remote,
        "pre-receive",
        "#!/bin/sh\necho from custom hooks >&2\nexit 1\n",
        folder="custom-hooks",
    )
    hook(remote, "pre-receive", "#!/bin/sh\nexit 0\n")  # ignored: core.hooksPath wins
    machine.remember("Hook folders can be moved with core.hooksPath")
    with pytest.raises(RemoteError, match="from custom hooks"):
        machine.sync()


def test_a_hook_that_is_not_executable_is_ignored_like_git_does(
    machine: Machine, remote: Path
) -> None:
    hook(remote, "pre-receive", "#!/bin/sh\nexit 1\n", mode=0o644)
    machine.remember("Only executable hooks are run by git")
    assert machine.sync().pushed
    assert main_of(remote) == machine.head()


def test_a_hook_without_shebang_runs_under_sh(machine: Machine, remote: Path) -> None:
    hook(remote, "pre-receive", 'echo "plain script says no" >&2\nexit 1\n')
    machine.remember("Hooks without a shebang line run under sh")
    with pytest.raises(RemoteError, match="plain script says no"):
        machine.sync()


# --- receive.denyNonFastForwards / receive.denyDeletes (a forced push, sent directly) ----------


def _send(machine: Machine, remote: Path, target: str) -> dict[bytes, str | None]:
    transport = remotes.open_transport(
        str(remote), credentials=Credentials(), env=dict(os.environ), timeout=10, for_push=True
    )
    repo = Repository(str(machine.root))
    here = RepoObjects(repo)
    try:
        result = transport.client.send_pack(
            transport.path,
            lambda refs: {**refs, b"refs/heads/main": target.encode()},  # type: ignore[dict-item]
            lambda have, want: pack_records(here, want, [sha for sha in have if sha in here]),
        )
    finally:
        repo.close()
    return dict(result.ref_status or {})


def test_forced_pushes_honour_deny_non_fast_forwards_and_deny_deletes(
    machine: Machine, remote: Path
) -> None:
    machine.remember("The second memory makes main two commits long")
    machine.sync()
    head = main_of(remote)
    parent = git_in(remote, "rev-parse", "main~1").strip()
    git_in(remote, "config", "receive.denyNonFastForwards", "true")
    git_in(remote, "config", "receive.denyDeletes", "true")
    assert _send(machine, remote, parent) == {b"refs/heads/main": "non-fast-forward"}
    assert _send(machine, remote, ZERO) == {b"refs/heads/main": "deletion prohibited"}
    assert main_of(remote) == head
    git_in(remote, "config", "receive.denyNonFastForwards", "false")
    assert _send(machine, remote, parent) == {b"refs/heads/main": None}
    assert main_of(remote) == parent
    fsck_strict(remote)


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting for init to reap it is not)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_a_hook_that_times_out_leaves_no_process_behind(tmp_path: Path, remote: Path) -> None:
    """A timeout kills the hook's whole process group, not only the shell."""
    m = Machine(tmp_path, "slow", [1_700_000_000], QMEM_GIT_TIMEOUT="2")
    m.remember("The release train leaves every Tuesday")
    m.connect(str(remote))
    hook(remote, "pre-receive", '#!/bin/sh\nsleep 60 &\necho $! > "$GIT_DIR/sleep.pid"\nwait\n')
    before = main_of(remote)
    m.remember("Deploys need two approvals from the platform team")
    started = time.monotonic()
    with pytest.raises(RemoteError, match="pre-receive hook timed out") as caught:
        m.sync()
    assert caught.value.exit_code == 5
    assert time.monotonic() - started < 30
    pid = int((remote / "sleep.pid").read_text())
    try:
        assert _gone_within(pid, 5), f"the hook's sleep {pid} is still running"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert main_of(remote) == before


def test_the_hooks_of_one_push_share_one_timeout(tmp_path: Path, remote: Path) -> None:
    """pre-receive and update each within the timeout, together past it: the push is refused."""
    m = Machine(tmp_path, "slow", [1_700_000_000], QMEM_GIT_TIMEOUT="2")
    m.remember("The release train leaves every Tuesday")
    m.connect(str(remote))
    hook(remote, "pre-receive", "#!/bin/sh\ncat >/dev/null\nsleep 1.2\n")
    hook(remote, "update", "#!/bin/sh\nsleep 1.2\n")
    before = main_of(remote)
    m.remember("Deploys need two approvals from the platform team")
    with pytest.raises(RemoteError, match="update hook timed out") as caught:
        m.sync()
    assert caught.value.exit_code == 5
    assert main_of(remote) == before
    (remote / "hooks" / "update").unlink()
    assert m.sync().pushed  # pre-receive alone fits in the budget
    assert main_of(remote) == m.head()


def test_a_quarantine_a_killed_receive_left_is_removed_once_stale(
    machine: Machine, remote: Path
) -> None:
    objects = remote / "objects"
    stale, fresh = objects / "tmp_objdir-incoming-dead", objects / "tmp_objdir-incoming-live"
    for folder in (stale, fresh):
        (folder / "pack").mkdir(parents=True)
        (folder / "pack" / "x.pack").write_bytes(b"PACK")
    hours_ago = time.time() - 2 * 3600
    os.utime(stale, (hours_ago, hours_ago))
    machine.remember("The staging cluster deploys from branch release-7")
    assert machine.sync().action == "pushed"
    assert not stale.exists()
    assert fresh.exists()  # may be another receive's, still running


# --- reflogs in the remote ---------------------------------------------------------------------


def test_a_push_keeps_a_remote_reflog_only_where_git_receive_pack_would(
    machine: Machine, remote: Path, tmp_path: Path
) -> None:
    """A bare repository keeps no reflog unless ``core.logAllRefUpdates`` asks for one (C git's
    default): dulwich's own rule wrote a line per push, forever. C git's push of the same
    commit into another bare repository is the reference."""
    reference = init_bare(tmp_path / "reference.git")
    subprocess.run([*git_argv(str(machine.root)), "push", "-q", str(reference), "main"], check=True)
    log = Path("logs", "refs", "heads", "main")
    assert not (reference / log).exists()
    machine.remember("Reflogs in a bare remote are git's choice, not ours")
    assert machine.sync().pushed
    assert not (remote / log).exists()
    git_in(remote, "config", "core.logAllRefUpdates", "true")
    machine.remember("With logAllRefUpdates the remote logs each push")
    assert machine.sync().pushed
    lines = (remote / log).read_text().splitlines()
    assert len(lines) == 1 and lines[0].split()[1] == main_of(remote)
    git_in(remote, "config", "core.logAllRefUpdates", "false")  # a log that exists grows on
    machine.remember("An existing reflog keeps growing, as C git appends to it")
    assert machine.sync().pushed
    assert len((remote / log).read_text().splitlines()) == 2
    fsck_strict(remote)


def _loose(repo: Path) -> set[str]:
    folders = (d for d in (repo / "objects").iterdir() if len(d.name) == 2)
    return {d.name + f.name for d in folders for f in d.iterdir()}


def _packs(repo: Path) -> set[str]:
    return {p.name for p in (repo / "objects" / "pack").glob("*.pack")}


def test_a_small_push_is_stored_loose_as_git_receive_pack_stores_it(
    machine: Machine, remote: Path
) -> None:
    """Under receive.unpackLimit (100) objects a push adds no pack: one pack per push left
    hundreds that every later fetch, clone and push searched one by one."""
    packs, loose = _packs(remote), _loose(remote)
    machine.remember("The staging database is rebuilt every night")
    assert machine.sync().action == "pushed"
    assert _packs(remote) == packs
    added = _loose(remote) - loose
    assert machine.head() in added and 3 <= len(added) <= 5
    assert not any(
        n.startswith("tmp_") for n in os.listdir(remote / "objects" / machine.head()[:2])
    )
    fsck_strict(remote)


def test_the_remotes_unpack_limit_is_honoured(machine: Machine, remote: Path) -> None:
    git_in(remote, "config", "receive.unpackLimit", "1")
    packs = _packs(remote)
    machine.remember("The staging database is rebuilt every night")
    machine.sync()
    assert len(_packs(remote) - packs) == 1
    fsck_strict(remote)


def test_a_small_push_to_a_remote_with_pre_receive_is_quarantined_first(
    machine: Machine, remote: Path
) -> None:
    hook(remote, "pre-receive", REFUSING_PRE_RECEIVE)
    loose = _loose(remote)
    machine.remember("The staging database is rebuilt every night")
    with pytest.raises(RemoteError):
        machine.sync()
    assert (remote / "pre-receive.sees").read_text().strip() == "commit"  # it saw the objects
    assert _loose(remote) == loose  # and none of them stayed
    assert not list((remote / "objects").glob("tmp_objdir-incoming-*"))


def test_the_remotes_loose_objects_are_packed_once_they_pile_up(
    machine: Machine, remote: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qmem_git.store import receive

    monkeypatch.setattr(receive, "REMOTE_LOOSE_TO_PACK", 12)
    packs = _packs(remote)
    for n in range(3):
        machine.remember(f"Release candidate {n} is cut on Mondays")
        machine.sync()
    assert len(_packs(remote) - packs) == 1
    assert len(_loose(remote)) < 12
    fsck_strict(remote)
    assert main_of(remote) == machine.head()
