"""store.walk: which folders are memory folders at all."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from qmem_git.core.paths import Layout
from qmem_git.errors import UsageError
from qmem_git.store.walk import check_memory_folder, check_store, foreign_entries


def test_a_memory_folder_holds_nothing_foreign(tmp_path: Path) -> None:
    for kind in ("user", "feedback", "project", "reference"):
        (tmp_path / kind / "deeper").mkdir(parents=True)
        (tmp_path / kind / "deeper" / "x.md").write_text("x")
        (tmp_path / f"{kind}.md").write_text("legacy topic file")
    (tmp_path / "MEMORY.md").write_text("")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".notes").mkdir()
    (tmp_path / ".draft.md").write_text("dot-entries are never scanned")
    assert foreign_entries(str(tmp_path)) == []
    check_memory_folder(str(tmp_path))
    assert foreign_entries(str(tmp_path / "missing")) == []


def test_anything_else_at_the_top_is_foreign(tmp_path: Path) -> None:
    """A flat project (main.py, Makefile) is no memory folder either."""
    (tmp_path / "user").mkdir()
    for name in ("src", "docs", "quarantine", "User"):
        (tmp_path / name).mkdir()
    for name in ("README.md", "notes.md", "main.py", "Makefile"):
        (tmp_path / name).write_text("x")
    expected = ["Makefile", "README.md", "User", "docs", "main.py", "notes.md", "quarantine", "src"]
    assert foreign_entries(str(tmp_path)) == expected
    shown = "it holds Makefile, README.md, User, docs, main.py and 3 more (hint"
    with pytest.raises(UsageError, match=re.escape(shown)) as caught:
        check_memory_folder(str(tmp_path))
    assert caught.value.exit_code == 2


def test_a_symlinked_memory_folder_or_repository_is_refused(tmp_path: Path) -> None:
    """Either would make qmem-git commit into whatever repository the link points at; a
    ``.git`` link in the memory folder is the agent's, not a repository qmem-git uses."""
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    store = tmp_path / "store"
    store.mkdir()
    (store / ".git").symlink_to(project / ".git")
    check_memory_folder(str(store))
    (tmp_path / "store.git").symlink_to(project / ".git")
    with pytest.raises(UsageError, match=r"store\.git is a symlink"):
        check_memory_folder(str(store))
    (tmp_path / "link").symlink_to(project)
    with pytest.raises(UsageError, match="link is a symlink") as caught:
        check_memory_folder(str(tmp_path / "link") + "/")
    assert "the real folder" in caught.value.hint


def test_a_symlinked_state_folder_is_refused(tmp_path: Path) -> None:
    """Local mode: a cloned project's .qwen -> ~ would get the state files and the store."""
    home = tmp_path / "home"
    (home / "memory").mkdir(parents=True)
    project = tmp_path / "project"
    project.mkdir()
    (project / ".qwen").symlink_to(home)
    layout = Layout(str(project / ".qwen" / "memory"), str(project / ".qwen"), "local", "")
    with pytest.raises(UsageError, match=r"\.qwen is a symlink"):
        check_store(layout)
    check_store(Layout(str(home / "memory"), str(home), "explicit", ""))


@pytest.mark.parametrize("name", ["quarantine", "cache", "hooks"])
def test_a_symlinked_state_subfolder_is_refused(tmp_path: Path, name: str) -> None:
    """A cloned project's .qwen/quarantine -> a published folder would publish what writers
    quarantine (secrets among it)."""
    state = tmp_path / "state"
    (state / "memory").mkdir(parents=True)
    (tmp_path / "public").mkdir()
    (state / name).symlink_to(tmp_path / "public")
    with pytest.raises(UsageError, match=f"{name} is a symlink"):
        check_store(Layout(str(state / "memory"), str(state), "local", ""))
