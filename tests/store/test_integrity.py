"""store.integrity: every object HEAD needs is read and verified, damage is named."""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers_git import git_argv, gitdir, init_memory_git

from qmem_git.store.integrity import check_objects


def git(root: Path, *args: str) -> str:
    done = subprocess.run([*git_argv(str(root)), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def repo_with_history(tmp_path: Path) -> Path:
    root = tmp_path / "memory"
    init_memory_git(root)
    for number in range(3):
        (root / "user").mkdir(exist_ok=True)
        (root / "user" / f"m{number}.md").write_text(f"memory {number}\n")
        git(root, "add", "-A")
        git(root, "commit", "-qm", f"c{number}")
    return root


def test_a_healthy_repository_has_no_problems(tmp_path: Path) -> None:
    report = check_objects(str(repo_with_history(tmp_path)))
    assert (report.commits, report.files, report.problems) == (3, 3, ())


def test_a_missing_commit_in_history_is_reported(tmp_path: Path) -> None:
    root = repo_with_history(tmp_path)
    parent = git(root, "rev-parse", "HEAD~1").strip()
    (gitdir(root) / "objects" / parent[:2] / parent[2:]).unlink()
    report = check_objects(str(root))
    assert report.problems == (f"memory repository is corrupt: object {parent} is missing",)


def test_a_damaged_tree_of_head_is_reported(tmp_path: Path) -> None:
    root = repo_with_history(tmp_path)
    tree = git(root, "rev-parse", "HEAD:user").strip()
    path = gitdir(root) / "objects" / tree[:2] / tree[2:]
    path.chmod(0o644)
    path.write_bytes(b"x")
    report = check_objects(str(root))
    assert report.commits == 3 and len(report.problems) == 1
    assert f"object {tree} is damaged" in report.problems[0]
