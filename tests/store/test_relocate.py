"""store.relocate: a store an earlier version made (``memory/.git``) moves beside the memory
folder (``memory.git``) on its next write, history intact, whoever else is writing."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clihelpers import qmem
from helpers_git import gitdir

from qmem_git.store.relocate import move_repository, repository
from qmem_git.store.repo import default_hook_command, hook_script

QMEM = (sys.executable, "-m", "qmem_git", "--memory-dir")


def c_git(git_dir: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", f"--git-dir={git_dir}", *args], capture_output=True, text=True, check=True
    )
    return done.stdout


def legacy_store(tmp_path: Path, memories: int = 3) -> Path:
    """A store laid out as earlier versions made it: made the new way, then its repository
    put back inside the folder with the config ``Repo.init(root)`` wrote (no core.worktree)."""
    root = tmp_path / "state" / "memory"
    assert qmem(root, "init").code == 0
    for number in range(memories):
        assert qmem(root, "remember", "--type", "user", f"Legacy fact {number} about tea").code == 0
    c_git(gitdir(root), "config", "--unset", "core.worktree")
    os.rename(gitdir(root), root / ".git")
    assert subprocess.run(["git", "-C", str(root), "fsck", "--strict"], check=False).returncode == 0
    return root


def history(root: Path, git_dir: Path) -> list[str]:
    c_git(git_dir, f"--work-tree={root}", "fsck", "--strict")
    return c_git(git_dir, "log", "--format=%H %s").splitlines()


def assert_moved(root: Path, before: list[str], new_commits: int) -> None:
    assert not (root / ".git").exists() and gitdir(root).is_dir()
    after = history(root, gitdir(root))
    assert after[new_commits:] == before and len(after) == len(before) + new_commits
    assert c_git(gitdir(root), "config", "core.worktree").strip() == "../memory"
    assert c_git(gitdir(root), "status", "--porcelain") == ""  # no --work-tree needed
    hook = gitdir(root) / "hooks" / "pre-commit"
    assert os.access(hook, os.X_OK) and "qmem-git-managed-hook" in hook.read_text()


def test_the_next_write_moves_the_repository_history_intact(tmp_path: Path) -> None:
    root = legacy_store(tmp_path)
    before = history(root, root / ".git")
    hooks = root / ".git" / "hooks"
    for name in ("pre-commit.local", "pre-commit"):  # chained by our hook / carrying our marker
        (hooks / name).write_text("#!/bin/sh\n# qmem-git-managed-hook\ntouch ran\n")
        (hooks / name).chmod(0o755)
    (hooks / "post-commit").symlink_to(hooks / "pre-commit.local")
    assert qmem(root, "log").code == 0 and qmem(root, "where").code == 0  # readers: no move
    assert (root / ".git").is_dir() and not gitdir(root).exists()
    assert "still inside the memory folder" in qmem(root, "doctor").out
    done = qmem(root, "remember", "--type", "user", "A fact after the upgrade")
    assert done.code == 0, done.err
    assert_moved(root, before, 1)
    moved = gitdir(root) / "hooks"
    assert (moved / "pre-commit").read_text() == hook_script(default_hook_command())
    assert not os.access(moved / "pre-commit.local", os.X_OK)
    assert (moved / "disabled.post-commit").is_symlink() and not (moved / "post-commit").exists()
    report = qmem(root, "doctor")
    assert "hooks not run" in report.out
    assert "disabled.post-commit" in report.out and "pre-commit.local" in report.out
    assert "outside the memory folder" not in report.out


def test_init_and_the_git_passthrough_move_it_too(tmp_path: Path) -> None:
    root = legacy_store(tmp_path, memories=1)
    before = history(root, root / ".git")
    assert qmem(root, "init").code == 0
    assert_moved(root, before, 0)
    again = legacy_store(tmp_path / "again", memories=1)
    before = history(again, again / ".git")
    assert qmem(again, "git", "status").code == 0
    assert_moved(again, before, 0)


def test_a_move_cut_short_is_finished_by_the_next_writer(tmp_path: Path) -> None:
    """Killed right after the rename: no core.worktree yet. The next writer sets it."""
    root = legacy_store(tmp_path, memories=1)
    before = history(root, root / ".git")
    os.rename(root / ".git", gitdir(root))  # what move_repository does first
    assert qmem(root, "remember", "--type", "user", "A fact after the crash").code == 0
    assert_moved(root, before, 1)


def test_when_both_exist_the_new_repository_wins(tmp_path: Path) -> None:
    root = legacy_store(tmp_path, memories=1)
    subprocess.run(["cp", "-a", str(root / ".git"), str(gitdir(root))], check=True)
    c_git(gitdir(root), "config", "core.worktree", "../memory")
    listing = sorted(str(p) for p in (root / ".git").rglob("*"))
    assert repository(str(root)) == str(gitdir(root))
    assert not move_repository(str(root))
    assert qmem(root, "remember", "--type", "user", "Written to the new one").code == 0
    assert "Written to the new one" in c_git(gitdir(root), "log", "-1", "--format=%s")
    assert "Written to the new one" not in c_git(root / ".git", "log", "-1", "--format=%s")
    assert sorted(str(p) for p in (root / ".git").rglob("*")) == listing
    assert f"{root / '.git'} is in the memory folder" in qmem(root, "doctor").out


def test_a_writer_at_the_old_place_is_waited_for(tmp_path: Path) -> None:
    """An earlier version's writer holds memory/.git/qmem.lock: the move waits for it."""
    root = legacy_store(tmp_path, memories=1)
    before = history(root, root / ".git")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            f"fd = os.open({str(root / '.git' / 'qmem.lock')!r}, os.O_RDWR)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(1.5)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    writer = subprocess.Popen(
        [*QMEM, str(root), "remember", "A fact that waited for the old writer"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.7)
    assert holder.poll() is None and (root / ".git").is_dir() and not gitdir(root).exists()
    holder.wait(timeout=30)
    _, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, err
    assert_moved(root, before, 1)


