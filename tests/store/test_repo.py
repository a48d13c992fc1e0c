"""store.repo against real repositories; every result is checked with C git."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from docorder import order_documents
from helpers_git import git_argv, gitdir, init_memory_git

from qmem_git.core.changes import ChangeSet
from qmem_git.core.paths import Layout
from qmem_git.errors import InvalidMemoryFile, RepoLocked, UnsafePath
from qmem_git.store import gitindex, repo, workdir
from qmem_git.store.repo import (
    HOOK_MARKER,
    Identity,
    Repository,
    apply_changeset,
    identity_from_git_config,
    init_repo,
)
from qmem_git.store.workdir import render_index

IDENTITY = Identity("Test Writer", "writer@example.com")
NOW = datetime(2026, 4, 1, 8, 0, 0, tzinfo=timezone.utc)


def doc(name: str, kind: str = "user", body: str = "") -> str:
    return f"---\nname: {name}\ndescription: about {name}\ntype: {kind}\n---\n\n{body or name}\n"


def git(root: str | Path, *args: str, check: bool = True) -> str:
    done = subprocess.run(
        [*git_argv(str(root)), *args], capture_output=True, text=True, check=False
    )
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stderr}")
    return done.stdout


def apply(layout: Layout, now: datetime = NOW, **kwargs: object) -> repo.ApplyResult:
    cs = ChangeSet(op=str(kwargs.pop("op", "remember")), subject="test change", **kwargs)  # type: ignore[arg-type]
    return apply_changeset(layout, cs, identity=IDENTITY, host="test-host", now=now)


def assert_clean(root: str) -> None:
    assert git(root, "status", "--porcelain") == ""
    git(root, "fsck", "--strict")
    assert git(root, "diff-index", "--cached", "HEAD") == ""


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    state = tmp_path / "state"
    lay = Layout(str(state / "memory"), str(state), "explicit", "")
    init_repo(lay, "true")
    return lay


def test_init_creates_main_branch_with_settings(tmp_path: Path) -> None:
    lay = Layout(str(tmp_path / "s" / "memory"), str(tmp_path / "s"), "explicit", "")
    result = init_repo(lay, "true")
    root = lay.memory_root
    assert result.created and result.hook == "installed"
    assert git(root, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    assert git(root, "config", "gc.auto").strip() == "0"
    assert git(root, "config", "core.fsync").strip() == "committed"
    assert git(root, "config", "core.fsyncObjectFiles", check=False) == ""  # deprecated in git
    exclude = Path(gitdir(root), "info", "exclude").read_text()
    assert "*.qmem-tmp-*" in exclude and "*.lock" in exclude
    assert git(root, "rev-list", "--all") == ""  # no commit until the first operation


def test_init_is_idempotent(layout: Layout) -> None:
    exclude = Path(layout.git_dir, "info", "exclude")
    before = exclude.read_text()
    again = init_repo(layout, "true")
    assert not again.created and again.hook == "unchanged"
    assert again.excludes_added == () and not again.config_changed
    assert exclude.read_text() == before


def test_foreign_hook_is_kept_and_run_first(tmp_path: Path) -> None:
    root = tmp_path / "s" / "memory"
    init_memory_git(root)
    hook = gitdir(root) / "hooks" / "pre-commit"
    hook.write_text('#!/bin/sh\necho foreign >> "$(git rev-parse --show-toplevel)/../ran"\n')
    hook.chmod(0o755)
    lay = Layout(str(root), str(root.parent), "explicit", "")
    command = 'echo ours >> "$(git rev-parse --show-toplevel)/../ran"'
    assert init_repo(lay, command).hook == "chained"
    assert init_repo(lay, command).hook == "unchanged"
    hooks = sorted(p.name for p in hook.parent.glob("pre-commit*") if "sample" not in p.name)
    assert hooks == ["pre-commit", "pre-commit.local"]
    assert HOOK_MARKER in hook.read_text()
    (root / "x.md").write_text(doc("x"))
    git(root, "add", "x.md")
    git(root, "commit", "-q", "-m", "by hand")
    assert (root.parent / "ran").read_text().split() == ["foreign", "ours"]


def test_init_updates_our_hook_when_the_command_changes(layout: Layout) -> None:
    assert init_repo(layout, "echo new").hook == "updated"
    hook = Path(layout.git_dir, "hooks", "pre-commit").read_text()
    assert hook.rstrip().endswith("echo new")
    assert not Path(layout.git_dir, "hooks", "pre-commit.local").exists()


def test_local_mode_excludes_memory_in_the_project(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    git(project, "init", "-q", "-b", "main")
    lay = Layout(str(project / ".qwen" / "memory"), str(project / ".qwen"), "local", str(project))
    first = init_repo(lay, "true")
    assert ".qwen/memory/" in first.project_excludes_added
    assert init_repo(lay, "true").project_excludes_added == ()
    (project / ".qwen" / "meta.json").write_text("{}\n")
    apply(lay, writes={"user/a.md": doc("a")})
    assert git(project, "status", "--porcelain") == ""
    lines = (project / ".git" / "info" / "exclude").read_text().splitlines()
    assert len(lines) == len(set(lines))
    assert ".qwen/cache/" in lines and ".qwen/telemetry.jsonl" in lines


def test_local_mode_without_project_repo_is_fine(tmp_path: Path) -> None:
    project = tmp_path / "plain"
    lay = Layout(str(project / ".qwen" / "memory"), str(project / ".qwen"), "local", str(project))
    assert init_repo(lay, "true").project_excludes_added == ()


def test_apply_makes_one_commit_with_trailers(layout: Layout) -> None:
    root = layout.memory_root
    result = apply(
        layout, writes={"user/a.md": doc("a"), "project/deep/er/b.md": doc("b", "project")}
    )
    assert result.commit == git(root, "rev-parse", "HEAD").strip()
    assert git(root, "rev-list", "--count", "HEAD").strip() == "1"
    assert git(root, "rev-list", "--parents", "-n1", "HEAD").split() == [result.commit]
    message = git(root, "log", "-1", "--format=%B")
    assert "Qmem-Op: remember" in message and "Qmem-Host: test-host" in message
    assert "A project/deep/er/b.md" in message and "A MEMORY.md" in message
    assert [(c.status, c.path) for c in result.changes] == [
        ("A", "MEMORY.md"),
        ("A", "project/deep/er/b.md"),
        ("A", "user/a.md"),
    ]
    assert git(root, "show", "HEAD:user/a.md") == doc("a")
    assert git(root, "log", "-1", "--format=%an <%ae> %ct").strip() == (
        f"Test Writer <writer@example.com> {int(NOW.timestamp())}"
    )
    assert_clean(root)


def test_files_and_index_get_the_commit_time(layout: Layout) -> None:
    root = layout.memory_root
    apply(layout, writes={"user/old.md": doc("old")})
    later = NOW + timedelta(hours=1)
    apply(layout, now=later, writes={"user/new.md": doc("new")})
    assert os.stat(os.path.join(root, "user/old.md")).st_mtime == NOW.timestamp()
    assert os.stat(os.path.join(root, "user/new.md")).st_mtime == later.timestamp()
    assert os.stat(os.path.join(root, "MEMORY.md")).st_mtime == later.timestamp()
    index = Path(root, "MEMORY.md").read_text()
    assert index == render_index(root).text
    assert index.splitlines()[0].startswith("- [new]")
    assert_clean(root)


def test_nothing_changed_means_no_commit(layout: Layout) -> None:
    root = layout.memory_root
    first = apply(layout, writes={"user/a.md": doc("a")})
    again = apply(layout, now=NOW + timedelta(hours=1), writes={"user/a.md": doc("a")})
    assert again.commit is None and again.changes == []
    assert git(root, "rev-parse", "HEAD").strip() == first.commit
    assert os.stat(os.path.join(root, "user/a.md")).st_mtime == NOW.timestamp()
    assert apply(layout, deletes=("user/missing.md",)).commit is None
    assert_clean(root)


def test_delete_prunes_folders_and_tree(layout: Layout) -> None:
    root = layout.memory_root
    apply(layout, writes={"project/a/b/c.md": doc("c", "project"), "user/u.md": doc("u")})
    result = apply(layout, op="forget", deletes=("project/a/b/c.md",))
    assert ("D", "project/a/b/c.md") in [(c.status, c.path) for c in result.changes]
    assert not os.path.exists(os.path.join(root, "project"))
    assert "project" not in git(root, "ls-tree", "--name-only", "HEAD")
    assert "D project/a/b/c.md" in git(root, "log", "-1", "--format=%B")
    assert_clean(root)


def test_modify_existing_file(layout: Layout) -> None:
    root = layout.memory_root
    apply(layout, writes={"user/a.md": doc("a")})
    result = apply(layout, writes={"user/a.md": doc("a", body="changed")})
    assert [(c.status, c.path) for c in result.changes] == [("M", "user/a.md")]
    assert "changed" in git(root, "show", "HEAD:user/a.md")
    assert_clean(root)


def test_ref_moved_underneath_is_retried(layout: Layout, monkeypatch: pytest.MonkeyPatch) -> None:
    root = layout.memory_root
    apply(layout, writes={"user/a.md": doc("a")})
    original = Repository.move_branch
    calls: list[str] = []

    def racing(self: Repository, branch: bytes, old: str | None, new: str, msg: str) -> bool:
        if not calls:  # another program commits between our read and our swap
            Path(root, "user", "other.md").write_text(doc("other"))
            git(root, "add", "user/other.md")
            git(root, "commit", "-q", "--no-verify", "-m", "external")
        calls.append(new)
        return original(self, branch, old, new, msg)  # type: ignore[arg-type]

    monkeypatch.setattr(Repository, "move_branch", racing)
    result = apply(layout, writes={"user/b.md": doc("b")})
    assert len(calls) == 2 and result.commit == calls[-1]
    assert git(root, "log", "--format=%s", "-3").splitlines()[:2] == [
        "remember: test change",
        "external",
    ]
    assert set(git(root, "ls-tree", "-r", "--name-only", "HEAD").split()) >= {
        "user/a.md",
        "user/b.md",
        "user/other.md",
    }


@pytest.mark.parametrize(
    "bad", ["../x.md", "/abs.md", "a/../b.md", ".git/x.md", "MEMORY.md", "x.txt", "user/a\nb.md"]
)
def test_unsafe_paths_are_refused(layout: Layout, bad: str) -> None:
    with pytest.raises(UnsafePath):
        apply(layout, writes={bad: doc("x")})
    assert git(layout.memory_root, "rev-list", "--all") == ""


def test_apply_reads_packed_objects(layout: Layout) -> None:
    root = layout.memory_root
    apply(layout, writes={"user/a.md": doc("a"), "project/p.md": doc("p", "project")})
    git(root, "gc", "-q", "--prune=now")
    assert not [p for p in Path(gitdir(root), "objects").glob("??/*")]
    apply(layout, writes={"user/b.md": doc("b")})
    assert git(root, "show", "HEAD:project/p.md") == doc("p", "project")
    assert_clean(root)


def test_index_entries_match_c_git(layout: Layout) -> None:
    root = layout.memory_root
    apply(layout, writes={f"user/m{i}.md": doc(f"m{i}") for i in range(20)})
    apply(layout, writes={"user/m3.md": doc("m3", body="v2")}, deletes=("user/m4.md",))
    ours = git(root, "ls-files", "-s")
    git(root, "read-tree", "HEAD")  # C git's own index for HEAD
    assert git(root, "ls-files", "-s") == ours
    index = gitindex.read_index(str(gitdir(root)))
    assert "user/m4.md" not in index.paths() and len(index.paths()) == 20


def test_identity_from_git_config(isolated_home: Path) -> None:
    assert identity_from_git_config("box") == Identity("qmem-git", "qmem-git@box")
    Path(os.environ["GIT_CONFIG_GLOBAL"]).write_text(
        "[user]\n\tname = Ada Lovelace\n\temail = ada@example.com\n"
    )
    assert identity_from_git_config("box") == Identity("Ada Lovelace", "ada@example.com")


def test_identity_signature_drops_forbidden_characters() -> None:
    sig = Identity("Bad <Name>\n", "e<v>il@x").signature(10, "+0000")
    assert sig == "Bad Name <evil@x> 10 +0000"


def test_index_dropped_lists_what_memory_md_left_out(layout: Layout) -> None:
    long = "x" * 140  # 200 lines of ~150 bytes exceed the 25,000-byte limit (spec §6)
    writes = {f"user/b/m{i:03d}.md": doc(f"m{i:03d}").replace("about", long) for i in range(200)}
    result = apply(layout, writes=writes)
    assert 0 < len(result.index_dropped) < 200
    assert (
        Path(layout.memory_root, "MEMORY.md").read_text() == render_index(layout.memory_root).text
    )


def test_git_prints_no_config_warning(layout: Layout) -> None:
    """core.fsyncObjectFiles makes C git >= 2.36 warn on every command; core.fsync does not."""
    apply(layout, writes={"user/a.md": doc("a")})
    for args in (["status"], ["log", "-1"], ["fsck", "--strict"]):
        done = subprocess.run(
            [*git_argv(layout.memory_root), *args], capture_output=True, text=True, check=True
        )
        assert done.stderr == "", args


def test_init_drops_the_deprecated_fsync_setting(tmp_path: Path) -> None:
    root = tmp_path / "s" / "memory"
    init_memory_git(root)
    git(root, "config", "core.fsyncObjectFiles", "true")  # what earlier versions set
    lay = Layout(str(root), str(root.parent), "explicit", "")
    assert init_repo(lay, "true").config_changed
    assert git(root, "config", "core.fsyncObjectFiles", check=False) == ""
    assert git(root, "config", "core.fsync").strip() == "committed"
    done = subprocess.run([*git_argv(str(root)), "status"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == ""


def test_objects_and_their_folders_are_fsynced_before_the_ref_moves(
    layout: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = layout.memory_root
    apply(layout, writes={"user/a.md": doc("a")})
    events: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        events.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    original = Repository.move_branch

    def moving(self: Repository, branch: bytes, old: str | None, new: str, msg: str) -> bool:
        moved = original(self, branch, old, new, msg)  # type: ignore[arg-type]
        events.append("REF " + new)
        return moved

    monkeypatch.setattr(os, "fsync", recording_fsync)
    monkeypatch.setattr(Repository, "move_branch", moving)
    result = apply(layout, writes={"user/new/b.md": doc("b")})
    assert result.commit
    ref_at = events.index("REF " + result.commit)
    objects = os.path.join(gitdir(root), "objects")
    new = [result.commit, git(root, "rev-parse", "HEAD^{tree}").strip()]
    new += [git(root, "rev-parse", f"HEAD:{p}").strip() for p in ("user", "user/new/b.md")]
    for sha in new:
        # dulwich's GitFile fsyncs "<object>.lock" and then renames it to "<object>"
        assert os.path.join(objects, sha[:2], sha[2:] + ".lock") in events[:ref_at], sha
        assert os.path.join(objects, sha[:2]) in events[:ref_at], sha


def test_locked_branch_is_repo_locked_not_an_internal_error(layout: Layout) -> None:
    apply(layout, writes={"user/a.md": doc("a")})
    Path(layout.git_dir, "refs", "heads", "main.lock").write_text("")
    with pytest.raises(RepoLocked, match="refs/heads/main"):
        apply(layout, writes={"user/b.md": doc("b")})


def test_stale_lock_of_an_object_we_write_is_removed(layout: Layout) -> None:
    text = doc("b")
    sha = repo.blob_id(text.encode())
    lock = Path(layout.git_dir, "objects", sha[:2], sha[2:] + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")
    with pytest.raises(RepoLocked, match=sha):  # young: a live git process may own it
        apply(layout, writes={"user/b.md": text})
    os.utime(lock, (time.time() - 60, time.time() - 60))
    result = apply(layout, writes={"user/b.md": text})
    assert result.commit and not lock.exists()
    assert git(layout.memory_root, "show", "HEAD:user/b.md") == text
    assert_clean(layout.memory_root)


def test_blob_id_matches_c_git(tmp_path: Path) -> None:
    path = tmp_path / "x"
    path.write_bytes(b"hello\n\x00binary")
    assert repo.blob_id(path.read_bytes()) == git(tmp_path, "hash-object", str(path)).strip()


def test_a_rewritten_file_is_parsed_again_within_a_shared_scan(tmp_path: Path) -> None:
    root = str(tmp_path)
    path = tmp_path / "user" / "a.md"
    path.parent.mkdir()
    path.write_text(doc("a", body="one"))
    st = path.stat()
    files = {"user/a.md": (st.st_mtime_ns, st.st_size)}
    with workdir.shared_scan(root, files):
        assert workdir.scan_documents(root)[0].body.strip() == "one"
        workdir.atomic_write(str(path), doc("a", body="two").encode(), st.st_mtime_ns)
        assert workdir.scan_documents(root)[0].body.strip() == "two"  # same mtime and size
    assert workdir._shared == []


def full_sort_scan(root: str, limit: int) -> list[object]:
    """scan_documents as it was: sort every file, parse in order until ``limit`` parse."""
    files = sorted(
        workdir.iter_memory_files(root),
        key=lambda f: (-(f.mtime_ns / 1_000_000), f.filename, f.relative_path),
    )
    docs = []
    for info in files:
        parsed = workdir.load_document(info)
        if parsed is not None:
            docs.append(parsed)
            if len(docs) >= limit:
                break
    return list(order_documents(docs, limit))


def test_partial_sort_scan_equals_a_full_sort(tmp_path: Path) -> None:
    """Only the newest 2 * limit files are sorted; ties in float ms must not change the order."""
    base = 1_775_000_000_000_000_000
    for i in range(500):
        path = tmp_path / "user" / f"b{i % 7}" / f"m{i:03d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(doc(f"m{i:03d}") if i % 5 else "not a memory")  # 100 do not parse
        mtime = base + (i // 40) * 1_000_000_000 + (i % 3) * 100  # same ms, different ns
        os.utime(path, ns=(mtime, mtime))
    root = str(tmp_path)
    stats = {f.relative_path: (f.mtime_ns, f.size) for f in workdir.iter_memory_files(root)}
    for limit in (20, 200, 450):  # 450: fewer than limit parse among the newest 2 * limit
        expected = full_sort_scan(root, limit)
        assert workdir.scan_documents(root, limit=limit) == expected
        assert workdir.scan_documents(root, limit=limit, stats=stats) == expected


def test_write_commit_takes_any_number_of_parents(layout: Layout) -> None:
    first = apply(layout, writes={"user/a.md": doc("a")}).commit
    second = apply(layout, writes={"user/b.md": doc("b")}).commit
    assert first and second
    with Repository(layout.memory_root) as rp:
        tree = rp.tree_of(second)
        assert tree is not None
        root = rp.write_commit(tree, [], IDENTITY, NOW, "root\n")
        merge = rp.write_commit(tree, [second, first], IDENTITY, NOW, "merge\n")
    assert git(layout.memory_root, "rev-list", "--parents", "-n1", root).split() == [root]
    parents = git(layout.memory_root, "rev-list", "--parents", "-n1", merge).split()
    assert parents == [merge, second, first]
    git(layout.memory_root, "fsck", "--strict")


def test_update_index_refreshes_touched_entries_and_head(layout: Layout) -> None:
    commit = apply(layout, writes={"user/a.md": doc("a")}).commit
    assert commit
    path = Path(layout.memory_root, "user", "a.md")
    os.utime(path, ns=(1, 1))  # stat differs from the index entry now
    with Repository(layout.memory_root) as rp:
        sha = rp.lookup(rp.tree_of(commit), "user/a.md")
        assert sha is not None
        assert repo.update_index(rp, {"user/a.md": sha}, commit)
    entry = gitindex.read_index(layout.git_dir).get("user/a.md")
    assert entry is not None and entry.mtime_ns == 1
    assert_clean(layout.memory_root)


def test_a_file_rewritten_after_it_was_read_is_read_again_by_the_next_snapshot(
    layout: Layout,
) -> None:
    """The agent rewrote the file (same size) between a writer's read and its git-index
    refresh: the entry must not pair the new stat with the old blob, or the next snapshot
    would take the new bytes as committed and leave them out."""
    commit = apply(layout, writes={"user/a.md": doc("a")}).commit
    assert commit
    path = Path(layout.memory_root, "user", "a.md")
    with Repository(layout.memory_root) as rp:
        stale = rp.lookup(rp.tree_of(commit), "user/a.md")
        assert stale is not None
        state = repo.WorkState(since_ns=time.time_ns())
        path.write_text(doc("b"))  # same length as doc("a")
        assert repo.update_index(rp, {"user/a.md": stale}, commit, state)
    entry = gitindex.read_index(layout.git_dir).get("user/a.md")
    assert entry is not None and entry.mtime_ns == 0
    done = subprocess.run(
        [sys.executable, "-m", "qmem_git", "--memory-dir", layout.memory_root, "snapshot"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "QMEM_QUIET_SECONDS": "0"},
    )
    assert done.returncode == 0, done.stderr
    shown = subprocess.run(
        [*git_argv(layout.memory_root), "show", "HEAD:user/a.md"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout == doc("b")
    assert_clean(layout.memory_root)


def test_update_index_reports_a_vanished_file_instead_of_raising(layout: Layout) -> None:
    commit = apply(layout, writes={"user/a.md": doc("a")}).commit
    assert commit
    with Repository(layout.memory_root) as rp:
        assert not repo.update_index(rp, {"user/gone.md": "0" * 40}, commit)


def test_shared_file_helpers(tmp_path: Path) -> None:
    target = tmp_path / "f.md"
    assert not repo.same_content(str(target), b"x")  # missing
    target.write_bytes(b"x")
    assert repo.same_content(str(target), b"x")
    assert not repo.same_content(str(target), b"y")
    assert repo.free_name(str(tmp_path / "g")) == str(tmp_path / "g")
    assert repo.free_name(str(target)) == f"{target}.1"
    Path(f"{target}.1").write_bytes(b"")
    assert repo.free_name(str(target)) == f"{target}.2"
    deep = tmp_path / "a" / "b" / "c.md"
    deep.parent.mkdir(parents=True)
    (tmp_path / "a" / "keep.md").write_bytes(b"")
    repo.prune_dirs(str(tmp_path), "a/b/c.md")
    assert not (tmp_path / "a" / "b").exists() and (tmp_path / "a").is_dir()


def test_build_tree_without_changes_is_the_base_tree(layout: Layout) -> None:
    apply(layout, writes={"user/a.md": doc("a")})
    base = git(layout.memory_root, "rev-parse", "HEAD^{tree}").strip()
    with Repository(layout.memory_root) as store:
        assert store.build_tree(base, {}) == base
        assert store.build_tree(None, {}) == "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # empty


@pytest.mark.parametrize("order", ["file first", "folder first"])
def test_build_tree_swaps_a_folder_and_a_file_of_the_same_name(layout: Layout, order: str) -> None:
    """A file taking an emptied folder's name stays (and the reverse), whatever the order."""
    apply(layout, writes={"user/x.md/inner.md": doc("inner"), "user/a.md": doc("a")})
    base = git(layout.memory_root, "rev-parse", "HEAD^{tree}").strip()
    blob = git(layout.memory_root, "rev-parse", "HEAD:user/a.md").strip()
    changes: dict[str, str | None] = {"user/x.md": blob, "user/x.md/inner.md": None}
    if order == "folder first":
        changes = dict(reversed(list(changes.items())))
    with Repository(layout.memory_root) as store:
        to_file = store.build_tree(base, changes)
        back = store.build_tree(to_file, {"user/x.md": None, "user/x.md/inner.md": blob})
    listing = git(layout.memory_root, "ls-tree", "-r", to_file).split("\n")
    assert f"100644 blob {blob}\tuser/x.md" in listing
    assert not any("inner.md" in line for line in listing)
    names = git(layout.memory_root, "ls-tree", "-r", "--name-only", back).split()
    assert "user/x.md/inner.md" in names and "user/x.md" not in names
    git(layout.memory_root, "fsck", "--strict")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("---\nname: x\ndescription: x\ntype: user\n---\n\nnul \x00 byte\n", "NUL byte"),
        ("---\nname: x\ndescription: x\ntype: user\n---\n\n<<<<<<< HEAD\n", "conflict marker"),
        ("---\nname: x\ndescription: x\ntype: user\n---\n\nhalf \ud83d\n", "not valid UTF-8"),
        ("---\nname: x\ndescription: x\ntype: user\n---\n\n" + "x" * 300_000, "256 KiB"),
    ],
)
def test_a_file_validate_would_reject_is_never_written(
    layout: Layout, text: str, problem: str
) -> None:
    """Committed, it would make every other machine's sync refuse the history."""
    apply(layout, writes={"user/a.md": doc("a")})
    before = git(layout.memory_root, "rev-parse", "HEAD")
    with pytest.raises(InvalidMemoryFile, match=f"refusing to write user/bad.md: .*{problem}"):
        apply(layout, writes={"user/b.md": doc("b"), "user/bad.md": text})
    assert git(layout.memory_root, "rev-parse", "HEAD") == before
    assert not Path(layout.memory_root, "user", "b.md").exists()  # nothing, not even the good one
    assert git(layout.memory_root, "status", "--porcelain") == ""


