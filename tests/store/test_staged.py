"""store.staged: the git index against HEAD, read with our index reader and dulwich."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers_git import GitRepo, git_argv, gitdir, memory_text

from qmem_git.store.gitindex import read_index, write_index
from qmem_git.store.staged import (
    IndexNotReadable,
    iter_blobs,
    render_staged_index,
    staged_changes,
)
from qmem_git.store.workdir import render_index


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "memory")
    repo.write("user/a.md", memory_text("user", "a", "fact a"))
    repo.write("user/b.md", memory_text("user", "b", "fact b"))
    repo.write("MEMORY.md", render_index(str(repo.root)).text)
    repo.git("add", "-A")
    repo.git("commit", "-qm", "base")
    return repo


def changed(repo: GitRepo, index_file: str | None = None) -> list[str]:
    return [item.path for item in staged_changes(repo.path, index_file).changed]


def test_a_clean_index_stages_nothing(repo: GitRepo) -> None:
    staged = staged_changes(repo.path)
    assert staged.changed == [] and staged.conflicted == []
    assert sorted(staged.files) == ["MEMORY.md", "user/a.md", "user/b.md"]


def test_staged_edits_and_additions_are_listed_with_their_blobs(repo: GitRepo) -> None:
    repo.write("user/a.md", memory_text("user", "a", "an edited fact"))
    repo.write("project/new.md", memory_text("project", "new", "a new fact"))
    repo.write("user/b.md", memory_text("user", "b", "edited but not staged"))
    repo.write("user/untracked.md", "not staged at all")
    repo.git("add", "user/a.md", "project/new.md")
    repo.git("rm", "-q", "--cached", "MEMORY.md")
    staged = staged_changes(repo.path)
    assert [item.path for item in staged.changed] == ["project/new.md", "user/a.md"]
    assert "MEMORY.md" not in staged.files
    expected = repo.git("rev-parse", ":user/a.md").strip()
    assert staged.files["user/a.md"].sha == expected
    blobs = dict(iter_blobs(repo.path, [expected]))
    assert blobs[expected].decode() == memory_text("user", "a", "an edited fact")


def test_an_index_we_wrote_for_head_needs_no_tree_walk(repo: GitRepo) -> None:
    git_dir = str(gitdir(repo.root))
    index = read_index(git_dir)
    index.head = repo.head()
    write_index(git_dir, index)  # records "this index is HEAD"
    assert changed(repo) == []
    repo.write("user/a.md", memory_text("user", "a", "staged by C git"))
    repo.git("add", "user/a.md")  # C git rewrites the index: the record no longer applies
    assert changed(repo) == ["user/a.md"]


def test_an_unborn_head_stages_everything(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "memory")
    repo.write("user/a.md", memory_text("user", "a", "fact a"))
    repo.git("add", "-A")
    git_dir = str(gitdir(repo.root))
    write_index(git_dir, read_index(git_dir))  # a head record of "-": no commit yet
    assert changed(repo) == ["user/a.md"]


def test_another_index_file_is_read_when_given(repo: GitRepo) -> None:
    """``git commit -a`` hands its hook a temporary index through GIT_INDEX_FILE."""
    repo.write("user/a.md", memory_text("user", "a", "only in the other index"))
    other = gitdir(repo.root) / "other-index"
    repo.git("add", "user/a.md", env={"GIT_INDEX_FILE": str(other)})
    assert changed(repo) == []
    assert changed(repo, str(other)) == ["user/a.md"]


def test_a_mode_change_alone_is_a_change(repo: GitRepo) -> None:
    blob = repo.git("rev-parse", "HEAD:user/a.md").strip()
    repo.git("update-index", "--cacheinfo", f"160000,{blob},user/a.md")
    assert changed(repo) == ["user/a.md"]


def test_intent_to_add_entries_are_not_part_of_the_commit(repo: GitRepo) -> None:
    repo.write("user/draft.md", "no frontmatter yet\n")
    repo.git("add", "-N", "user/draft.md")
    staged = staged_changes(repo.path)
    assert "user/draft.md" not in staged.files and staged.changed == []


def test_unmerged_paths_are_listed_as_conflicted(repo: GitRepo) -> None:
    repo.git("checkout", "-q", "-b", "side")
    repo.write("user/a.md", memory_text("user", "a", "side"))
    repo.git("commit", "-qam", "side")
    repo.git("checkout", "-q", "main")
    repo.write("user/a.md", memory_text("user", "a", "main"))
    repo.git("commit", "-qam", "main")
    merged = subprocess.run([*git_argv(repo.path), "merge", "side"], capture_output=True)
    assert merged.returncode != 0
    assert staged_changes(repo.path).conflicted == ["user/a.md"]


def test_the_index_as_staged_is_rendered_from_staged_files_and_their_index_times(
    repo: GitRepo,
) -> None:
    repo.write("user/draft.md", memory_text("user", "draft", "not staged"))
    repo.write("user/a.md", memory_text("user", "a", "edited after staging", description="new"))
    staged = staged_changes(repo.path)
    assert render_staged_index(repo.path, staged).text == (repo.root / "MEMORY.md").read_text()
    repo.git("rm", "-q", "--cached", "user/b.md")
    assert "user/b.md" not in render_staged_index(repo.path, staged_changes(repo.path)).text


@pytest.mark.parametrize("form", ["split", "worktree"])
def test_index_forms_this_reader_does_not_handle_are_one_clear_error(
    repo: GitRepo, form: str, tmp_path: Path
) -> None:
    if form == "split":
        repo.git("update-index", "--split-index")
        root = repo.path
    else:
        repo.git("worktree", "add", "-q", str(tmp_path / "wt"), "-b", "wt")
        root = str(tmp_path / "wt")
    with pytest.raises(IndexNotReadable) as caught:
        staged_changes(root)
    assert caught.value.hint
