"""find_restorable / plan_restore over C-git-built histories."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers_git import GitRepo, memory_text

from qmem_git.core.model import Entry
from qmem_git.errors import NothingToDo, UsageError
from qmem_git.ops.restore import RESTORED_FROM_TRAILER, find_restorable, plan_restore

PNPM = memory_text(
    "user", "pnpm", Entry("Use pnpm for installs", why="Lockfile is pnpm-lock.yaml.")
)
STYLE = memory_text("feedback", "style", "Prefer small PRs", "Write tests first", "Avoid mocks")
STYLE_WITHOUT_TESTS = memory_text("feedback", "style", "Prefer small PRs", "Avoid mocks")


@pytest.fixture
def repo(tmp_path: Path, git_exe: str) -> GitRepo:
    """pnpm file forgotten; one entry of a three-entry file forgotten."""
    r = GitRepo(tmp_path / "memory")
    r.op("remember", "pnpm", {"user/pnpm.md": PNPM})
    r.op("extract", "style", {"feedback/style.md": STYLE})
    r.op("forget", "pnpm", deletes=["user/pnpm.md"], removed=1)
    r.op("forget", "tests first", {"feedback/style.md": STYLE_WITHOUT_TESTS}, removed=1)
    return r


def test_deleted_file_comes_back_verbatim(repo: GitRepo) -> None:
    forget = repo.git("rev-parse", "HEAD~1").strip()
    [candidate] = find_restorable(repo.path, "PNPM-LOCK", [])
    assert candidate.id == "user/pnpm.md" and candidate.file_deleted
    assert candidate.commit == forget and candidate.op == "forget" and candidate.type == "user"
    assert candidate.entry == Entry("Use pnpm for installs", "Lockfile is pnpm-lock.yaml.")
    cs = plan_restore(repo.path, [candidate])
    assert cs.op == "restore" and dict(cs.writes) == {"user/pnpm.md": PNPM}
    assert cs.added == 1 and cs.topics == ("user",)
    assert cs.trailers == ((RESTORED_FROM_TRAILER, forget),)
    assert "Use pnpm for installs" in cs.subject


def test_removed_entry_is_re_added_to_its_file(repo: GitRepo) -> None:
    [candidate] = find_restorable(repo.path, "tests first", [])
    assert candidate.id == "feedback/style.md:1" and not candidate.file_deleted
    cs = plan_restore(repo.path, [candidate])
    expected = memory_text(
        "feedback", "style", "Prefer small PRs", "Avoid mocks", "Write tests first"
    )
    assert dict(cs.writes) == {"feedback/style.md": expected}
    assert not cs.deletes


def test_find_by_forget_id_or_path(repo: GitRepo) -> None:
    assert [c.summary for c in find_restorable(repo.path, None, ["feedback/style.md:1"])] == [
        "Write tests first"
    ]
    assert [c.id for c in find_restorable(repo.path, None, ["user/pnpm.md"])] == ["user/pnpm.md"]


def test_query_miss_is_nothing_to_do(repo: GitRepo) -> None:
    with pytest.raises(NothingToDo) as info:
        find_restorable(repo.path, "kubernetes", [])
    assert "log --op forget" in info.value.hint
    with pytest.raises(NothingToDo):
        plan_restore(repo.path, [])
    with pytest.raises(UsageError):
        find_restorable(repo.path, "  ", [])


def test_memories_present_again_are_skipped(repo: GitRepo) -> None:
    repo.apply(plan_restore(repo.path, find_restorable(repo.path, "pnpm", [])))
    with pytest.raises(NothingToDo) as info:
        find_restorable(repo.path, "pnpm", [])
    assert "is in the memory folder again" in info.value.message
    assert "qmem-git recall" in info.value.hint


def test_from_rev_searches_older_history_only(repo: GitRepo) -> None:
    with pytest.raises(NothingToDo):
        find_restorable(repo.path, "pnpm", [], from_rev="HEAD~2")
    assert find_restorable(repo.path, "pnpm", [], from_rev="HEAD~1")


def test_taken_path_gets_next_free_slug(repo: GitRepo) -> None:
    other = memory_text("user", "pnpm", "Use pnpm v9 only")
    repo.op("remember", "pnpm v9", {"user/pnpm.md": other})
    cs = plan_restore(repo.path, find_restorable(repo.path, "lockfile", []))
    assert dict(cs.writes) == {"user/pnpm-2.md": PNPM}
    assert cs.notes == ("user/pnpm.md is taken now; restored as user/pnpm-2.md",)


def test_part_of_a_deleted_multi_entry_file(repo: GitRepo) -> None:
    repo.op("dream", "drop style", deletes=["feedback/style.md"], removed=2)
    candidates = find_restorable(repo.path, "avoid mocks", [])
    assert [c.id for c in candidates] == ["feedback/style.md:1"]
    cs = plan_restore(repo.path, candidates)
    assert dict(cs.writes) == {"feedback/style.md": memory_text("feedback", "style", "Avoid mocks")}


def test_newest_removal_wins_and_each_memory_once(repo: GitRepo) -> None:
    repo.apply(plan_restore(repo.path, find_restorable(repo.path, "pnpm", [])))
    newer = memory_text("user", "pnpm", Entry("Use pnpm for installs", why="Faster."))
    repo.op("dream", "update pnpm", {"user/pnpm.md": newer})
    last = repo.op("forget", "pnpm again", deletes=["user/pnpm.md"])
    [candidate] = find_restorable(repo.path, "pnpm", [])
    assert candidate.commit == last and candidate.entry and candidate.entry.why == "Faster."


def test_restore_several_from_different_commits(repo: GitRepo) -> None:
    candidates = find_restorable(repo.path, None, ["user/pnpm.md", "feedback/style.md:1"])
    cs = plan_restore(repo.path, candidates)
    assert sorted(cs.writes) == ["feedback/style.md", "user/pnpm.md"]
    assert cs.added == 2 and len(cs.trailers) == 2
    assert cs.topics == ("feedback", "user")


def test_a_symlink_in_history_is_not_restored_as_a_memory(repo: GitRepo) -> None:
    """A committed symlink's blob is its target's name; restoring it would write that name
    as the file's content."""
    target = "the-pnpm-memory-file-we-link-to.md"
    (repo.root / "user").mkdir(exist_ok=True)
    (repo.root / "user" / "zebra.md").symlink_to(target)
    repo.plain("link", {})
    repo.op("snapshot", "remove the link", deletes=["user/zebra.md"])
    for query in ("zebra", target):
        with pytest.raises(NothingToDo):
            find_restorable(repo.path, query, [])
