"""store.recovery: what an interrupted or foreign writer leaves behind, checked with C git."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from helpers_git import git_argv, gitdir

from qmem_git.core.changes import ChangeSet
from qmem_git.core.holdback import hold_reason
from qmem_git.core.paths import Layout
from qmem_git.errors import RepoCorrupt, UnsafePath
from qmem_git.store import gitindex
from qmem_git.store.recovery import recover, recover_for_write
from qmem_git.store.repo import Identity, apply_changeset, init_repo
from qmem_git.store.workdir import render_index
from qmem_git.store.writer import run_writer

IDENTITY = Identity("Test Writer", "writer@example.com")
NOW = datetime(2026, 4, 1, 8, 0, 0, tzinfo=timezone.utc)
LATER = NOW + timedelta(hours=1)


def doc(name: str, kind: str = "user", body: str = "") -> str:
    return f"---\nname: {name}\ndescription: about {name}\ntype: {kind}\n---\n\n{body or name}\n"


def git(root: str | Path, *args: str) -> str:
    done = subprocess.run([*git_argv(str(root)), *args], capture_output=True, text=True)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout


def run_recover(layout: Layout, now: datetime = LATER):  # type: ignore[no-untyped-def]
    return recover(layout, identity=IDENTITY, host="test-host", now=now)


def assert_clean(root: str) -> None:
    assert git(root, "status", "--porcelain") == ""
    git(root, "fsck", "--strict")
    assert Path(root, "MEMORY.md").read_text() == render_index(root).text


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    state = tmp_path / "state"
    lay = Layout(str(state / "memory"), str(state), "explicit", "")
    init_repo(lay, "true")
    cs = ChangeSet(
        op="remember",
        subject="seed",
        writes={"user/a.md": doc("a"), "user/b.md": doc("b"), "project/p.md": doc("p", "project")},
    )
    apply_changeset(lay, cs, identity=IDENTITY, host="test-host", now=NOW)
    return lay


def test_clean_repo_needs_nothing(layout: Layout) -> None:
    head = git(layout.memory_root, "rev-parse", "HEAD")
    report = run_recover(layout)
    assert report.commit is None and not report.acted
    assert git(layout.memory_root, "rev-parse", "HEAD") == head


def test_uncommitted_changes_become_one_recover_commit(layout: Layout) -> None:
    root = Path(layout.memory_root)
    (root / "user" / "a.md").write_text(doc("a", body="edited"))
    (root / "feedback").mkdir()
    (root / "feedback" / "new.md").write_text(doc("new", "feedback"))
    (root / "project" / "p.md").unlink()
    report = run_recover(layout)
    assert report.commit == git(root, "rev-parse", "HEAD").strip()
    assert {(c.status, c.path) for c in report.changes} == {
        ("M", "user/a.md"),
        ("A", "feedback/new.md"),
        ("D", "project/p.md"),
        ("M", "MEMORY.md"),
    }
    message = git(root, "log", "-1", "--format=%B")
    assert "Qmem-Op: recover" in message and "Qmem-Added: 1" in message
    assert "Qmem-Topics: feedback,project,user" in message
    assert "edited" in git(root, "show", "HEAD:user/a.md")
    assert_clean(str(root))
    assert run_recover(layout).commit is None


def assert_sound(root: str) -> None:
    """fsck passes and MEMORY.md is what the files on disk give (held-back ones included)."""
    git(root, "fsck", "--strict")
    assert Path(root, "MEMORY.md").read_text() == render_index(root).text


def test_unsafe_files_are_held_back_in_place_and_the_rest_committed(layout: Layout) -> None:
    root = Path(layout.memory_root)
    (root / "user" / "junk.md").write_text("no frontmatter here")  # the agent's file: kept
    big = doc("big", body="x" * 300_000)
    (root / "user" / "big.md").write_text(big)
    (root / "user" / "b.md").write_bytes(b"\xff\xfe broken")  # a tracked file got damaged
    report = run_recover(layout)
    assert report.commit is not None
    held = dict(report.held)
    assert sorted(held) == ["user/b.md", "user/big.md"]
    assert held["user/b.md"].startswith("utf8:") and held["user/big.md"].startswith("size-limit:")
    assert (root / "user" / "b.md").read_bytes() == b"\xff\xfe broken"  # never moved
    assert (root / "user" / "big.md").read_text() == big
    assert git(root, "show", "HEAD:user/b.md") == doc("b")  # HEAD's version kept
    assert "user/junk.md" in git(root, "ls-tree", "-r", "--name-only", "HEAD").split()
    message = git(root, "log", "-1", "--format=%B")
    assert "held back user/b.md: utf8:" in message and "Qmem-Held: 2" in message
    assert not Path(layout.state_dir, "quarantine").exists()
    assert_sound(str(root))


HOSTILE = {
    "user/tag.md": '---\nname: !!python/object/apply:os.system ["id"]\ndescription: x\n'
    "type: user\n---\n\nTagged body\n",
    "user/bad.md": "---\nname: a\nname: b\ndescription: x\ntype: user\n---\n\nTwo names\n",
    "misc/m.md": doc("misc"),
    "user/.hidden.md": doc("hidden"),
    "user/con.md": doc("device"),
    "user/key.md": doc("key", body="token ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"),
}


def test_only_safety_holds_a_file_back_style_never_does(layout: Layout) -> None:
    """A YAML tag, a duplicate key, a dot-file or a folder of any name is the agent's business
    (Qwen Code reads them all); a device name or a credential is held back, where it is."""
    root = Path(layout.memory_root)
    for rel, text in HOSTILE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "user" / "fine.md").write_text(doc("fine"))
    report = run_recover(layout)
    assert sorted(git(root, "show", "--name-only", "--format=", "HEAD").split()) == [
        "MEMORY.md",
        "misc/m.md",
        "user/.hidden.md",
        "user/bad.md",
        "user/fine.md",
        "user/tag.md",
    ]
    held = dict(report.held)
    assert sorted(held) == ["user/con.md", "user/key.md"]
    assert {why.split(":", 1)[0] for why in held.values()} == {"path-unsafe", "secret"}
    for rel in HOSTILE:
        assert (root / rel).exists()
    assert "ghp_" not in git(root, "log", "-p", "--all")
    assert_sound(str(root))


def test_a_name_that_is_not_utf8_is_held_back_not_fatal(layout: Layout) -> None:
    root = os.fsencode(layout.memory_root)
    with open(os.path.join(root, b"user", b"\xff\xfe.md"), "w") as handle:
        handle.write(doc("bad name"))
    report = run_recover(layout)
    (why,) = dict(report.held).values()
    assert "a name is not valid UTF-8" in why
    assert b"\xff\xfe.md" in os.listdir(os.path.join(root, b"user"))
    git(layout.memory_root, "fsck", "--strict")


def test_symlinks_named_like_memories_are_held_back_and_left_alone(layout: Layout) -> None:
    """An untracked link, and a committed memory replaced by a link: never followed, never
    moved, never committed (HEAD keeps its file), and reported."""
    root = Path(layout.memory_root)  # HEAD has user/a.md, user/b.md, project/p.md
    (root / "user" / "zebra.md").symlink_to("/etc/hostname")
    committed = (root / "user" / "a.md").read_text()
    (root / "user" / "a.md").unlink()
    (root / "user" / "a.md").symlink_to("b.md")
    head = git(root, "rev-parse", "HEAD")
    report = run_recover(layout)
    assert sorted(dict(report.held)) == ["user/a.md", "user/zebra.md"]
    assert all(why.startswith("symlink") for why in dict(report.held).values())
    assert (root / "user" / "a.md").is_symlink() and (root / "user" / "zebra.md").is_symlink()
    assert git(root, "show", "HEAD:user/a.md") == committed
    assert git(root, "rev-parse", "HEAD") == head
    git(str(root), "fsck", "--strict")


def test_a_symlinked_memory_folder_is_never_looked_through_nor_committed_as_deleted(
    layout: Layout, tmp_path: Path
) -> None:
    """HEAD's files below a folder that became a link look deleted: they are held back (HEAD
    keeps them), the link and its target stay as they are."""
    root = Path(layout.memory_root)  # HEAD has user/a.md, user/b.md, project/p.md
    elsewhere = tmp_path / "shared-project"
    (root / "project").rename(elsewhere)
    (root / "project").symlink_to(elsewhere)
    (root / "reference").symlink_to(tmp_path)  # a type folder HEAD does not have yet
    (root / "notes.txt").symlink_to(tmp_path / "x")  # not a memory: left alone, unreported
    head = git(root, "rev-parse", "HEAD")
    report = run_recover(layout)
    assert dict(report.held) == {
        "project/p.md": "symlink: memory files must be regular files inside the memory root "
        "(not followed) (project/ is a symlink)"
    }
    assert (root / "project").is_symlink() and (root / "reference").is_symlink()
    assert (elsewhere / "p.md").is_file() and (root / "notes.txt").is_symlink()
    assert git(root, "rev-parse", "HEAD") == head  # nothing was committed as deleted


@pytest.mark.parametrize("commit_changes", [True, False])
def test_links_are_left_alone_and_nothing_is_written_through_them(
    layout: Layout, tmp_path: Path, commit_changes: bool
) -> None:
    root = Path(layout.memory_root)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "fact.md").write_text("PRECIOUS")
    (root / "user" / "deep").symlink_to(outside)
    (root / "user" / "zebra.md").symlink_to(outside / "fact.md")
    report, _ = recover_for_write(
        layout, identity=IDENTITY, host="h", now=LATER, commit_changes=commit_changes
    )
    assert sorted(dict(report.held)) == ["user/zebra.md"]
    assert os.path.islink(root / "user" / "deep") and os.path.islink(root / "user" / "zebra.md")
    assert (outside / "fact.md").read_text() == "PRECIOUS"
    assert sorted(p.name for p in outside.iterdir()) == ["fact.md"]


def test_a_new_name_that_differs_only_in_case_is_held_back(layout: Layout) -> None:
    root = Path(layout.memory_root)  # HEAD has user/a.md, user/b.md, project/p.md
    (root / "user" / "A.md").write_text(doc("big a"))
    (root / "User").mkdir()
    (root / "User" / "b.md").write_text(doc("b"))
    (root / "user" / "c.md").write_text(doc("c"))
    report = run_recover(layout)
    held = dict(report.held)
    assert sorted(held) == ["User/b.md", "user/A.md"]
    assert held["user/A.md"].startswith("path-collision: 'user/A.md' and 'user/a.md' are one")
    assert git(root, "show", "--name-only", "--format=", "HEAD").split() == [
        "MEMORY.md",
        "user/c.md",
    ]
    assert (root / "user" / "A.md").read_text() == doc("big a")
    assert_sound(str(root))


def test_custom_validator(layout: Layout) -> None:
    root = Path(layout.memory_root)
    (root / "user" / "c.md").write_text(doc("c"))
    report = recover(
        layout, identity=IDENTITY, host="h", now=LATER, problem_of=lambda rel, data: "nope"
    )
    assert report.commit is None and report.held == (("user/c.md", "nope"),)
    assert (root / "user" / "c.md").exists()
    assert hold_reason("user/c.md", doc("c").encode()) is None


def test_a_file_still_being_written_is_held_until_it_is_quiet(layout: Layout) -> None:
    """An agent truncates, then writes: a file changed within the quiet time waits."""
    root = Path(layout.memory_root)
    (root / "user" / "c.md").write_text(doc("c"))
    busy = recover(layout, identity=IDENTITY, host="h", now=LATER, quiet_seconds=30)
    assert busy.commit is None and dict(busy.held)["user/c.md"].startswith("busy:")
    past = time.time() - 60
    os.utime(root / "user" / "c.md", (past, past))
    quiet = recover(layout, identity=IDENTITY, host="h", now=LATER, quiet_seconds=30)
    assert quiet.commit is not None and quiet.held == ()
    assert git(root, "show", "HEAD:user/c.md") == doc("c")


def test_temp_files_and_temp_objects_are_removed(layout: Layout) -> None:
    root = Path(layout.memory_root)
    temp = root / "user" / ".a.md.qmem-tmp-abc123"
    temp.write_text("half")
    tmp_obj = gitdir(root) / "objects" / "tmp_obj_qmem_1_deadbeef"
    tmp_obj.write_bytes(b"x")
    (gitdir(root) / "objects" / "pack").mkdir(exist_ok=True)
    tmp_pack = gitdir(root) / "objects" / "pack" / "tmp_pack_qmem_0123456789ab.pack"
    tmp_pack.write_bytes(b"PACK")  # a sync killed while it packed loose objects
    report = run_recover(layout)
    assert set(report.removed_temp_files) == {str(temp), str(tmp_obj), str(tmp_pack)}
    assert not temp.exists() and not tmp_obj.exists() and not tmp_pack.exists()
    assert report.commit is None


def test_stale_git_locks_are_removed(layout: Layout) -> None:
    git_dir = Path(layout.git_dir)
    stale = [git_dir / "index.lock", git_dir / "refs" / "heads" / "main.lock"]
    for path in stale:
        path.write_text("")
        os.utime(path, (time.time() - 120, time.time() - 120))
    young = git_dir / "HEAD.lock"
    young.write_text("")
    report = run_recover(layout)
    assert sorted(report.removed_locks) == sorted(str(p) for p in stale)
    assert young.exists()


def test_truncated_object_is_corruption_and_nothing_changes(layout: Layout) -> None:
    root = Path(layout.memory_root)
    head = git(root, "rev-parse", "HEAD").strip()
    obj = gitdir(root) / "objects" / head[:2] / head[2:]
    obj.chmod(0o644)
    obj.write_bytes(obj.read_bytes()[:10])
    (root / "user" / "pending.md").write_text(doc("pending"))
    (root / "user" / "junk.md").write_text("junk")
    with pytest.raises(RepoCorrupt) as caught:
        run_recover(layout)
    assert caught.value.exit_code == 6 and "fsck" in caught.value.hint
    assert (root / "user" / "pending.md").exists() and (root / "user" / "junk.md").exists()
    assert not Path(layout.state_dir, "quarantine").exists()


def test_garbage_tree_object_is_corruption(layout: Layout) -> None:
    root = Path(layout.memory_root)
    tree = git(root, "rev-parse", "HEAD^{tree}").strip()
    obj = gitdir(root) / "objects" / tree[:2] / tree[2:]
    obj.chmod(0o644)
    obj.write_bytes(b"garbage that is not zlib")
    with pytest.raises(RepoCorrupt):
        run_recover(layout)


def test_bad_ref_is_corruption(layout: Layout) -> None:
    Path(layout.git_dir, "refs", "heads", "main").write_text("not a sha\n")
    with pytest.raises(RepoCorrupt, match="refs/heads/main"):
        run_recover(layout)


def test_crash_after_ref_before_index_needs_no_commit(layout: Layout) -> None:
    root = Path(layout.memory_root)
    git_dir = gitdir(root)
    saved = {name: (git_dir / name).read_bytes() for name in ("index", gitindex.HEAD_RECORD)}
    cs = ChangeSet(op="remember", subject="x", writes={"user/x.md": doc("x")})
    apply_changeset(layout, cs, identity=IDENTITY, host="h", now=LATER)
    for name, data in saved.items():  # as if the writer died before updating the index
        (git_dir / name).write_bytes(data)
    head = git(root, "rev-parse", "HEAD")
    report = run_recover(layout, now=LATER + timedelta(hours=1))
    assert report.commit is None
    assert git(root, "rev-parse", "HEAD") == head
    assert_clean(str(root))


def test_crash_before_commit_is_recovered(layout: Layout) -> None:
    root = Path(layout.memory_root)
    (root / "user" / "x.md").write_text(doc("x"))  # written, MEMORY.md and commit never made
    report = run_recover(layout)
    assert ("A", "user/x.md") in [(c.status, c.path) for c in report.changes]
    assert "x" in (root / "MEMORY.md").read_text()
    assert_clean(str(root))


def test_commit_made_with_c_git_is_not_recommitted(layout: Layout) -> None:
    root = Path(layout.memory_root)
    (root / "user" / "hand.md").write_text(doc("hand"))
    git(root, "add", "-A")
    git(root, "commit", "-q", "--no-verify", "-m", "by hand")
    head = git(root, "rev-parse", "HEAD")
    report = run_recover(layout)
    assert report.commit is None and git(root, "rev-parse", "HEAD") == head
    assert git(root, "status", "--porcelain") == ""


def test_damaged_index_is_rebuilt(layout: Layout) -> None:
    root = Path(layout.memory_root)
    (gitdir(root) / "index").write_bytes(b"DIRC garbage")
    report = run_recover(layout)
    assert report.index_rebuilt and report.commit is None
    assert git(root, "status", "--porcelain") == ""
    (gitdir(root) / "index").unlink()
    assert run_recover(layout).commit is None
    assert git(root, "status", "--porcelain") == ""


def test_recover_worktree_false_leaves_changes_for_the_plan(layout: Layout) -> None:
    root = Path(layout.memory_root)
    (root / "user" / "companion.md").write_text(doc("companion"))

    def plan() -> ChangeSet:
        assert (root / "user" / "companion.md").exists()
        text = (root / "user" / "companion.md").read_text()
        return ChangeSet(op="snapshot", subject="s", writes={"user/companion.md": text})

    result = run_writer(
        layout, plan, identity=IDENTITY, host="h", now=LATER, recover_worktree=False
    )
    assert result.recovery.commit is None
    assert "Qmem-Op: snapshot" in git(root, "log", "-1", "--format=%B")
    assert_clean(str(root))


def test_fresh_repo_with_existing_files(tmp_path: Path) -> None:
    root = tmp_path / "state" / "memory"
    (root / "user").mkdir(parents=True)
    (root / "user" / "old.md").write_text(doc("old"))
    lay = Layout(str(root), str(root.parent), "explicit", "")
    init_repo(lay, "true")
    report = run_recover(lay)
    assert report.commit and git(root, "rev-list", "--count", "HEAD").strip() == "1"
    assert_clean(str(root))


def test_messages_name_what_was_repaired(layout: Layout) -> None:
    root = Path(layout.memory_root)
    lock = gitdir(root) / "index.lock"
    lock.write_text("")
    os.utime(lock, (time.time() - 120, time.time() - 120))
    (root / "user" / "c.md").write_text(doc("c"))
    lines = run_recover(layout).messages()
    assert any("stale lock file" in line and "index.lock" in line for line in lines)
    assert any("op recover" in line for line in lines)


def test_missing_object_is_corruption(layout: Layout) -> None:
    root = Path(layout.memory_root)
    tree = git(root, "rev-parse", "HEAD^{tree}").strip()
    (gitdir(root) / "objects" / tree[:2] / tree[2:]).unlink()
    with pytest.raises(RepoCorrupt, match=f"{tree} is missing"):
        run_recover(layout)


def test_branch_pointing_at_a_blob_is_corruption(layout: Layout) -> None:
    root = Path(layout.memory_root)
    blob = git(root, "rev-parse", "HEAD:user/a.md").strip()
    (gitdir(root) / "refs" / "heads" / "main").write_text(blob + "\n")
    with pytest.raises(RepoCorrupt, match="is a blob, not a commit"):
        run_recover(layout)


def test_object_with_wrong_content_for_its_id_is_corruption(layout: Layout) -> None:
    root = Path(layout.memory_root)
    tree = git(root, "rev-parse", "HEAD^{tree}").strip()
    other = git(root, "rev-parse", "HEAD:user").strip()  # a valid tree stored under the wrong id
    target = gitdir(root) / "objects" / tree[:2] / tree[2:]
    target.chmod(0o644)
    target.write_bytes((gitdir(root) / "objects" / other[:2] / other[2:]).read_bytes())
    before = {p: p.read_bytes() for p in (root / "user").iterdir()}
    with pytest.raises(RepoCorrupt, match="damaged"):
        run_recover(layout)
    assert {p: p.read_bytes() for p in (root / "user").iterdir()} == before


def test_object_lock_left_by_a_killed_writer_is_removed(layout: Layout) -> None:
    """dulwich writes objects through ``<id>.lock``; a kill -9 mid-write leaves it behind."""
    git_dir = Path(layout.git_dir)
    lock = git_dir / "objects" / "ab" / ("c" * 38 + ".lock")
    lock.parent.mkdir(exist_ok=True)
    lock.write_bytes(b"half an object")
    (git_dir / "qmem-writer").write_text(f"999999999 {time.time_ns() - 10**9} -\n")

    def plan() -> ChangeSet:
        return ChangeSet(op="remember", subject="x", writes={"user/x.md": doc("x")})

    result = run_writer(layout, plan, identity=IDENTITY, host="h", now=LATER)
    assert str(lock) in result.recovery.removed_locks and not lock.exists()
    assert not (git_dir / "qmem-writer").exists()
    assert_clean(layout.memory_root)


def test_young_object_locks_are_left_alone_without_a_dead_writer(layout: Layout) -> None:
    lock = Path(layout.git_dir, "objects", "ab", "c" * 38 + ".lock")
    lock.parent.mkdir(exist_ok=True)
    lock.write_bytes(b"")
    assert run_recover(layout).removed_locks == () and lock.exists()


def test_writer_drops_the_deprecated_fsync_setting_of_an_old_repo(layout: Layout) -> None:
    root = layout.memory_root
    git(root, "config", "--unset", "core.fsync")
    git(root, "config", "core.fsyncObjectFiles", "true")  # what earlier versions set
    assert (
        "deprecated"
        in subprocess.run([*git_argv(root), "status"], capture_output=True, text=True).stderr
    )
    run_recover(layout)
    done = subprocess.run([*git_argv(root), "status"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == ""
    assert git(root, "config", "core.fsync").strip() == "committed"


def test_files_a_sparse_checkout_leaves_out_are_not_deleted(layout: Layout) -> None:
    root = Path(layout.memory_root)  # HEAD has user/a.md, user/b.md, project/p.md
    git(root, "sparse-checkout", "set", "user")
    assert not (root / "project" / "p.md").exists() and git(root, "status", "--porcelain") == ""
    head = git(root, "rev-parse", "HEAD")
    report = run_recover(layout)
    assert report.commit is None and git(root, "rev-parse", "HEAD") == head
    assert git(root, "status", "--porcelain") == ""


@pytest.mark.parametrize("edited", [False, True])
def test_an_executable_bit_on_a_memory_is_taken_off(layout: Layout, edited: bool) -> None:
    """Memories are committed as 100644; an index entry of 100755 would stage a mode change
    (and a hand commit that other machines refuse)."""
    path = Path(layout.memory_root, "user", "a.md")
    if edited:
        path.write_text(doc("a", "edited by hand"))
    path.chmod(0o755)
    run_recover(layout)
    assert path.stat().st_mode & 0o777 == 0o644
    assert git(layout.memory_root, "ls-files", "-s", "user/a.md").startswith("100644 ")
    assert_clean(layout.memory_root)


# --- the work tree blocks a path --------------------------------------------------------------


def _write_plan(rel: str):  # type: ignore[no-untyped-def]
    return lambda: ChangeSet(op="remember", subject="x", writes={rel: doc("x")})


def test_a_file_where_a_memorys_folder_was_commits_the_deletion(layout: Layout) -> None:
    """``project/`` replaced by a plain file: its memory is gone, not "Not a directory"."""
    root = Path(layout.memory_root)
    for child in (root / "project").iterdir():
        child.unlink()
    (root / "project").rmdir()
    (root / "project").write_text("notes, not a memory")
    result = run_writer(layout, _write_plan("user/x.md"), identity=IDENTITY, host="h", now=LATER)
    assert [(c.status, c.path) for c in result.recovery.changes if c.path != "MEMORY.md"] == [
        ("D", "project/p.md")
    ]
    assert (root / "project").read_text() == "notes, not a memory"
    assert git(root, "status", "--porcelain") == "?? project\n"
    git(root, "fsck", "--strict")


@pytest.mark.parametrize(
    ("blocker", "rel", "message"),
    [
        ("project", "project/q.md", "project in the memory folder is not a folder"),
        ("user/c.md", "user/c.md", "user/c.md in the memory folder is a folder"),
        ("MEMORY.md", "user/c.md", "cannot write MEMORY.md: MEMORY.md in the memory folder is a"),
    ],
)
def test_a_write_the_work_tree_blocks_is_refused_before_anything_changes(
    layout: Layout, blocker: str, rel: str, message: str
) -> None:
    root = Path(layout.memory_root)
    run_recover(layout, NOW)
    target = root / blocker
    if target.is_dir():
        for child in target.iterdir():
            child.unlink()
        target.rmdir()
        target.write_text("in the way")
    else:
        target.unlink(missing_ok=True)
        target.mkdir()
        (target / "keep.txt").write_text("in the way")
    with pytest.raises(UnsafePath, match=message) as caught:
        run_writer(layout, _write_plan(rel), identity=IDENTITY, host="h", now=LATER)
    assert caught.value.hint == f"move {blocker} out of the memory folder, then retry"
    assert caught.value.exit_code == 1
    kept = target / "keep.txt" if target.is_dir() else target
    assert kept.read_text() == "in the way"  # the user's file is never removed for us
    assert not (root / rel).is_file()
    assert "remember: x" not in git(root, "log", "--format=%s").splitlines()
    assert [p.name for p in root.rglob("*qmem-tmp*")] == []
    git(root, "fsck", "--strict")


KILLED_MID_FORGET = """
import os, signal, sys
from qmem_git.store import repo
real = repo.remove_file
calls = []
def remove_then_die(root, rel):
    calls.append(rel)
    if len(calls) == 2:  # the first file is gone, the second not yet
        os.kill(os.getpid(), signal.SIGKILL)
    real(root, rel)
