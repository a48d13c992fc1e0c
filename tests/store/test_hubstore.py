"""What a store keeps about the hub, and a project's origin read from its git config."""

from __future__ import annotations

import subprocess
from pathlib import Path

from qmem_git.store import hubstore


def git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True)


def test_origin_is_read_from_the_project_a_subfolder_and_a_worktree(tmp_path: Path) -> None:
    project = tmp_path / "shop"
    git("init", "-q", "-b", "main", str(project))
    git("-C", str(project), "remote", "add", "origin", "git@github.com:Alice/shop.git")
    (project / "src").mkdir()
    assert hubstore.origin_url(str(project)) == "git@github.com:Alice/shop.git"
    assert hubstore.origin_url(str(project / "src")) == "git@github.com:Alice/shop.git"
    env = ["-c", "user.name=a", "-c", "user.email=a@x"]
    git("-C", str(project), *env, "commit", "-q", "--allow-empty", "-m", "one")
    worktree = tmp_path / "elsewhere" / "shop-feature"
    git("-C", str(project), "worktree", "add", "-q", "-b", "feature", str(worktree))
    assert (worktree / ".git").is_file()
    assert hubstore.origin_url(str(worktree)) == "git@github.com:Alice/shop.git"
    lonely = tmp_path / "lonely"
    git("init", "-q", str(lonely))
    assert hubstore.origin_url(str(lonely)) is None
    assert hubstore.origin_url(str(tmp_path / "no-repo-here")) is None


def test_a_new_hub_url_or_branch_drops_the_tracking_ref(tmp_path: Path) -> None:
    repo = tmp_path / "memory.git"
    git("init", "-q", "--bare", str(repo))
    tip = subprocess.run(
        [
            "git",
            "--git-dir",
            str(repo),
            "-c",
            "user.name=a",
            "-c",
            "user.email=a@x",
            "commit-tree",
            "-m",
            "x",
            "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()

    def tracked() -> bool:
        found = subprocess.run(
            ["git", "--git-dir", str(repo), "rev-parse", "-q", "--verify", "refs/remotes/hub/main"],
            capture_output=True,
        )
        return found.returncode == 0

    assert hubstore.track(str(repo), "/hub/one.git", "user") is True
    git("--git-dir", str(repo), "update-ref", "refs/remotes/hub/main", tip)
    assert hubstore.track(str(repo), "/hub/one.git", "user") is False and tracked()
    assert hubstore.track(str(repo), "/hub/two.git", "user") is True and not tracked()
    git("--git-dir", str(repo), "update-ref", "refs/remotes/hub/main", tip)
    assert hubstore.track(str(repo), "/hub/two.git", "projects/x") is True and not tracked()
    record = hubstore.read_record(str(repo))
    assert (record.url, record.branch, record.project) == ("/hub/two.git", "projects/x", None)
    hubstore.record_project(str(repo), "/home/a/shop")
    assert hubstore.read_record(str(repo)).project == "/home/a/shop"
    git("--git-dir", str(repo), "fsck", "--strict")  # C git still reads the config
    out = subprocess.run(
        ["git", "--git-dir", str(repo), "config", "qmem.hub.branch"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "projects/x"
