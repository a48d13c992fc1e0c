"""store.history against repositories built by C git; results are checked against C git too."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from dulwich.object_store import DiskObjectStore
from dulwich.objects import ObjectID
from helpers_git import GitRepo, git_argv, gitdir, memory_text

from qmem_git.core.model import MAX_FILE_BYTES
from qmem_git.core.unidiff import colorize, render_file_diff
from qmem_git.errors import RepoCorrupt, UsageError
from qmem_git.store import history as store_history
from qmem_git.store import recovery
from qmem_git.store.history import (
    History,
    diff_revs,
    file_history,
    open_history,
    read_log,
    resolve_rev,
    show_commit,
)
from qmem_git.store.recovery import worktree_changes

PNPM = memory_text("user", "pnpm", "Use pnpm for installs")
PNPM_2 = memory_text("user", "pnpm", "Use pnpm for installs", "Run pnpm -r for workspaces")
CI = memory_text("project", "ci", "CI runs on GitHub Actions")
DOCS = memory_text("reference", "docs", "Docs live at docs.example.com")


@pytest.fixture
def repo(tmp_path: Path, git_exe: str) -> GitRepo:
    """remember → extract → foreign edit → forget, one minute apart."""
    r = GitRepo(tmp_path / "memory")
    r.op("remember", "add pnpm", {"user/pnpm.md": PNPM, "MEMORY.md": "- pnpm\n"}, topics=("user",))
    r.op(
        "extract",
        "2 memories",
        {"project/ci.md": CI, "user/pnpm.md": PNPM_2},
        topics=("project", "user"),
        added=2,
    )
    r.plain("docs by hand", {"reference/docs.md": DOCS})
    r.op("forget", "pnpm", deletes=["user/pnpm.md"], topics=("user",), removed=2)
    return r


def git_log(r: GitRepo, *args: str) -> list[str]:
    return r.git("log", "--format=%H", *args).split()


# -- log --------------------------------------------------------------------------------------


def test_log_order_matches_git(repo: GitRepo) -> None:
    assert [e.commit for e in read_log(repo.path)] == git_log(repo)


def test_log_reads_message_fields(repo: GitRepo) -> None:
    forget, foreign, extract, remember = read_log(repo.path)
    assert extract.op == "extract"
    assert extract.info.topics == ("project", "user")
    assert extract.info.added == 2
    assert extract.info.host == "testhost"
    assert set(extract.info.paths) == {"project/ci.md", "user/pnpm.md"}
    assert forget.info.removed == 2 and forget.subject == "forget: pnpm"
    assert remember.parents == () and forget.parents == (foreign.commit,)
    assert remember.author == "Test Author <author@example.com>"
    assert extract.time == remember.time + 60 and extract.tz == 0


def test_foreign_commit_gets_paths_from_tree_diff(repo: GitRepo) -> None:
    foreign = read_log(repo.path)[1]
    assert foreign.op is None
    assert [(c.status, c.path) for c in foreign.info.changes] == [("A", "reference/docs.md")]


def test_log_never_diffs_trees_for_qmem_commits(
    tmp_path: Path, git_exe: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = GitRepo(tmp_path / "m")
    for i in range(5):
        r.op("remember", f"m{i}", {f"user/m{i}.md": memory_text("user", f"m{i}", f"M {i}")})

    def boom(*_: object) -> None:
        raise AssertionError("log diffed a tree")

    monkeypatch.setattr(History, "_tree_diff", boom)
    assert len(read_log(r.path)) == 5


def test_log_limit_and_op_filter(repo: GitRepo) -> None:
    assert len(read_log(repo.path, limit=2)) == 2
    assert read_log(repo.path, limit=0) == []
    assert [e.op for e in read_log(repo.path, op="extract")] == ["extract"]
    assert read_log(repo.path, op="dream") == []


@pytest.mark.parametrize(
    ("path", "subjects"),
    [
        ("user/pnpm.md", ["forget: pnpm", "extract: 2 memories", "remember: add pnpm"]),
        ("user", ["forget: pnpm", "extract: 2 memories", "remember: add pnpm"]),
        ("project/", ["extract: 2 memories"]),
        ("reference/docs.md", ["docs by hand"]),
        ("use", []),
    ],
)
def test_log_path_filter(repo: GitRepo, path: str, subjects: list[str]) -> None:
    assert [e.subject for e in read_log(repo.path, path=path)] == subjects


def test_log_entries_are_json_ready(repo: GitRepo) -> None:
    data = json.loads(json.dumps([e.as_dict() for e in read_log(repo.path)]))
    assert data[0]["op"] == "forget"
    assert data[0]["changes"] == [{"status": "D", "path": "user/pnpm.md"}]
    assert data[0]["date"].startswith("2023-11-14T22:")
    assert {"commit", "short", "parents", "topics", "added", "removed", "trailers"} <= set(data[0])


def test_empty_repo_and_missing_repo(tmp_path: Path, git_exe: str) -> None:
    empty = GitRepo(tmp_path / "empty")
    assert read_log(empty.path) == []
    assert diff_revs(empty.path).files == []
    assert file_history(empty.path, "user/x.md") == []
    with pytest.raises(UsageError, match="no commits"):
        resolve_rev(empty.path, "HEAD")
    with pytest.raises(UsageError, match="not a memory repository") as info:
        read_log(str(tmp_path / "nowhere"))
    assert info.value.exit_code == 2 and "init" in info.value.hint


def test_log_walks_merged_history_like_git(repo: GitRepo) -> None:
    base = repo.head()
    repo.branch("side", "HEAD~1")
    repo.op("remember", "side", {"user/side.md": memory_text("user", "side", "Side")})
    repo.checkout("main")
    repo.op("remember", "main", {"user/main.md": memory_text("user", "main", "Main")})
    merge = repo.merge("side", "merge side")
    entries = read_log(repo.path)
    assert [e.commit for e in entries] == git_log(repo)
    assert entries[0].commit == merge and entries[0].is_merge
    assert entries[0].parents[0] != base  # main moved on before the merge
    # a merge lists what it brought into main (diff against its first parent), but it did
    # not change user/side.md: it kept the side's version (git log -- user/side.md agrees)
    assert [c.path for c in entries[0].info.changes] == ["user/side.md"]
    assert [e.subject for e in read_log(repo.path, path="user/side.md")] == ["remember: side"]
    assert [e.subject for e in read_log(repo.path, path="user/main.md")] == ["remember: main"]


# -- revisions ------------------------------------------------------------------------------


def test_resolve_rev_forms(repo: GitRepo) -> None:
    shas = git_log(repo)
    for rev, expected in [
        ("HEAD", shas[0]),
        ("@", shas[0]),
        ("main", shas[0]),
        ("HEAD~2", shas[2]),
        ("HEAD^", shas[1]),
        ("HEAD^^", shas[2]),
        ("main~3", shas[3]),
        ("HEAD~0", shas[0]),
        (shas[2], shas[2]),
        (shas[2][:4], shas[2]),
        (shas[1][:9].upper(), shas[1]),
        (shas[0][:7] + "~1", shas[1]),
        ("refs/heads/main", shas[0]),
    ]:
        assert resolve_rev(repo.path, rev) == expected, rev


def test_resolve_rev_second_parent_and_tags(repo: GitRepo) -> None:
    repo.branch("side", "HEAD~1")
    side = repo.op("remember", "side", {"user/side.md": memory_text("user", "side", "Side")})
    repo.checkout("main")
    repo.merge("side", "merge side")
    repo.git("tag", "-a", "-m", "annotated", "v1", "HEAD~1")
    assert resolve_rev(repo.path, "HEAD^2") == side
    assert resolve_rev(repo.path, "side") == side
    assert resolve_rev(repo.path, "v1") == repo.git("rev-parse", "HEAD~1").strip()


@pytest.mark.parametrize("rev", ["nope", "abc", "HEAD~9", "HEAD^3", "", "deadbeef", "HEAD~x"])
def test_resolve_rev_errors(repo: GitRepo, rev: str) -> None:
    with pytest.raises(UsageError) as info:
        resolve_rev(repo.path, rev)
    assert info.value.exit_code == 2 and info.value.hint


# -- diff and show ----------------------------------------------------------------------------


def name_status(files: list[store_history.FileDiff]) -> set[tuple[str, str]]:
    return {(f.status, f.path) for f in files}


def test_diff_default_is_last_operation(repo: GitRepo) -> None:
    result = diff_revs(repo.path)
    assert name_status(result.files) == repo.name_status("HEAD^", "HEAD")
    assert result.new_commit == repo.head()
    deleted = result.files[0]
    assert deleted.new_text is None and deleted.old_text == PNPM_2
    assert "--- a/user/pnpm.md\n+++ /dev/null\n" in result.text
    assert "deleted file mode 100644" in result.text


def test_diff_one_rev_is_rev_to_head(repo: GitRepo) -> None:
    result = diff_revs(repo.path, "HEAD~3")
    assert name_status(result.files) == repo.name_status("HEAD~3", "HEAD")


def test_diff_two_revs_and_rev_b_alone(repo: GitRepo) -> None:
    assert name_status(diff_revs(repo.path, "HEAD~3", "HEAD~1").files) == repo.name_status(
        "HEAD~3", "HEAD~1"
    )
    assert name_status(diff_revs(repo.path, None, "HEAD~1").files) == repo.name_status(
        "HEAD~2", "HEAD~1"
    )


def test_diff_of_root_commit_against_empty_tree(repo: GitRepo) -> None:
    root = git_log(repo)[-1]
    result = diff_revs(repo.path, None, root)
    assert name_status(result.files) == {("A", "MEMORY.md"), ("A", "user/pnpm.md")}
    assert "--- /dev/null\n+++ b/user/pnpm.md\n" in result.text
    assert "new file mode 100644" in result.text


def test_diff_text_matches_git_for_a_modification(repo: GitRepo) -> None:
    ours = diff_revs(repo.path, "HEAD~3", "HEAD~2")
    theirs = repo.git("diff", "--no-renames", "--no-color", "HEAD~3", "HEAD~2")
    assert ours.text == theirs


def test_show_matches_git_show_patch(repo: GitRepo) -> None:
    result = show_commit(repo.path, "HEAD~1")
    assert result.entry.subject == "docs by hand" and result.message == "docs by hand\n"
    assert result.diff_text == repo.git("show", "--format=", "--no-color", "HEAD~1")
    root = show_commit(repo.path, git_log(repo)[-1])
    assert {f.path for f in root.files} == {"MEMORY.md", "user/pnpm.md"}


@pytest.mark.parametrize("separator", ["\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x85", "\u2028"])
def test_only_newline_ends_a_line_as_in_git(tmp_path: Path, git_exe: str, separator: str) -> None:
    r = GitRepo(tmp_path / "m")
    base = memory_text("user", "crlf", "one")
    r.plain("base", {"user/crlf.md": base})
    r.plain("edit", {"user/crlf.md": base + f"two{separator}three\nfour{separator}"})
    shown = subprocess.run(  # bytes: text mode would read CR as a line end
        [*git_argv(r.path), "show", "--format=", "--no-color"], capture_output=True, check=True
    )
    assert show_commit(r.path, "HEAD").diff_text == shown.stdout.decode("utf-8")
    from qmem_git.ops.history import commit_stats

    stats = [(s.insertions, s.deletions) for s in commit_stats(r.path, "HEAD")]
    numstat = r.git("show", "--numstat", "--format=", "HEAD").split("\t")
    assert stats == [(int(numstat[0]), int(numstat[1]))]


def test_colorize_marks_headers_hunks_and_lines() -> None:
    text = render_file_diff("a.md", "one\ntwo\n", "one\nthree\n")
    coloured = colorize(text)
    assert "\x1b[1mdiff --git a/a.md b/a.md\x1b[m" in coloured
    assert "\x1b[1m--- a/a.md\x1b[m" in coloured
    assert "\x1b[36m@@ -1,2 +1,2 @@\x1b[m" in coloured
    assert "\x1b[31m-two\x1b[m" in coloured and "\x1b[32m+three\x1b[m" in coloured
    assert "\x1b[m one" not in coloured and "\n one\n" in coloured


def test_unidiff_marks_missing_final_newline_and_empty_files() -> None:
    text = render_file_diff("a.md", "x", "y\n")
    assert text.endswith("-x\n\\ No newline at end of file\n+y\n")
    assert render_file_diff("e.md", None, "") == "diff --git a/e.md b/e.md\nnew file mode 100644\n"
    assert render_file_diff("a.md", "same", "same") == ""


# -- file history -----------------------------------------------------------------------------


def test_file_history_includes_creation_and_deletion(repo: GitRepo) -> None:
    entries = file_history(repo.path, "user/pnpm.md")
    assert [e.op for e in entries] == ["forget", "extract", "remember"]
    assert [e.commit for e in entries] == git_log(repo, "--", "user/pnpm.md")


def test_file_history_of_foreign_commits_uses_trees(repo: GitRepo) -> None:
    repo.plain("edit docs", {"reference/docs.md": DOCS + "\nMore.\n"})
    repo.plain("remove docs", deletes=["reference/docs.md"])
    path = "reference/docs.md"
    assert [e.commit for e in file_history(repo.path, path)] == git_log(repo, "--", path)


def test_file_history_for_qmem_commit_without_file_lines(repo: GitRepo) -> None:
    repo.write("user/bare.md", memory_text("user", "bare", "Bare"))
    repo.git("add", "-A")
    sha = repo.commit_message("recover: bare\n\nQmem-Op: recover\n")
    assert [e.commit for e in file_history(repo.path, "user/bare.md")] == [sha]


def test_file_history_hides_foreign_merge_that_kept_one_side(repo: GitRepo) -> None:
    repo.branch("side", "HEAD~1")
    repo.plain("side edit", {"project/ci.md": CI + "\nAlso lint.\n"})
    repo.checkout("main")
    repo.plain("main note", {"project/note.md": memory_text("project", "note", "Note")})
    repo.merge("side", "merge side")
    path = "project/ci.md"
    assert [e.commit for e in file_history(repo.path, path)] == git_log(repo, "--", path)


# -- work tree --------------------------------------------------------------------------------


def test_worktree_changes_compares_blobs(repo: GitRepo, tmp_path: Path) -> None:
    repo.write("project/ci.md", CI + "\nMore.\n")
    repo.write("user/new.md", memory_text("user", "new", "New"))
    repo.delete("reference/docs.md")
    repo.write("MEMORY.md", "changed\n")
    repo.write(".hidden/x.md", "ignored")
    repo.write("notes.txt", "ignored")
    (repo.root / "user" / "link.md").symlink_to(repo.root / "project" / "ci.md")
    changes = worktree_changes(repo.path)
    assert [(c.status, c.path) for c in changes] == [
        ("A", ".hidden/x.md"),  # in a dot-folder: Qwen lists it, so it is versioned (issue 18)
        ("M", "project/ci.md"),
        ("D", "reference/docs.md"),
        ("A", "user/new.md"),
    ]
    assert changes[1].old_data == CI.encode() and changes[2].data is None


def test_worktree_changes_use_the_store_file_rule(repo: GitRepo) -> None:
    """Dot-files, dot-folders (Qwen lists them), oversized files and a MEMORY.md below the
    root count."""
    repo.plain(
        "other tool",
        {"user/.old.md": CI, "user/MEMORY.md": "nested\n", ".cfg/x.md": "x"},
    )
    repo.write("user/.dot.md", PNPM)
    repo.write(".top.md", DOCS)
    repo.write("user/MEMORY.md", PNPM)
    repo.write("project/MEMORY.md", PNPM)
    repo.write("user/.hidden/x.md", PNPM)
    repo.write(".cfg/x.md", "changed")
    repo.delete("user/.old.md")
    big = "x" * (MAX_FILE_BYTES + 1)
    repo.write("project/big.md", big)
    changes = worktree_changes(repo.path)
    assert [(c.status, c.path) for c in changes] == [
        ("M", ".cfg/x.md"),
        ("A", ".top.md"),
        ("A", "project/MEMORY.md"),
        ("A", "project/big.md"),
        ("A", "user/.dot.md"),
        ("A", "user/.hidden/x.md"),
        ("D", "user/.old.md"),
        ("M", "user/MEMORY.md"),
    ]
    assert changes[3].data == big.encode() and changes[6].old_data == CI.encode()


def test_worktree_changes_tolerate_a_file_vanishing(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.write("user/gone.md", PNPM)
    repo.write("user/kept.md", PNPM)
    real = recovery.memory_paths

    def listed_then_deleted(root: str) -> list[str]:
        paths = real(root)
        repo.delete("user/gone.md")
        return paths

    monkeypatch.setattr(recovery, "memory_paths", listed_then_deleted)
    changes = worktree_changes(repo.path)
    assert [(c.status, c.path) for c in changes] == [("A", "user/kept.md")]


# -- ops.history facade -------------------------------------------------------------------------


def test_ops_history_facade_validates_and_delegates(repo: GitRepo) -> None:
    from qmem_git.ops import history as ops_history

    with pytest.raises(UsageError, match="unknown operation"):
        ops_history.log(repo.path, op="nap")
    with pytest.raises(UsageError):
        ops_history.log(repo.path, limit=-1)
    with pytest.raises(UsageError):
        ops_history.diff(repo.path, ["HEAD~3", "HEAD~2", "HEAD"])
    for root in ("/", ".", "./", ""):
        with pytest.raises(UsageError):
            ops_history.history(repo.path, root)
    assert [e.op for e in ops_history.log(repo.path, op="forget", limit=5)] == ["forget"]
    assert ops_history.show(repo.path).entry.op == "forget"
    assert ops_history.diff(repo.path, ["HEAD~1"]).files[0].path == "user/pnpm.md"
    assert len(ops_history.history(repo.path, "project/ci.md")) == 1


def test_commit_stats_count_lines_like_git_numstat(repo: GitRepo) -> None:
    from qmem_git.ops.history import commit_stats

    stats = {(s.path, s.insertions, s.deletions) for s in commit_stats(repo.path, "HEAD~2")}
    numstat = repo.git("show", "--numstat", "--format=", "HEAD~2").split("\n")
    expected = {(p, int(a), int(d)) for a, d, p in (line.split("\t") for line in numstat if line)}
    assert stats == expected


def test_entry_accounting_helpers() -> None:
    from qmem_git.core.entries import entry_delta, memory_type, topics_of

    assert entry_delta("user/pnpm.md", PNPM, PNPM_2) == (1, 0)
    assert entry_delta("user/pnpm.md", PNPM_2, None) == (0, 2)
    assert memory_type("x/y.md", "not a memory", CI) == "project"
    assert memory_type("feedback/y.md", None) == "feedback"
    assert memory_type("notes.md", None) is None
    assert topics_of(["user", None, "project", "user"]) == ("user", "project")


# -- which commits changed a path: one rule, trees over untrusted messages ---------------------


def merge_side(r: GitRepo, resolved: str | None = None) -> str:
    """A C-git merge of a side-branch edit of project/ci.md; ``resolved`` replaces side's text."""
    r.branch("side", "HEAD~1")
    r.plain("side edit", {"project/ci.md": CI + "\nAlso lint.\n"})
    r.checkout("main")
    r.plain("main note", {"project/note.md": memory_text("project", "note", "Note")})
    r.git("merge", "-q", "--no-ff", "--no-commit", "side")
    if resolved is not None:
        r.write("project/ci.md", resolved)
        r.git("add", "-A")
    return r.commit_message("merge side\n")