repo.remove_file = remove_then_die
from qmem_git.__main__ import main
sys.exit(main(sys.argv[1:]))
"""


def qmem_run(root: Path, *args: str, script: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QMEM_TELEMETRY": "0"}
    head = [sys.executable, "-c", script] if script else [sys.executable, "-m", "qmem_git"]
    return subprocess.run(
        [*head, "--memory-dir", str(root), *args], env=env, capture_output=True, text=True
    )


def test_a_change_killed_half_applied_is_undone_not_committed_in_part(layout: Layout) -> None:
    """kill -9 after one of two files a forget deletes: the next writer puts the first back
    (one operation is one commit or none), then the forget can run whole."""
    root = Path(layout.memory_root)
    for text in ("I prefer terse responses", "I prefer terse commit messages"):
        assert qmem_run(root, "remember", text).returncode == 0
    head = git(root, "rev-parse", "HEAD")
    files = sorted(git(root, "ls-tree", "-r", "--name-only", "HEAD").split())
    assert qmem_run(root, "forget", "terse", script=KILLED_MID_FORGET).returncode == -9
    assert len(list((root / "user").glob("i-prefer-terse-*.md"))) == 1  # half done on disk

    after = qmem_run(root, "remember", "The staging cluster deploys from branch rel-7")
    assert after.returncode == 0, after.stderr
    assert "an interrupted forget was undone: put back user/i-prefer-terse-" in after.stderr
    assert git(root, "rev-parse", "HEAD~1") == head  # no recover commit of half a forget
    assert set(files) <= set(git(root, "ls-tree", "-r", "--name-only", "HEAD").split())
    assert len(list((root / "user").glob("i-prefer-terse-*.md"))) == 2
    assert_clean(str(root))
    forgot = qmem_run(root, "forget", "terse")
    assert forgot.returncode == 0, forgot.stderr
    assert "D user/i-prefer-terse-commit-messages.md" in git(root, "show", "--name-status", "HEAD")
    assert not list((root / "user").glob("i-prefer-terse-*.md"))
    assert not (gitdir(root) / "qmem-apply.json").exists()
    assert_clean(str(root))


def test_an_interrupted_change_leaves_what_someone_changed_since_alone(layout: Layout) -> None:
    from qmem_git.store import journal
    from qmem_git.store.repo import blob_id

    root = Path(layout.memory_root)
    head = git(root, "rev-parse", "HEAD").strip()
    ours, theirs = doc("a", body="rewritten by the killed writer"), doc("p", "project", "mine")
    record = journal.Journal(
        "dream",
        head,
        {"user/a.md": blob_id(ours.encode()), "project/p.md": blob_id(b"never written")},
        ["user/b.md"],
    )
    journal.begin(str(gitdir(root)), record)
    (root / "user" / "a.md").write_text(ours)  # what it wrote: undone
    (root / "user" / "b.md").unlink()  # what it deleted: put back
    (root / "project" / "p.md").write_text(theirs)  # a person's edit since: kept, committed
    report = run_recover(layout)
    assert report.warnings[0] == "an interrupted dream was undone: put back user/a.md, user/b.md"
    assert (root / "user" / "a.md").read_text() == doc("a")
    assert (root / "user" / "b.md").read_text() == doc("b")
    assert (root / "project" / "p.md").read_text() == theirs
    assert report.commit is not None  # the person's edit, as a recover commit
    assert {c.path for c in report.changes} == {"project/p.md", "MEMORY.md"}
    assert not (gitdir(root) / journal.NAME).exists()
    assert_clean(str(root))


def test_a_record_whose_commit_was_made_is_dropped(layout: Layout) -> None:
    from qmem_git.store import journal

    root = Path(layout.memory_root)
    old = git(root, "rev-parse", "HEAD").strip()
    apply_changeset(
        layout,
        ChangeSet(op="remember", subject="x", writes={"user/c.md": doc("c")}),
        identity=IDENTITY,
        host="test-host",
        now=LATER,
    )
    journal.begin(str(gitdir(root)), journal.Journal("remember", old, {"user/c.md": "0" * 40}, []))
    report = run_recover(layout)
    assert not report.warnings and report.commit is None
    assert (root / "user" / "c.md").read_text() == doc("c")
    assert not (gitdir(root) / journal.NAME).exists()


KILLED_AFTER_FILES = """
import os, signal, sys
from qmem_git.store import repo
repo._write_memory_index = lambda *args: os.kill(os.getpid(), signal.SIGKILL)
from qmem_git.__main__ import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_killed_snapshot_never_undoes_what_a_person_did(layout: Layout) -> None:
    """A snapshot commits files someone else wrote: killed after its journal is written, the
    next writer must keep those files (and commit them), not put HEAD's versions back."""
    root = Path(layout.memory_root)
    added, edited = root / "project" / "hand.md", root / "user" / "a.md"
    added.write_text(doc("hand", "project", "Hand added memory about caching"))
    edited.write_text(doc("a", body="edited by hand"))
    (root / "user" / "b.md").unlink()
    assert qmem_run(root, "snapshot", script=KILLED_AFTER_FILES).returncode == -9
    after = qmem_run(root, "remember", "The staging cluster deploys from branch rel-7")
    assert after.returncode == 0, after.stderr
    tree = git(root, "ls-tree", "-r", "--name-only", "HEAD").split()
    assert "project/hand.md" in tree and "user/b.md" not in tree
    assert added.exists() and not (root / "user" / "b.md").exists()
    assert edited.read_text() == doc("a", body="edited by hand")
    assert git(root, "show", "HEAD:user/a.md") == doc("a", body="edited by hand")
    assert_clean(str(root))