def test_a_changeset_may_turn_a_folder_into_a_file_of_the_same_name(layout: Layout) -> None:
    """What undo does after a folder took a memory's name: deletes go first."""
    apply(layout, writes={"user/x.md/inner.md": doc("inner")})
    result = apply(layout, writes={"user/x.md": doc("x")}, deletes=["user/x.md/inner.md"])
    assert result.commit is not None
    assert Path(layout.memory_root, "user", "x.md").is_file()
    assert_clean(layout.memory_root)


def test_a_rewritten_memory_file_is_0644_whatever_it_was(layout: Layout) -> None:
    """git records 100644 for every memory file; an executable bit left on disk would make the
    index (which follows lstat) disagree with the tree."""
    root = Path(layout.memory_root)
    apply(layout, writes={"user/a.md": doc("a")})
    (root / "user" / "a.md").chmod(0o755)
    apply(layout, writes={"user/a.md": doc("a", body="changed")})
    assert (root / "user" / "a.md").stat().st_mode & 0o777 == 0o644
    assert_clean(layout.memory_root)


@pytest.mark.parametrize(
    ("existing", "new", "clash"),
    [
        (["user/Notes.md"], {"user/notes.md": "notes"}, "'user/notes.md' and 'user/Notes.md'"),
        (["user/Team/a.md"], {"user/team/b.md": "b"}, "'user/team/b.md' and 'user/Team'"),
        ([], {"user/Notes.md": "n", "user/notes.md": "n"}, "'user/notes.md' and 'user/Notes.md'"),
        ([], {"user/Team/a.md": "a", "user/team/b.md": "b"}, "'user/team' and 'user/Team'"),
        (["user/café.md"], {"user/cafe\u0301.md": "nfd"}, "are one path"),  # NFC vs NFD
    ],
)
def test_a_new_name_two_spellings_of_one_path_is_refused(
    layout: Layout, existing: list[str], new: dict[str, str], clash: str
) -> None:
    if existing:
        apply(layout, writes={rel: doc(rel.split("/")[-1]) for rel in existing})
    before = git(layout.memory_root, "rev-parse", "-q", "--verify", "HEAD", check=False)
    with pytest.raises(UnsafePath) as caught:
        apply(layout, writes={rel: doc(name) for rel, name in new.items()})
    assert clash in caught.value.message and "case-insensitive" in caught.value.message
    assert git(layout.memory_root, "rev-parse", "-q", "--verify", "HEAD", check=False) == before
    assert not any((Path(layout.memory_root) / rel).exists() for rel in new if rel not in existing)
    assert git(layout.memory_root, "status", "--porcelain") == ""