def test_changed_compares_with_every_parent(repo: GitRepo) -> None:
    kept = merge_side(repo)
    with open_history(repo.path) as history:
        root = repo.git("rev-list", "--max-parents=0", "HEAD").strip()
        assert history.changed(root, "user/pnpm.md")  # a root commit: against nothing
        assert not history.changed(root, "project/ci.md")
        assert history.changed(history.resolve("HEAD^2"), "project/ci.md")
        assert not history.changed(kept, "project/ci.md")  # took side's version
        assert history.changed(kept, "project/note.md") is False  # took main's version


def test_changed_sees_a_merge_resolution(repo: GitRepo) -> None:
    merge = merge_side(repo, CI + "\nResolved.\n")
    with open_history(repo.path) as history:
        assert history.changed(merge, "project/ci.md")
    assert merge in [e.commit for e in file_history(repo.path, "project/ci.md")]


def amend_edit(r: GitRepo, rel: str, text: str, **env: str) -> str:
    """Amend HEAD with a hand edit of ``rel`` (C git: the message stays, the tree changes)."""
    r.write(rel, text)
    r.git("commit", "-q", "-a", "--amend", "--no-edit", env=env)
    return r.head()


def test_amended_qmem_commit_is_read_from_its_tree(repo: GitRepo) -> None:
    amended = amend_edit(repo, "project/ci.md", CI + "\nEdited.\n")
    entry = read_log(repo.path)[0]
    assert entry.commit == amended and entry.op == "forget"
    assert {(c.status, c.path) for c in entry.info.changes} == {
        ("D", "user/pnpm.md"),
        ("M", "project/ci.md"),
    }
    assert read_log(repo.path, path="project/ci.md")[0].commit == amended
    path = "project/ci.md"
    assert [e.commit for e in file_history(repo.path, path)] == git_log(repo, "--", path)