def test_a_write_during_a_merge_conflict_leaves_the_conflict_to_the_person(
    layout: Layout,
) -> None:
    """The conflicted file (with markers) is held back where it is, its conflict stages stay
    for the person resolving it, and the writer's own commit is made all the same."""
    root = Path(layout.memory_root)
    assert qmem_run(root, "remember", "The team prefers squash merges on main").returncode == 0
    rel = git(root, "ls-files", "project", "user").split()[0]
    quiet = ("-c", "user.name=t", "-c", "user.email=t@e", "-c", "core.hooksPath=/dev/null")

    def commit_edit(line: str, message: str) -> None:
        with open(root / rel, "a", encoding="utf-8") as handle:
            handle.write(line)
        git(root, *quiet, "commit", "-qam", message)

    git(root, "checkout", "-q", "-b", "side")
    commit_edit("- Always.\n", "side")
    git(root, "checkout", "-q", "main")
    commit_edit("- Never.\n", "main")
    merge = subprocess.run(
        [*git_argv(root), *quiet, "merge", "side"], capture_output=True, text=True
    )
    assert merge.returncode != 0 and git(root, "ls-files", "-u")  # a real conflict
    done = qmem_run(root, "remember", "Deploy tokens rotate every 90 days via the vault job")
    assert done.returncode == 0, done.stderr
    assert f"warning: {rel}: conflict-marker:" in done.stderr
    assert "<<<<<<<" in (root / rel).read_text()
    assert "<<<<<<<" not in git(root, "show", f"HEAD:{rel}")
    assert "remember:" in git(root, "log", "-1", "--format=%s")
    git(root, "fsck", "--strict")


