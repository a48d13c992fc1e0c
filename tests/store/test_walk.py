"""store.walk: which folders are memory folders at all."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from qmem_git.core.paths import Layout
from qmem_git.errors import QmemError, UsageError
from qmem_git.store.walk import (
    agent_entries,
    agent_listing,
    check_memory_folder,
    check_store,
    is_foreign_repository,
)


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


def _files(root: Path, rels: list[str], mtime: int = 1_700_000_000) -> None:
    for rel in rels:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
        os.utime(path, (mtime, mtime))


def test_agent_listing_takes_every_md_qwen_lists_dot_folders_and_git_included(
    tmp_path: Path,
) -> None:
    """Qwen Code 0.24.4 lists with fs.readdir(recursive) and keeps names ending in ".md" but
    MEMORY.md: an agent's .git/ and .notes/ are memories to it, upper-case .MD is not."""
    _files(tmp_path, [
        "top.md", ".dot.md", ".md", ".notes/n.md", ".git/hooks/pre-commit.md", ".git/HEAD",
        "a/b/deep.md", "a/MEMORY.md", "MEMORY.md", "memory.md", "UP.MD", "MEMORY.MD",
        "x.md.txt", "logs/run.log",
    ])  # fmt: skip
    listed = [rel for rel, _ in agent_listing(str(tmp_path))]
    assert listed == [
        ".dot.md", ".git/hooks/pre-commit.md", ".md", ".notes/n.md", "a/b/deep.md",
        "memory.md", "top.md",
    ]  # fmt: skip
    assert agent_listing(str(tmp_path / "missing")) == []


def test_agent_listing_follows_symlinks_with_the_targets_stat(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    _files(root, ["top.md", "sub/s.md"], mtime=1_700_000_001)
    _files(outside, ["out.md", "dir/in-dir.md"], mtime=1_700_000_002)
    for name, target in [
        ("link-in.md", "top.md"),
        ("link-out.md", str(outside / "out.md")),
        ("dangling.md", "nowhere.md"),
        ("dirlink", str(outside / "dir")),
        ("sublink.md", "sub"),
    ]:
        (root / name).symlink_to(target)
        os.utime(root / name, (1_800_000_000, 1_800_000_000), follow_symlinks=False)
    entries = dict(agent_entries(str(root)))
    assert entries["dangling.md"] is None
    sublink = entries["sublink.md"]
    assert sublink is not None and stat.S_ISDIR(sublink.st_mode)  # listed, never a memory
    listed = agent_listing(str(root))
    assert [rel for rel, _ in listed] == [
        "dirlink/in-dir.md", "link-in.md", "link-out.md", "sub/s.md", "sublink.md/s.md", "top.md",
    ]  # fmt: skip
    mtimes = {rel: info.st_mtime for rel, info in listed}
    assert mtimes["link-in.md"] == 1_700_000_001  # stat, not lstat: the target's mtime
    assert mtimes["link-out.md"] == mtimes["dirlink/in-dir.md"] == 1_700_000_002


def test_agent_listing_never_opens_a_file(tmp_path: Path) -> None:
    """A FIFO would block a read (Qwen's does, for ever); an unreadable file is still listed
    (Qwen drops it when its read fails); a folder named x.md is listed, not a memory."""
    _files(tmp_path, ["x.md/inner.md", "locked.md"])
    os.mkfifo(tmp_path / "fifo.md")
    (tmp_path / "locked.md").chmod(0)
    entries = dict(agent_entries(str(tmp_path)))
    fifo, folder = entries["fifo.md"], entries["x.md"]
    assert fifo is not None and stat.S_ISFIFO(fifo.st_mode)
    assert folder is not None and stat.S_ISDIR(folder.st_mode)
    assert [rel for rel, _ in agent_listing(str(tmp_path))] == ["locked.md", "x.md/inner.md"]


def test_a_symlink_loop_ends_where_the_kernel_stops_resolving(tmp_path: Path) -> None:
    """node stats each entry through the links: sub/loop -> . repeats until ELOOP; two loops
    in one folder would make 2**40 entries, so a cap refuses them."""
    _files(tmp_path, ["sub/s.md"])
    (tmp_path / "sub" / "loop").symlink_to(".")
    listed = [rel for rel, _ in agent_listing(str(tmp_path))]
    assert listed[-1] == "sub/s.md" and 30 < len(listed) <= 41
    assert all(
        rel == "sub/" + "loop/" * depth + "s.md" for depth, rel in enumerate(reversed(listed))
    )
    (tmp_path / "sub" / "loop2").symlink_to(".")
    with pytest.raises(QmemError, match="more than 5000 entries"):
        agent_entries(str(tmp_path), max_entries=5000)


def test_agent_listing_sorts_as_javascript_and_skips_names_that_are_not_utf8(
    tmp_path: Path,
) -> None:
    """Array.prototype.sort compares UTF-16 code units: an emoji (a surrogate pair) sorts
    before a full-width sign that Python's code-point order puts first."""
    _files(tmp_path, ["\uff04.md", "\U0001f600.md", "a.md"])
    (tmp_path / "sub").mkdir()
    with open(os.path.join(os.fsencode(tmp_path), b"sub", b"\xff.md"), "w") as handle:
        handle.write("x")
    assert [rel for rel, _ in agent_listing(str(tmp_path))] == [
        "a.md",
        "\U0001f600.md",
        "\uff04.md",
    ]


def test_folders_past_the_longest_path_are_not_descended(tmp_path: Path) -> None:
    """node's stat of a path over PATH_MAX fails, so it never lists below it: neither does
    agent_listing (no error either)."""
    root = tmp_path / "deep"
    root.mkdir()
    fd = os.open(root, os.O_RDONLY)
    for depth in range(20):
        os.close(os.open("m.md", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
        name = f"{depth:02d}" + "x" * 240
        os.mkdir(name, dir_fd=fd)
        fd, parent = os.open(name, os.O_RDONLY, dir_fd=fd), fd
        os.close(parent)
    os.close(fd)
    try:
        listed = [rel for rel, _ in agent_listing(str(root))]
    finally:
        shutil.rmtree(root)  # by file descriptor: pytest's own clean-up cannot reach that deep
    assert 5 < len(listed) < 20
    assert all(len(str(root)) + len(rel) < 4096 for rel in listed)


def test_a_root_that_is_not_a_folder_raises_as_qwens_rebuild_does(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        agent_entries(str(tmp_path / "file"))