def test_rewritten_by_another_committer_in_the_same_second(repo: GitRepo) -> None:
    stamp = repo.git("log", "-1", "--format=%ad", "--date=raw").strip()
    other = {"GIT_COMMITTER_NAME": "Someone Else", "GIT_COMMITTER_DATE": stamp}
    amended = amend_edit(repo, "project/ci.md", CI + "\nEdited.\n", **other)
    assert amended in [e.commit for e in file_history(repo.path, "project/ci.md")]


def test_unmodified_qmem_commit_trusts_its_message(repo: GitRepo) -> None:
    """Same signatures, our trailers: the file lines are used, even when they are wrong."""
    repo.write("project/ci.md", CI + "\nEdited.\n")
    repo.git("add", "-A")
    lying = repo.commit_message("dream: x\n\nM reference/docs.md\n\nQmem-Op: dream\n")
    assert file_history(repo.path, "reference/docs.md")[0].commit == lying
    assert lying not in [e.commit for e in file_history(repo.path, "project/ci.md")]


def test_changed_paths_keep_undecodable_names(repo: GitRepo) -> None:
    raw = b"user/caf\xe9.md"
    (repo.root / os.fsdecode(raw)).write_bytes(PNPM.encode())
    repo.git("add", "-A")
    sha = repo.commit_message("latin-1 name\n")
    with open_history(repo.path) as history:
        (path,) = history.changed_paths(sha)
        assert path.encode("utf-8", "surrogateescape") == raw
        assert history.changed_paths(history.resolve("HEAD~1")) == ["user/pnpm.md"]