def test_links_committed_with_c_git_are_left_as_committed(layout: Layout) -> None:
    """Links HEAD has (committed by hand) stay in HEAD and on disk, untouched; ``git status``
    stays clean after the write."""
    root = Path(layout.memory_root)
    assert (
        qmem_run(root, "remember", "The staging cluster deploys from branch rel-7").returncode == 0
    )
    target = git(root, "ls-files", "user").split()[0]
    (root / "project").mkdir(exist_ok=True)
    (root / "project" / "alias.md").symlink_to(Path("..") / target)
    (root / "notes-link").symlink_to("target-nowhere")
    quiet = ("-c", "user.name=t", "-c", "user.email=t@e", "-c", "core.hooksPath=/dev/null")
    git(root, "add", "-A")
    git(root, *quiet, "commit", "-qm", "links by hand")
    done = qmem_run(root, "remember", "Deploy tokens rotate every 90 days via the vault job")
    assert done.returncode == 0, done.stderr
    assert git(root, "status", "--porcelain") == ""
    tracked = git(root, "ls-files", "-s").splitlines()
    assert any(
        line.startswith("120000") and line.endswith("\tproject/alias.md") for line in tracked
    )
    assert any(line.startswith("120000") and line.endswith("\tnotes-link") for line in tracked)
    assert (root / "notes-link").is_symlink() and (root / "project" / "alias.md").is_symlink()
    git(root, "fsck", "--strict")