def test_concurrent_writers_all_commit_once_the_repository_moved(tmp_path: Path) -> None:
    root = legacy_store(tmp_path, memories=1)
    before = history(root, root / ".git")
    writers = [
        subprocess.Popen(
            [*QMEM, str(root), "remember", f"Concurrent fact number {number} for the move"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for number in range(4)
    ]
    for writer in writers:
        _, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
    assert_moved(root, before, 4)
    subjects = c_git(gitdir(root), "log", "-4", "--format=%s")
    assert all(f"Concurrent fact number {n} " in subjects for n in range(4))


def test_a_lock_taken_at_the_old_place_holds_the_new_one_after_the_rename(
    tmp_path: Path,
) -> None:
    """Why the move is safe for a writer that waited at the old place: flock follows the file."""
    old = tmp_path / "memory" / ".git"
    old.mkdir(parents=True)
    (old / "qmem.lock").write_text("")
    fd = os.open(old / "qmem.lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.rename(old, tmp_path / "memory.git")
    other = os.open(tmp_path / "memory.git" / "qmem.lock", os.O_RDWR)
    with pytest.raises(BlockingIOError):
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.close(fd)
    fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.close(other)


def test_settings_that_run_commands_do_not_move_with_the_repository(tmp_path: Path) -> None:
    """The old config came from a folder the agent could write: git would run what
    core.fsmonitor, credential.helper or an alias name. Only a memory repository's own
    settings move; the whole old file stays beside it for review."""
    root = legacy_store(tmp_path, memories=1)
    marker = tmp_path / "ran"
    script = tmp_path / "evil.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    script.chmod(0o755)
    config = root / ".git" / "config"
    c_git(root / ".git", "remote", "add", "origin", str(tmp_path / "remote.git"))
    c_git(root / ".git", "config", "user.name", "Tea Drinker")
    for name, value in (
        ("core.fsmonitor", str(script)),
        ("core.pager", str(script)),
        ("credential.helper", f"!{script}"),
        ("alias.st", f"!{script}"),
        ("include.path", str(tmp_path / "more.config")),
    ):
        c_git(root / ".git", "config", name, value)
    old_text = config.read_text()
    assert qmem(root, "remember", "--type", "user", "A fact after the upgrade").code == 0
    moved = gitdir(root)
    assert (moved / "config.before-move").read_text() == old_text
    listed = c_git(moved, "config", "--list", "--local")
    for gone in ("fsmonitor", "pager", "credential.", "alias.", "include."):
        assert gone not in listed, listed
    assert "remote.origin.url=" in listed and "user.name=Tea Drinker" in listed
    assert c_git(moved, "config", "core.worktree").strip() == "../memory"
    assert qmem(root, "git", "status").code == 0 and qmem(root, "git", "st").code != 0
    assert not marker.exists()
    report = qmem(root, "doctor").out
    assert "config.before-move" in report
