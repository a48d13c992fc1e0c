"""store.staged: the git index against HEAD, read with our index reader and dulwich."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers_git import GitRepo, memory_text

from qmem_git.errors import QmemError
from qmem_git.store.gitindex import read_index, write_index
from qmem_git.store.staged import iter_blobs, staged_changes


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "memory")
    repo.plain(
        "base",
        {
            "user/a.md": memory_text("user", "a", "fact a"),
            "user/b.md": memory_text("user", "b", "fact b"),
            "MEMORY.md": "# Memory index\n",
        },
    )
    return repo


def test_a_clean_index_stages_nothing(repo: GitRepo) -> None:
    staged = staged_changes(repo.path)
    assert staged.changed == [] and sorted(staged.paths) == ["MEMORY.md", "user/a.md", "user/b.md"]
    assert staged.memory_index is not None and staged.memory_index.path == "MEMORY.md"


def test_staged_edits_and_additions_are_listed_with_their_blobs(repo: GitRepo) -> None:
    repo.write("user/a.md", memory_text("user", "a", "an edited fact"))
    repo.write("project/new.md", memory_text("project", "new", "a new fact"))
    repo.write("user/b.md", memory_text("user", "b", "edited but not staged"))
    repo.write("user/untracked.md", "not staged at all")
    repo.git("add", "user/a.md", "project/new.md")
    repo.git("rm", "-q", "--cached", "MEMORY.md")
    staged = staged_changes(repo.path)
    assert [item.path for item in staged.changed] == ["project/new.md", "user/a.md"]
    assert staged.memory_index is None and "MEMORY.md" not in staged.paths
    expected = repo.git("rev-parse", ":user/a.md").strip()
    assert staged.changed[1].sha == expected
    blobs = dict(iter_blobs(repo.path, [expected]))
    assert blobs[expected].decode() == memory_text("user", "a", "an edited fact")


def test_an_index_we_wrote_for_head_needs_no_tree_walk(repo: GitRepo) -> None:
    git_dir = str(repo.root / ".git")
    index = read_index(git_dir)
    index.head = repo.head()
    write_index(git_dir, index)  # records "this index is HEAD"
    assert staged_changes(repo.path).changed == []
    repo.write("user/a.md", memory_text("user", "a", "staged by C git"))
    repo.git("add", "user/a.md")  # C git rewrites the index: the record no longer applies
    assert [item.path for item in staged_changes(repo.path).changed] == ["user/a.md"]


def test_a_damaged_index_is_one_clear_error(repo: GitRepo) -> None:
    (repo.root / ".git" / "index").write_bytes(b"DIRC garbage")
    with pytest.raises(QmemError, match="cannot be read") as caught:
        staged_changes(repo.path)
    assert caught.value.hint