def test_a_global_split_index_setting_never_reaches_the_memory_repo(
    layout: Layout, tmp_path: Path
) -> None:
    """With core.splitIndex=true in the user's global config, C git would write a split index
    (which qmem-git can only rebuild, dropping sparse-checkout bits); the memory repo says
    false, also one made before the setting existed (its next writer adds it)."""
    root = layout.memory_root
    git(root, "config", "--unset", "core.splitIndex")
    git(root, "config", "--unset", "index.sparse")
    run_recover(layout)  # an older repo: the writer brings its config up to date
    assert git(root, "config", "core.splitIndex").strip() == "false"
    assert git(root, "config", "index.sparse").strip() == "false"
    global_config = tmp_path / "global-gitconfig"
    global_config.write_text("[core]\n\tsplitIndex = true\n")
    env = {**os.environ, "GIT_CONFIG_GLOBAL": str(global_config), "GIT_CONFIG_NOSYSTEM": "1"}
    (Path(root) / "user" / "extra.md").write_text("---\nname: x\ndescription: x\ntype: user\n---\n")
    subprocess.run([*git_argv(root), "add", "-A"], env=env, check=True)
    gitindex.read_index(str(gitdir(root)))  # a plain index: readable, no "link"
    assert not list(gitdir(root).glob("sharedindex.*"))


