"""store.loose: loose objects without dulwich's pack machinery, checked against C git."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from dulwich.objects import Blob, Tree
from helpers_git import git_argv, gitdir, init_memory_git

from qmem_git.errors import RepoCorrupt
from qmem_git.store import loose
from qmem_git.store.repo import Repository


def git(root: Path, *args: str, stdin: bytes = b"") -> str:
    done = subprocess.run([*git_argv(root), *args], input=stdin, capture_output=True, check=True)
    return done.stdout.decode()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return init_memory_git(tmp_path / "memory")


def objects(root: Path) -> str:
    return str(gitdir(root) / "objects")


def test_written_object_is_read_by_c_git(root: Path) -> None:
    blob = Blob.from_string(b"hello\n")
    sha = loose.write_loose(objects(root), blob)
    assert sha == git(root, "hash-object", "--stdin", stdin=b"hello\n").strip()
    assert git(root, "cat-file", "-p", sha) == "hello\n"
    path = Path(objects(root)) / sha[:2] / sha[2:]
    assert stat.S_IMODE(path.stat().st_mode) == loose.OBJECT_MODE
    assert not list(path.parent.glob("*.lock"))
    git(root, "fsck", "--strict")


def test_existing_object_is_refreshed_not_rewritten(root: Path) -> None:
    sha = git(root, "hash-object", "-w", "--stdin", stdin=b"kept\n").strip()
    path = Path(objects(root)) / sha[:2] / sha[2:]
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    inode = path.stat().st_ino
    assert loose.write_loose(objects(root), Blob.from_string(b"kept\n")) == sha
    assert path.stat().st_ino == inode  # same file
    assert path.stat().st_mtime_ns > 1_000_000_000  # a pruning gc would keep it


def test_read_checks_the_id(root: Path) -> None:
    one = git(root, "hash-object", "-w", "--stdin", stdin=b"one\n").strip()
    two = git(root, "hash-object", "-w", "--stdin", stdin=b"two\n").strip()
    found = loose.read_loose(objects(root), one, 1 << 20)
    assert isinstance(found, Blob) and found.data == b"one\n"
    path_one = Path(objects(root)) / one[:2] / one[2:]
    path_two = Path(objects(root)) / two[:2] / two[2:]
    path_one.chmod(0o644)
    path_one.write_bytes(path_two.read_bytes())  # one's file now holds two
    assert loose.read_loose(objects(root), one, 1 << 20) is None
    with Repository(str(root)) as repo, pytest.raises(RepoCorrupt, match=one):
        repo.read_blob(one)


def test_raw_reads_give_what_c_git_stored(root: Path) -> None:
    """``read_raw`` (zlib and hashlib alone) gives each type as ``git cat-file`` does."""
    (root / "a.md").write_text("raw\n")
    git(root, "add", "a.md")
    git(root, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "one")
    for name, type_num in (("HEAD", 1), ("HEAD^{tree}", 2), ("HEAD:a.md", 3)):
        sha = git(root, "rev-parse", name).strip()
        kind = git(root, "cat-file", "-t", sha).strip()
        content = subprocess.run(
            [*git_argv(root), "cat-file", kind, sha], capture_output=True, check=True
        ).stdout
        assert loose.read_raw(objects(root), sha, 1 << 20) == (type_num, content)
        assert loose.has_loose(objects(root), sha)
    assert not loose.has_loose(objects(root), "0" * 40)
    assert not loose.has_loose(objects(root), "../" * 13 + "a")


@pytest.mark.parametrize("sha", ["", "zz" * 20, "../" * 13 + "a", "a" * 39, "\u00e9" * 40])
def test_not_an_object_id_is_never_a_path(root: Path, sha: str) -> None:
    assert loose.object_path(objects(root), sha) is None
    assert loose.read_loose(objects(root), sha, 1 << 20) is None
    assert loose.read_raw(objects(root), sha, 1 << 20) is None


def test_missing_truncated_and_oversized_objects_are_left_to_the_full_store(root: Path) -> None:
    sha = git(root, "hash-object", "-w", "--stdin", stdin=b"x" * 5000).strip()
    assert loose.read_loose(objects(root), "0" * 40, 1 << 20) is None
    assert loose.read_loose(objects(root), sha, 100) is None  # over the size limit
    path = Path(objects(root)) / sha[:2] / sha[2:]
    path.chmod(0o644)
    path.write_bytes(path.read_bytes()[:10])
    assert loose.read_loose(objects(root), sha, 1 << 20) is None
    with Repository(str(root)) as repo, pytest.raises(RepoCorrupt, match="damaged"):
        repo.read_blob(sha)


def test_packed_objects_are_read_through_the_full_store(root: Path) -> None:
    (root / "a.md").write_text("packed\n")
    git(root, "add", "a.md")
    git(root, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "one")
    git(root, "repack", "-a", "-d", "-q")
    tree = git(root, "rev-parse", "HEAD^{tree}").strip()
    assert not (Path(objects(root)) / tree[:2] / tree[2:]).exists()
    with Repository(str(root)) as repo:
        assert isinstance(repo.load_tree(tree), Tree)
        assert repo.read_blob(repo.lookup(tree, "a.md") or "") == b"packed\n"
        assert repo.has_blob("packed\n")


def test_a_commit_on_loose_objects_never_imports_the_pack_machinery(root: Path) -> None:
    """The point of store.loose: a writer's commit costs no ``dulwich.object_store`` import."""
    script = f"""
import sys
from datetime import datetime, timezone
from qmem_git.store.repo import Identity, Repository
with Repository({str(root)!r}) as repo:
    blob = repo.add(__import__("dulwich.objects").objects.Blob.from_string(b"new\\n"))
    tree = repo.build_tree(None, {{"user/new.md": blob}})
    commit = repo.write_commit(tree, [], Identity("t", "t@e"), datetime.now(timezone.utc), "x")
    branch, _ = repo.head()
    assert repo.move_branch(branch, None, commit, "x")
    assert repo.tree_of(commit) == tree and repo.lookup(tree, "user/new.md") == blob
print("dulwich.object_store" in sys.modules)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "False"
    assert git(root, "show", "HEAD:user/new.md") == "new\n"
    git(root, "fsck", "--strict")


def test_what_is_no_regular_file_at_an_object_path_is_left_to_the_full_store(root: Path) -> None:
    """A FIFO where a packed object's loose file would be must not hang the read (dulwich's
    store reads packs first): the pack answers."""
    (root / "a.md").write_text("packed\n")
    git(root, "add", "a.md")
    git(root, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "one")
    git(root, "repack", "-a", "-d", "-q")
    commit = git(root, "rev-parse", "HEAD").strip()
    fan = Path(objects(root)) / commit[:2]
    fan.mkdir(exist_ok=True)
    os.mkfifo(fan / commit[2:])
    script = (
        "import sys\n"
        "from qmem_git.store.repo import Repository\n"
        f"with Repository({str(root)!r}) as repo:\n"
        f"    print(repo.tree_of({commit!r}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30, check=True
    )
    assert done.stdout.strip() == git(root, "rev-parse", "HEAD^{tree}").strip()


def test_a_damaged_loose_blob_is_not_taken_for_history(root: Path) -> None:
    """``has_blob`` (a text already committed once) must not trust an empty file at its id."""
    text = "a\n<<<<<<< HEAD\n"
    sha = git(root, "hash-object", "--stdin", stdin=text.encode()).strip()
    fan = Path(objects(root)) / sha[:2]
    fan.mkdir(parents=True, exist_ok=True)
    (fan / sha[2:]).write_bytes(b"")
    with Repository(str(root)) as repo:
        try:
            assert not repo.has_blob(text)
        except Exception as exc:  # dulwich names the damage; never a yes
            assert "empty" in type(exc).__name__.lower() or "corrupt" in str(exc).lower()


def test_a_fan_out_folder_that_is_a_file_is_reported_as_damage(root: Path) -> None:
    blob = Blob.from_string(b"new\n")
    (Path(objects(root)) / blob.id.decode()[:2]).write_text("not a folder")
    with Repository(str(root)) as repo, pytest.raises(RepoCorrupt, match="cannot be stored"):
        repo.add(blob)