def test_renaming_by_case_in_one_changeset_is_allowed(layout: Layout) -> None:
    apply(layout, writes={"user/Notes.md": doc("notes"), "user/Team/a.md": doc("a")})
    apply(
        layout,
        writes={"user/notes.md": doc("notes"), "user/team/a.md": doc("a")},
        deletes=["user/Notes.md", "user/Team/a.md"],
    )
    files = git(layout.memory_root, "ls-files").split()
    assert "user/notes.md" in files and "user/team/a.md" in files
    assert "user/Notes.md" not in files and "user/Team/a.md" not in files


@pytest.mark.parametrize(
    "bad", ["/etc/x", "../x", "user/../../x", ".git/config", "a//b", "a\\b", ""]
)
def test_a_recover_delete_stays_inside_the_memory_folder(bad: str) -> None:
    with pytest.raises(UnsafePath):
        repo.check_memory_path(bad, writing=False)
    assert repo.check_memory_path("user/notes-link", writing=False) == "user/notes-link"


def test_tied_times_come_out_in_qwens_collation_order_without_a_second_sort(
    tmp_path: Path,
) -> None:
    """Documents are taken in scan order (ties broken by ``localeCompare``) and are not
    sorted again: the order equals ``order_documents`` of all of them."""
    mtime = 1_775_000_000_000_000_000
    names = ["B", "a", "É", "e", "_x", "Z10", "z2", "ä", "A", "b-1", "b_1"]
    for number, name in enumerate(names):
        path = tmp_path / ("user" if number % 2 else "project") / f"{name}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(doc(name))
        os.utime(path, ns=(mtime, mtime))
    root = str(tmp_path)
    every = [d for f in workdir.iter_memory_files(root) if (d := workdir.load_document(f))]
    assert workdir.scan_documents(root) == list(order_documents(every))
    assert workdir.scan_documents(root, limit=4) == list(order_documents(every, 4))