def test_adding_the_index_settings_keeps_every_line_of_the_config(
    layout: Layout, tmp_path: Path
) -> None:
    """The settings are appended, never a rewrite: comments, quoting and a value the user set
    stay as they were; a symlinked config is written where it points; a config git cannot read
    is left alone, and the writer stops there (exit 6), as C git and every reader do."""
    root = layout.memory_root
    config = gitdir(root) / "config"
    git(root, "config", "--unset", "core.splitIndex")
    git(root, "config", "--unset", "index.sparse")
    original = config.read_text() + '# a comment\n[alias]\n\thi = "!f() { echo \\"hi\\"; }; f"\n'
    real = tmp_path / "real-config"
    real.write_text(original)
    config.unlink()
    config.symlink_to(real)
    run_recover(layout)
    assert config.is_symlink() and real.read_text().startswith(original)
    assert git(root, "config", "alias.hi").strip() == '!f() { echo "hi"; }; f'
    assert git(root, "config", "core.splitIndex").strip() == "false"
    git(root, "config", "core.splitIndex", "true")  # the user's own choice: kept
    run_recover(layout)
    init_repo(layout, "true")
    assert git(root, "config", "core.splitIndex").strip() == "true"
    git(root, "config", "--unset", "index.sparse")
    with real.open("a") as handle:
        handle.write("this is = not [valid\n")  # git cannot read it either
    before = real.read_text()
    with pytest.raises(RepoCorrupt, match="config cannot be read"):
        run_recover(layout)
    assert real.read_text() == before


@pytest.mark.parametrize("link", ["user/notes-link", "feedback"])
def test_a_committed_link_where_memories_go_is_never_written_through(
    layout: Layout, tmp_path: Path, link: str
) -> None:
    """A link C git committed in a type folder, or as a type folder: left as it is; a write
    that would go through it is refused (nothing written), other writes go ahead."""
    root = Path(layout.memory_root)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / link).parent.mkdir(parents=True, exist_ok=True)
    (root / link).symlink_to(outside)
    quiet = ("-c", "user.name=t", "-c", "user.email=t@e", "-c", "core.hooksPath=/dev/null")
    git(root, "add", "-A")
    git(root, *quiet, "commit", "-qm", "a link by hand")
    done = qmem_run(root, "remember", "--type", "feedback", "Always answer in plain English")
    if link == "feedback":
        assert done.returncode != 0 and "feedback" in done.stderr
    else:
        assert done.returncode == 0, done.stderr
    assert git(root, "status", "--porcelain") == ""
    assert link in git(root, "ls-tree", "-r", "--name-only", "HEAD").split()
    assert (root / link).is_symlink()
    git(root, "fsck", "--strict")
    assert list(outside.iterdir()) == []  # nothing written through the link
