"""plan_undo on C-git-built histories; the plan is applied with C git and checked with git diff."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers_git import GitRepo, memory_text

from qmem_git.errors import NothingToDo, QmemError
from qmem_git.ops.undo import UNDOES_TRAILER, plan_undo
from qmem_git.store.history import read_log

PNPM = memory_text("user", "pnpm", "Use pnpm for installs")
PNPM_2 = memory_text("user", "pnpm", "Use pnpm for installs", "Run pnpm -r for workspaces")
CI = memory_text("project", "ci", "CI runs on GitHub Actions")


@pytest.fixture
def repo(tmp_path: Path, git_exe: str) -> GitRepo:
    r = GitRepo(tmp_path / "memory")
    r.op("remember", "add pnpm", {"user/pnpm.md": PNPM, "MEMORY.md": "- pnpm\n"})
    r.op(
        "extract",
        "2 memories",
        {"project/ci.md": CI, "user/pnpm.md": PNPM_2, "MEMORY.md": "- pnpm\n- ci\n"},
        topics=("project", "user"),
        added=2,
    )
    return r


def memory_changes(r: GitRepo, *revs: str) -> set[tuple[str, str]]:
    return {c for c in r.name_status(*revs) if c[1] != "MEMORY.md"}


def test_undo_last_operation(repo: GitRepo) -> None:
    extract = repo.head()
    cs = plan_undo(repo.path)
    assert cs.op == "undo"
    assert cs.subject == f"undo {extract[:7]} (extract: 2 memories)"
    assert cs.trailers == ((UNDOES_TRAILER, extract),)
    assert dict(cs.writes) == {"user/pnpm.md": PNPM}
    assert cs.deletes == ("project/ci.md",)
    assert "MEMORY.md" not in cs.paths()
    assert cs.topics == ("project", "user") and (cs.added, cs.removed) == (0, 2)
    repo.apply(cs)
    assert memory_changes(repo, "HEAD~2", "HEAD") == set()
    assert read_log(repo.path)[0].info.trailers[-1] == (UNDOES_TRAILER, extract)


def test_undo_twice_is_empty(repo: GitRepo) -> None:
    repo.apply(plan_undo(repo.path))
    assert plan_undo(repo.path, "HEAD~1").is_empty


def test_undo_of_undo_redoes(repo: GitRepo) -> None:
    repo.apply(plan_undo(repo.path))
    repo.apply(plan_undo(repo.path))
    assert memory_changes(repo, "HEAD~2", "HEAD") == set()


def test_later_change_to_same_file_refuses_without_force(repo: GitRepo) -> None:
    extract = repo.git("rev-parse", "--short=7", "HEAD").strip()
    later = repo.op("dream", "tidy ci", {"project/ci.md": CI + "\nAlso lint.\n"})
    with pytest.raises(QmemError) as info:
        plan_undo(repo.path, extract)
    error = info.value
    assert error.exit_code == 1 and "--force" in error.hint
    assert later[:7] in error.message and "dream: tidy ci" in error.message
    assert "project/ci.md" in error.message
    forced = plan_undo(repo.path, extract, force=True)
    assert forced.deletes == ("project/ci.md",) and dict(forced.writes) == {"user/pnpm.md": PNPM}


def test_later_change_to_other_files_does_not_block(repo: GitRepo) -> None:
    repo.op("remember", "docs", {"reference/docs.md": memory_text("reference", "d", "Docs")})
    cs = plan_undo(repo.path, "HEAD~1")
    assert cs.deletes == ("project/ci.md",)


def test_later_regenerated_index_does_not_block(repo: GitRepo) -> None:
    repo.op("index", "rebuild", {"MEMORY.md": "- rebuilt\n"})
    assert not plan_undo(repo.path, "HEAD~1").is_empty


def test_undo_root_commit_deletes_what_it_added(tmp_path: Path, git_exe: str) -> None:
    r = GitRepo(tmp_path / "m")
    root = r.op("remember", "add pnpm", {"user/pnpm.md": PNPM, "MEMORY.md": "- pnpm\n"})
    cs = plan_undo(r.path, root)
    assert cs.deletes == ("user/pnpm.md",) and not cs.writes
    assert cs.removed == 1 and cs.topics == ("user",)


def test_undo_foreign_commit(repo: GitRepo) -> None:
    repo.plain("hand edit", {"user/pnpm.md": PNPM_2 + "\nEdited.\n"})
    cs = plan_undo(repo.path)
    assert dict(cs.writes) == {"user/pnpm.md": PNPM_2}


def test_undo_merge_is_refused(repo: GitRepo) -> None:
    repo.branch("side", "HEAD~1")
    repo.op("remember", "side", {"user/side.md": memory_text("user", "side", "Side")})
    repo.checkout("main")
    repo.op("remember", "main", {"user/main.md": memory_text("user", "main", "Main")})
    merge = repo.merge("side", "merge side")
    with pytest.raises(QmemError, match="merge") as info:
        plan_undo(repo.path)
    assert merge[:7] in info.value.message and info.value.hint


def test_undo_in_empty_repo(tmp_path: Path, git_exe: str) -> None:
    with pytest.raises(NothingToDo):
        plan_undo(GitRepo(tmp_path / "e").path)
