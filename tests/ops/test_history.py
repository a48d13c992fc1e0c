"""ops.history's ``history`` and ops.undo's conflict check answer "did this commit change that
file?" with one rule, on C-git histories whose messages cannot all be trusted."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers_git import GitRepo, memory_text

from qmem_git.errors import QmemError
from qmem_git.ops.history import history, log
from qmem_git.ops.undo import plan_undo

NOTE = memory_text("project", "note", "Release freeze starts March 5")
NOTE_2 = memory_text("project", "note", "Release freeze starts March 5", "Payments sign off")
TERSE = memory_text("user", "terse", "I prefer terse responses")


@pytest.fixture
def repo(tmp_path: Path, git_exe: str) -> GitRepo:
    r = GitRepo(tmp_path / "memory")
    r.op("remember", "terse", {"user/terse.md": TERSE}, topics=("user",), added=1)
    return r


def side_note_merged(r: GitRepo, resolved: str | None) -> tuple[str, str]:
    """project/note.md added on a side branch by C git, merged after a main commit.

    Returns (side commit, merge); ``resolved`` is what the merge writes instead of side's text.
    """
    r.branch("side")
    side = r.plain("side note", {"project/note.md": NOTE})
    r.checkout("main")
    r.op("remember", "main", {"user/main.md": memory_text("user", "main", "Main")})
    r.git("merge", "-q", "--no-ff", "--no-commit", "side")
    if resolved is not None:
        r.write("project/note.md", resolved)
        r.git("add", "-A")
    return side, r.commit_message("merge side\n")


@pytest.mark.parametrize("resolved", [None, NOTE_2])
def test_history_and_undo_agree_on_a_merge(repo: GitRepo, resolved: str | None) -> None:
    side, merge = side_note_merged(repo, resolved)
    listed = [e.commit for e in history(repo.path, "project/note.md")]
    if resolved is None:
        assert listed == [side]
        assert plan_undo(repo.path, side).deletes == ("project/note.md",)
    else:
        assert listed == [merge, side]
        with pytest.raises(QmemError, match=merge[:7]):
            plan_undo(repo.path, side)


def test_history_and_log_see_what_an_amend_added(repo: GitRepo) -> None:
    remembered = repo.op("remember", "note", {"project/note.md": NOTE}, topics=("project",))
    repo.write("user/terse.md", TERSE + "\nAlso in reviews.\n")
    repo.git("commit", "-q", "-a", "--amend", "--no-edit")
    amended = repo.head()
    assert amended != remembered
    assert [e.commit for e in history(repo.path, "user/terse.md")] == [
        amended,
        repo.git("rev-parse", "HEAD~1").strip(),
    ]
    assert log(repo.path, path="user/terse.md")[0].commit == amended
    with pytest.raises(QmemError, match=r"remember: note.*user/terse\.md"):
        plan_undo(repo.path, "HEAD~1")
