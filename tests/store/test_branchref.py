"""store.branchref: a missing or damaged main is lost (exit 6) in a repo with history, never
unborn; the commit to restore comes from the index record, the reflog, or the object store."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from helpers_git import git_argv, gitdir, init_memory_git

from qmem_git.errors import BranchLost
from qmem_git.store.branchref import restore_branch
from qmem_git.store.repo import Repository


def git(root: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [*git_argv(str(root)), *args], input=stdin, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def commit(root: Path, name: str, when: int) -> str:
    (root / "user").mkdir(exist_ok=True)
    (root / "user" / f"{name}.md").write_text(f"{name}\n")
    git(root, "add", "-A")
    env_date = f"{when} +0000"
    subprocess.run(
        [*git_argv(str(root)), "commit", "-q", "-m", name, "--date", env_date],
        check=True,
        env={**os.environ, "GIT_COMMITTER_DATE": env_date},
    )
    return git(root, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "memory"
    init_memory_git(root)
    return root


def head_of(root: Path) -> str | None:
    with Repository(str(root)) as repository:
        return repository.head()[1]


def test_an_empty_repository_is_unborn(repo: Path) -> None:
    assert head_of(repo) is None


def test_a_lone_dangling_root_commit_is_an_interrupted_first_commit(repo: Path) -> None:
    tree = git(repo, "mktree", stdin="")
    git(repo, "commit-tree", tree, "-m", "first, killed before the branch moved")
    assert head_of(repo) is None


def test_the_reflog_names_the_commit_when_there_is_no_index_record(repo: Path) -> None:
    commit(repo, "a", 1_700_000_000)
    second = commit(repo, "b", 1_700_000_100)
    (gitdir(repo) / "refs" / "heads" / "main").unlink()
    with pytest.raises(BranchLost) as caught:
        head_of(repo)
    assert caught.value.commit == second and caught.value.exit_code == 6


def test_without_reflog_the_newest_tip_not_reached_by_other_refs_is_chosen(repo: Path) -> None:
    commit(repo, "a", 1_700_000_000)
    ours = commit(repo, "b", 1_700_000_100)
    git(repo, "checkout", "-q", "-b", "other", "HEAD~1")
    theirs = commit(repo, "c", 1_700_000_900)  # newer, but a ref of its own reaches it
    git(repo, "update-ref", "refs/remotes/origin/main", theirs)
    git(repo, "checkout", "-q", "main")
    git(repo, "branch", "-q", "-D", "other")
    git(repo, "pack-refs", "--all")
    git(repo, "symbolic-ref", "HEAD", "refs/heads/main")
    git(repo, "update-ref", "-d", "refs/heads/main")
    git(repo, "reflog", "expire", "--expire=all", "--all")
    for log in (gitdir(repo) / "logs").rglob("*"):
        if log.is_file():
            log.unlink()
    with pytest.raises(BranchLost) as caught:
        head_of(repo)
    assert caught.value.commit == ours
    assert restore_branch(str(repo)) == ("refs/heads/main", ours)
    assert git(repo, "rev-parse", "main") == ours
    assert restore_branch(str(repo)) is None  # nothing left to fix
    git(repo, "fsck", "--strict")


def test_a_clone_s_fetched_commits_alone_are_no_local_history(repo: Path) -> None:
    commit(repo, "a", 1_700_000_000)
    fetched = commit(repo, "b", 1_700_000_100)
    git(repo, "update-ref", "refs/remotes/origin/main", fetched)
    git(repo, "update-ref", "-d", "refs/heads/main")
    for log in (gitdir(repo) / "logs").rglob("*"):
        if log.is_file():
            log.unlink()
    assert head_of(repo) is None