def test_worktree_file_reads_only_regular_files(repo: GitRepo) -> None:
    (repo.root / "user" / "link.md").symlink_to(repo.root / "project" / "ci.md")
    (repo.root / "user" / "dir.md").mkdir()
    os.mkfifo(repo.root / "user" / "fifo.md")
    with open_history(repo.path) as history:
        assert history.worktree_file("project/ci.md") == CI.encode()
        for rel in ("user/link.md", "user/dir.md", "user/fifo.md", "user/none.md", "x/y/z.md"):
            assert history.worktree_file(rel) is None, rel


# -- a damaged pack index ---------------------------------------------------------------------


def damage_pack_index(r: GitRepo) -> None:
    """Pack every object (``git gc``), then cut the pack's .idx to 100 bytes."""
    r.git("gc", "-q")
    pack_dir = gitdir(r.root) / "objects" / "pack"
    (idx,) = pack_dir.glob("pack-*.idx")
    idx.chmod(0o644)
    os.truncate(idx, 100)


@pytest.mark.parametrize("length", [4, 8, 40])
def test_resolve_with_a_damaged_pack_index_is_corrupt(repo: GitRepo, length: int) -> None:
    """dulwich raises struct.error loading the index: RepoCorrupt (exit 6), not a crash."""
    sha = repo.head()
    damage_pack_index(repo)
    with pytest.raises(RepoCorrupt) as info, open_history(repo.path) as history:
        history.resolve(sha[:length])
    assert info.value.exit_code == 6 and "damaged" in info.value.message


