"""store.walk: which folders are memory folders at all."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from qmem_git.core.paths import Layout
from qmem_git.errors import UsageError
from qmem_git.store.walk import check_memory_folder, check_store, is_foreign_repository


def test_whatever_the_agent_keeps_beside_memories_never_refuses_the_folder(
    tmp_path: Path,
) -> None:
    """pinned/, root-level notes, logs/, code, any folder: all the agent's (issue 18)."""
    for name in ("user", "Pinned", "logs", "notes/a/b", "src", "quarantine"):
        (tmp_path / name).mkdir(parents=True)
    for name in ("README.md", "notes.md", "main.py", "logs/run.txt", "notes/a/b/MEMORY.md"):
        (tmp_path / name).write_text("x")
    check_memory_folder(str(tmp_path))
    assert not is_foreign_repository(str(tmp_path))
    check_memory_folder(str(tmp_path / "missing"))


def test_another_projects_repository_is_refused_ours_is_not(tmp_path: Path) -> None:
    """A .git qmem-git did not make (a project's, or a worktree's .git file) would put the
    memory commits in that project's history."""
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    assert not is_foreign_repository(str(project))  # nothing yet but git: may become memory
    (project / "package.json").write_text("{}")
    with pytest.raises(UsageError, match="another project's git repository") as caught:
        check_memory_folder(str(project))
    assert caught.value.exit_code == 2 and "folder of its own" in caught.value.hint
    worktree = tmp_path / "worktree"
    worktree.mkdir()
    (worktree / ".git").write_text("gitdir: /elsewhere\n")
    assert is_foreign_repository(str(worktree))
    (project / ".git" / "info").mkdir(exist_ok=True)
    with open(project / ".git" / "info" / "exclude", "a") as handle:
        handle.write("*.qmem-tmp-*\n")  # what `qmem-git init` writes into its repositories
    assert not is_foreign_repository(str(project))
    by_hand = tmp_path / "by-hand"  # a memory folder someone versioned with plain git
    (by_hand / "user").mkdir(parents=True)
    (by_hand / "user" / "a.md").write_text("x")
    git = ["git", "-C", str(by_hand), "-c", "user.name=t", "-c", "user.email=t@e"]
    subprocess.run(["git", "init", "-q", str(by_hand)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    assert not is_foreign_repository(str(by_hand))
    (by_hand / "main.py").write_text("print()")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "code"], check=True)
    assert is_foreign_repository(str(by_hand))  # a project that tracks code


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


@pytest.mark.parametrize("name", ["cache", "hooks"])
def test_a_symlinked_state_subfolder_is_refused(tmp_path: Path, name: str) -> None:
    """A cloned project's .qwen/cache -> a published folder would publish what writers keep
    there (parsed memories among it)."""
    state = tmp_path / "state"
    (state / "memory").mkdir(parents=True)
    (tmp_path / "public").mkdir()
    (state / name).symlink_to(tmp_path / "public")
    with pytest.raises(UsageError, match=f"{name} is a symlink"):
        check_store(Layout(str(state / "memory"), str(state), "local", ""))