def test_a_full_id_is_looked_up_without_a_prefix_scan(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    shas = git_log(repo)
    calls: list[bytes] = []
    real = DiskObjectStore.iter_prefix

    def counting(self: DiskObjectStore, prefix: bytes) -> Iterator[ObjectID]:
        calls.append(prefix)
        return real(self, prefix)

    monkeypatch.setattr(DiskObjectStore, "iter_prefix", counting)
    assert resolve_rev(repo.path, shas[2]) == shas[2]
    assert resolve_rev(repo.path, shas[2].upper()) == shas[2]
    assert calls == []
    assert resolve_rev(repo.path, shas[2][:8]) == shas[2] and calls == [shas[2][:8].encode()]


def test_a_full_id_that_is_not_a_commit_is_unknown(repo: GitRepo) -> None:
    tree = repo.git("rev-parse", "HEAD^{tree}").strip()
    for rev in ("0" * 40, tree):
        with pytest.raises(UsageError) as info:
            resolve_rev(repo.path, rev)
        assert info.value.exit_code == 2 and "unknown revision" in info.value.message


def test_a_hand_made_commit_with_our_trailer_but_no_file_lines_is_diffed(
    tmp_path: Path, git_exe: str
) -> None:
    """Our commits always list their files; one that carries ``Qmem-Op`` and lists none was
    written by hand, and its tree says what it changed."""
    r = GitRepo(tmp_path / "m")
    r.plain("base", {"user/pnpm.md": PNPM, "project/ci.md": CI})
    r.stage({}, ["project/ci.md"])
    commit = r.commit_message("forget: drop CI fact\n\nQmem-Op: forget\n")
    entry = read_log(r.path, limit=1)[0]
    assert entry.commit == commit and entry.op == "forget"
    assert [(c.status, c.path) for c in entry.info.changes] == [("D", "project/ci.md")]
    assert read_log(r.path, path="project/ci.md")[0].commit == commit
    assert file_history(r.path, "project/ci.md")[0].commit == commit


def test_log_path_and_history_agree_on_a_merge_made_with_c_git(
    tmp_path: Path, git_exe: str
) -> None:
    """A merge that kept one side's version of a file did not change it (git's history
    simplification); one that resolved a file to a new version did. Files and folders alike."""
    r = GitRepo(tmp_path / "m")
    r.plain("base", {"user/pnpm.md": PNPM})
    r.branch("side")
    r.checkout("side")
    side = r.plain("side adds s", {"reference/s.md": CI})
    r.checkout("main")
    main = r.plain("main adds m", {"reference/m.md": PNPM_2})
    merge = r.merge("side", "merge side")
    for path in ("reference/s.md", "reference/m.md", "reference"):
        logged = [e.commit for e in read_log(r.path, path=path)]
        theirs = r.git("log", "--format=%H", "--", path).split()
        assert logged == theirs, path
        if path.endswith(".md"):
            assert [e.commit for e in file_history(r.path, path)] == theirs
    assert merge not in [e.commit for e in read_log(r.path, path="reference/s.md")]
    assert merge in [e.commit for e in read_log(r.path, path="reference")]  # a new folder
    assert {side, main} <= {e.commit for e in read_log(r.path, path="reference")}


def test_mode_changes_show_as_git_shows_them(tmp_path: Path, git_exe: str) -> None:
    """``chmod +x`` committed with C git: alone, then with an edit, then a new executable file
    and its deletion; ``show`` and ``diff`` print git's ``old mode``/``new mode`` lines."""
    r = GitRepo(tmp_path / "m")
    r.plain("base", {"user/a.md": PNPM})
    path = r.root / "user" / "a.md"
    steps = []
    path.chmod(0o755)
    r.git("commit", "-qam", "mode only")
    steps.append("mode only")
    path.chmod(0o644)
    path.write_text(PNPM_2, encoding="utf-8")
    r.git("commit", "-qam", "mode and text")
    steps.append("mode and text")
    r.write("user/run.md", CI)
    (r.root / "user" / "run.md").chmod(0o755)
    r.git("add", "-A")
    r.git("commit", "-qm", "new executable")
    r.git("rm", "-q", "user/run.md")
    r.git("commit", "-qm", "executable gone")
    (r.root / "user" / "b.bin").write_bytes(b"bin\0ary")
    r.git("add", "-A")
    r.git("commit", "-qm", "binary")
    (r.root / "user" / "b.bin").chmod(0o755)
    r.git("commit", "-qam", "binary mode only")
    assert show_commit(r.path, "HEAD").diff_text == r.git("show", "--format=", "--no-color")
    r.git("rm", "-q", "user/b.bin")
    r.git("commit", "-qm", "binary gone")
    r.git("reset", "-q", "--hard", "HEAD~3")
    for back in range(4):
        rev = f"HEAD~{back}"
        assert show_commit(r.path, rev).diff_text == r.git("show", "--format=", "--no-color", rev)
    only = show_commit(r.path, "HEAD~3")
    assert only.diff_text.splitlines()[1:] == ["old mode 100644", "new mode 100755"]
    assert only.files[0].as_dict() == {
        "path": "user/a.md",
        "status": "M",
        "old_mode": "100644",
        "new_mode": "100755",
        "binary": False,
    }
    assert diff_revs(r.path, "HEAD~4", "HEAD~2").text == r.git(
        "diff", "--no-color", "HEAD~4", "HEAD~2"
    )
    assert "\x1b[1mold mode 100644\x1b[m" in colorize(only.diff_text)


def test_a_change_in_bytes_that_are_not_utf8_is_never_hidden(tmp_path: Path, git_exe: str) -> None:
    r = GitRepo(tmp_path / "m")
    path = r.root / "user" / "cafe.md"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"caf\xe9\n")
    r.git("add", "-A")
    r.git("commit", "-qm", "one")
    path.write_bytes(b"caf\xe8\n")  # decodes to the same text as before
    r.git("commit", "-qam", "two")
    shown = show_commit(r.path, "HEAD")
    assert shown.diff_text.endswith("Binary files a/user/cafe.md and b/user/cafe.md differ\n")
    assert diff_revs(r.path, "HEAD~1", "HEAD").text == shown.diff_text
