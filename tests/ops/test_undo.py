"""plan_undo on C-git-built histories; the plan is applied with C git and checked with git diff."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from clihelpers import assert_clean_repo, git, head, one_error_line, qmem, trailers
from helpers_git import GitRepo, git_argv, memory_text

from qmem_git.errors import NothingToDo, QmemError
from qmem_git.ops.undo import UNDOES_TRAILER, plan_undo, undo_target
from qmem_git.store.history import History, read_log

PNPM = memory_text("user", "pnpm", "Use pnpm for installs")
PNPM_2 = memory_text("user", "pnpm", "Use pnpm for installs", "Run pnpm -r for workspaces")
CI = memory_text("project", "ci", "CI runs on GitHub Actions")


@pytest.fixture
def repo(tmp_path: Path, git_exe: str) -> GitRepo:
    r = GitRepo(tmp_path / "memory")
    r.op("remember", "add pnpm", {"user/pnpm.md": PNPM, "MEMORY.md": "- pnpm\n"})
    r.op(
        "extract",
        "2 memories",
        {"project/ci.md": CI, "user/pnpm.md": PNPM_2, "MEMORY.md": "- pnpm\n- ci\n"},
        topics=("project", "user"),
        added=2,
    )
    return r


def memory_changes(r: GitRepo, *revs: str) -> set[tuple[str, str]]:
    return {c for c in r.name_status(*revs) if c[1] != "MEMORY.md"}


def test_undo_last_operation(repo: GitRepo) -> None:
    extract = repo.head()
    cs = plan_undo(repo.path)
    assert cs.op == "undo"
    assert cs.subject == f"undo {extract[:7]} (extract: 2 memories)"
    assert cs.trailers == ((UNDOES_TRAILER, extract),)
    assert dict(cs.writes) == {"user/pnpm.md": PNPM}
    assert cs.deletes == ("project/ci.md",)
    assert "MEMORY.md" not in cs.paths()
    assert cs.topics == ("project", "user") and (cs.added, cs.removed) == (0, 2)
    repo.apply(cs)
    assert memory_changes(repo, "HEAD~2", "HEAD") == set()
    assert read_log(repo.path)[0].info.trailers[-1] == (UNDOES_TRAILER, extract)


def test_undo_twice_is_empty(repo: GitRepo) -> None:
    repo.apply(plan_undo(repo.path))
    assert plan_undo(repo.path, "HEAD~1").is_empty


def test_undo_of_undo_redoes(repo: GitRepo) -> None:
    repo.apply(plan_undo(repo.path))
    repo.apply(plan_undo(repo.path))
    assert memory_changes(repo, "HEAD~2", "HEAD") == set()


def test_later_change_to_same_file_refuses_without_force(repo: GitRepo) -> None:
    extract = repo.git("rev-parse", "--short=7", "HEAD").strip()
    later = repo.op("dream", "tidy ci", {"project/ci.md": CI + "\nAlso lint.\n"})
    with pytest.raises(QmemError) as info:
        plan_undo(repo.path, extract)
    error = info.value
    assert error.exit_code == 1 and "--force" in error.hint
    assert later[:7] in error.message and "dream: tidy ci" in error.message
    assert "project/ci.md" in error.message
    forced = plan_undo(repo.path, extract, force=True)
    assert forced.deletes == ("project/ci.md",) and dict(forced.writes) == {"user/pnpm.md": PNPM}


def test_later_change_to_other_files_does_not_block(repo: GitRepo) -> None:
    repo.op("remember", "docs", {"reference/docs.md": memory_text("reference", "d", "Docs")})
    cs = plan_undo(repo.path, "HEAD~1")
    assert cs.deletes == ("project/ci.md",)


def test_later_regenerated_index_does_not_block(repo: GitRepo) -> None:
    repo.op("index", "rebuild", {"MEMORY.md": "- rebuilt\n"})
    assert not plan_undo(repo.path, "HEAD~1").is_empty


def test_undo_root_commit_deletes_what_it_added(tmp_path: Path, git_exe: str) -> None:
    r = GitRepo(tmp_path / "m")
    root = r.op("remember", "add pnpm", {"user/pnpm.md": PNPM, "MEMORY.md": "- pnpm\n"})
    cs = plan_undo(r.path, root)
    assert cs.deletes == ("user/pnpm.md",) and not cs.writes
    assert cs.removed == 1 and cs.topics == ("user",)


def test_undo_foreign_commit(repo: GitRepo) -> None:
    repo.plain("hand edit", {"user/pnpm.md": PNPM_2 + "\nEdited.\n"})
    cs = plan_undo(repo.path)
    assert dict(cs.writes) == {"user/pnpm.md": PNPM_2}


def test_undo_merge_is_refused(repo: GitRepo) -> None:
    repo.branch("side", "HEAD~1")
    repo.op("remember", "side", {"user/side.md": memory_text("user", "side", "Side")})
    repo.checkout("main")
    repo.op("remember", "main", {"user/main.md": memory_text("user", "main", "Main")})
    merge = repo.merge("side", "merge side")
    with pytest.raises(QmemError, match="merge") as info:
        plan_undo(repo.path)
    assert merge[:7] in info.value.message and info.value.hint


def test_undo_in_empty_repo(tmp_path: Path, git_exe: str) -> None:
    with pytest.raises(NothingToDo):
        plan_undo(GitRepo(tmp_path / "e").path)


# -- what undo can and cannot write -------------------------------------------------------------


def commit_files(r: GitRepo, subject: str, files: dict[str, bytes]) -> str:
    """A commit by another tool of exact bytes (not necessarily UTF-8 text)."""
    for rel, data in files.items():
        path = r.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    r.git("add", "-A")
    return r.commit_message(subject + "\n")


NUL_DOC = PNPM.encode() + b"\x00binary tail\n"
LATIN1 = memory_text("user", "cafe", "Caf\u00e9 opens at 8").encode("latin-1")


def test_undo_deletes_a_binary_file_it_added(repo: GitRepo) -> None:
    commit_files(repo, "add blob", {"user/blob.md": NUL_DOC})
    cs = plan_undo(repo.path)
    assert cs.deletes == ("user/blob.md",) and not cs.writes


def test_undo_restores_text_with_a_nul_byte_exactly(repo: GitRepo) -> None:
    commit_files(repo, "add blob", {"user/blob.md": NUL_DOC})
    repo.plain("edit blob", {"user/blob.md": PNPM})
    cs = plan_undo(repo.path)
    assert cs.writes["user/blob.md"].encode("utf-8") == NUL_DOC
    repo.apply(cs)
    assert (repo.root / "user/blob.md").read_bytes() == NUL_DOC
    assert repo.git("diff", "HEAD~2", "HEAD", "--", "user/blob.md") == ""


@pytest.mark.parametrize("force", [False, True])
def test_undo_refuses_a_version_that_is_not_utf8(repo: GitRepo, force: bool) -> None:
    before = commit_files(repo, "add latin-1", {"user/cafe.md": LATIN1})
    commit_files(repo, "edit latin-1", {"user/cafe.md": LATIN1 + b"Ferm\xe9 lundi\n"})
    with pytest.raises(QmemError) as info:
        plan_undo(repo.path, force=force)
    assert info.value.exit_code == 1
    assert "user/cafe.md" in info.value.message and "not UTF-8" in info.value.message
    assert f"git checkout {before[:12]} -- user/cafe.md" in info.value.hint


def test_undo_refuses_a_symlink_version(repo: GitRepo) -> None:
    (repo.root / "user" / "link.md").symlink_to("pnpm.md")
    repo.git("add", "-A")
    repo.commit_message("add link\n")
    repo.delete("user/link.md")
    repo.plain("replace link", {"user/link.md": PNPM})
    with pytest.raises(QmemError, match=r"user/link\.md it replaced .*symlink"):
        plan_undo(repo.path)


def test_undo_leaves_non_memory_paths_alone(repo: GitRepo) -> None:
    added = {
        "user/x.md": memory_text("user", "x", "X"),
        "notes.txt": "scratch\n",
        ".cfg/y.md": "config\n",
        "user/MEMORY.md": "nested\n",
        "MEMORY.md": "- x\n",
    }
    repo.plain("tool commit", added)
    cs = plan_undo(repo.path)
    # a dot-folder's *.md is a memory (Qwen Code 0.24 reads it); notes.txt is not
    assert cs.deletes == (".cfg/y.md", "user/MEMORY.md", "user/x.md") and not cs.writes
    assert cs.notes == ("left notes.txt alone: not a memory file (undo it with git)",)


def test_undo_leaves_a_name_with_a_newline_alone(repo: GitRepo) -> None:
    hostile = "user/a.md\nM user/pnpm.md"
    commit_files(repo, "hostile name", {hostile: PNPM.encode()})
    cs = plan_undo(repo.path)
    assert cs.is_empty
    assert cs.notes == (
        "left user/a.md\\nM user/pnpm.md alone: not a memory file (undo it with git)",
    )


# -- the "changed later" check reads trees -------------------------------------------------------


def side_branch_merge(r: GitRepo, side_text: str | None = None) -> tuple[str, str]:
    """remember on main, a C-git commit on ``side``, remember on main, merge: (side, merge).

    ``side_text``: the merge resolves project/side.md to this instead of taking side's version.
    """
    r.branch("side")
    side = r.plain("side note", {"project/side.md": memory_text("project", "side", "Side")})
    r.checkout("main")
    r.op("remember", "main", {"user/main.md": memory_text("user", "main", "Main")})
    r.git("merge", "-q", "--no-ff", "--no-commit", "side")
    if side_text is not None:
        r.write("project/side.md", side_text)
        r.git("add", "-A")
    return side, r.commit_message("merge side\n")


def test_merge_that_took_one_side_does_not_block(repo: GitRepo) -> None:
    side, _ = side_branch_merge(repo)
    assert repo.git("rev-parse", "HEAD^2").strip() == side
    cs = plan_undo(repo.path, "HEAD^2")
    assert cs.deletes == ("project/side.md",) and not cs.writes


def test_merge_that_resolved_the_file_blocks(repo: GitRepo) -> None:
    _, merge = side_branch_merge(repo, memory_text("project", "side", "Side", "Resolved"))
    with pytest.raises(QmemError) as info:
        plan_undo(repo.path, "HEAD^2")
    assert merge[:7] in info.value.message and "project/side.md" in info.value.message


def test_amended_commit_blocks_by_its_tree(repo: GitRepo) -> None:
    repo.op("remember", "docs", {"reference/docs.md": memory_text("reference", "d", "Docs")})
    repo.write("project/ci.md", CI + "\nEdited by hand.\n")
    repo.git("commit", "-q", "-a", "--amend", "--no-edit")
    assert "project/ci.md" not in repo.git("log", "-1", "--format=%B")  # the stale message
    with pytest.raises(QmemError) as info:
        plan_undo(repo.path, "HEAD~1")
    assert "project/ci.md" in info.value.message and "remember: docs" in info.value.message


def test_file_lines_that_lie_do_not_hide_a_later_change(repo: GitRepo) -> None:
    """A message with our trailers and equal signatures, listing a path it did not change."""
    extract = repo.head()
    repo.write("project/ci.md", CI + "\nAlso lint.\n")
    repo.git("add", "-A")
    repo.commit_message("dream: tidy\n\nM reference/other.md\n\nQmem-Op: dream\n")
    with pytest.raises(QmemError, match=r"dream: tidy.*project/ci\.md"):
        plan_undo(repo.path, extract)


# -- uncommitted hand edits ------------------------------------------------------------------------


def test_hand_edit_of_an_undone_file_blocks_unless_forced(repo: GitRepo) -> None:
    edited = CI + "\nEdited by hand.\n"
    repo.write("project/ci.md", edited)
    with pytest.raises(QmemError, match=r"project/ci\.md changed since \(uncommitted") as info:
        plan_undo(repo.path)
    assert "--force" in info.value.hint
    forced = plan_undo(repo.path, force=True)
    assert forced.deletes == ("project/ci.md",)
    # entries counted from the text recovery commits first: ci.md's 2 (1 at HEAD) + pnpm's 1
    assert forced.removed == 3


def test_held_back_hand_edit_is_not_counted(repo: GitRepo) -> None:
    """Recovery holds back a file it must not commit (a credential in it), so HEAD keeps its
    version and undo plans against HEAD."""
    repo.write("project/ci.md", "token ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8\n")
    cs = plan_undo(repo.path)
    assert cs.deletes == ("project/ci.md",) and dict(cs.writes) == {"user/pnpm.md": PNPM}


def test_hand_edit_of_another_file_does_not_block(repo: GitRepo) -> None:
    repo.write("reference/docs.md", memory_text("reference", "d", "Docs"))
    assert plan_undo(repo.path).deletes == ("project/ci.md",)


def test_undo_target_names_the_commit_now(repo: GitRepo) -> None:
    extract = repo.head()
    assert undo_target(repo.path) == extract
    assert undo_target(repo.path, "HEAD~1") == repo.git("rev-parse", "HEAD~1").strip()
    repo.op("recover", "hand edit", {"user/x.md": memory_text("user", "x", "X")})
    assert plan_undo(repo.path, extract).subject.startswith(f"undo {extract[:7]} (extract")
    with pytest.raises(NothingToDo):
        undo_target(GitRepo(repo.root.parent / "empty").path)


# -- through the CLI: recovery runs first, --dry-run must plan what the real run does -----------


@pytest.fixture
def memory(tmp_path: Path, git_exe: str) -> Path:
    root = tmp_path / "state" / "memory"
    assert qmem(root, "init").code == 0
    return root


def remember(memory: Path, *args: str) -> tuple[str, str]:
    """(commit, path of the memory file) of one ``remember``."""
    result = qmem(memory, "--json", "remember", *args)
    assert result.code == 0, result.err
    return head(memory), result.json()["writes"][0]


def hand_commit(memory: Path, *args: str) -> str:
    git(memory, "add", "-A")
    git(memory, "commit", "-q", "--no-verify", *args)
    return head(memory)


def undone(memory: Path) -> str:
    return trailers(memory)[UNDOES_TRAILER]


def test_cli_undo_with_a_hand_edit_reverts_the_last_operation(memory: Path) -> None:
    _, terse = remember(memory, "I prefer terse responses in code reviews")
    billing, freeze = remember(memory, "--type", "project", "The billing freeze starts March 5")
    with (memory / terse).open("a", encoding="utf-8") as handle:
        handle.write("Also the payments team must sign off\n")
    dry = qmem(memory, "--json", "undo", "--dry-run")
    assert dry.code == 0 and dry.json()["deletes"] == [freeze] and not dry.json()["writes"]
    assert billing[:7] in dry.json()["subject"]
    real = qmem(memory, "--json", "undo")
    assert real.code == 0, real.err
    assert real.json()["deletes"] == dry.json()["deletes"] and undone(memory) == billing
    assert git(memory, "log", "-1", "--format=%s", "HEAD~1").startswith("recover:")
    assert "payments team must sign off" in (memory / terse).read_text(encoding="utf-8")
    assert not (memory / freeze).exists()
    assert_clean_repo(memory)


def test_cli_undo_head_tilde_is_not_shifted_by_recovery(memory: Path) -> None:
    remember(memory, "I prefer terse responses")
    second, _ = remember(memory, "--type", "project", "The billing freeze starts March 5")
    _, third = remember(memory, "--type", "reference", "Dashboards live at grafana.internal")
    (memory / third).write_text((memory / third).read_text() + "More.\n", encoding="utf-8")
    assert second[:7] in qmem(memory, "--json", "undo", "HEAD~1", "--dry-run").json()["subject"]
    assert qmem(memory, "undo", "HEAD~1").code == 0
    assert undone(memory) == second
    assert_clean_repo(memory)


def test_cli_hand_edit_of_the_undone_file_refuses_in_both_runs(memory: Path) -> None:
    first, terse = remember(memory, "I prefer terse responses")
    edited = (memory / terse).read_text(encoding="utf-8") + "Also in commit messages.\n"
    (memory / terse).write_text(edited, encoding="utf-8")
    for args in (("--dry-run",), ()):
        result = qmem(memory, "undo", *args)
        assert result.code == 1 and terse in one_error_line(result.err)
        assert "--force" in result.err
    assert (memory / terse).read_text(encoding="utf-8") == edited  # kept, committed by recovery
    assert git(memory, "log", "-1", "--format=%s").startswith("recover:")
    assert qmem(memory, "undo", first, "--force").code == 0
    assert not (memory / terse).exists() and undone(memory) == first
    assert_clean_repo(memory)


def test_cli_undo_of_a_binary_file_deletes_it(memory: Path) -> None:
    remember(memory, "I prefer terse responses")
    (memory / "user" / "blob.md").write_bytes(NUL_DOC)
    added = hand_commit(memory, "-m", "add blob")
    result = qmem(memory, "undo")
    assert result.code == 0, result.err
    assert undone(memory) == added and not (memory / "user" / "blob.md").exists()
    assert_clean_repo(memory)


def test_cli_undo_restores_text_with_a_nul_byte_exactly(memory: Path) -> None:
    remember(memory, "I prefer terse responses")
    blob = memory / "user" / "blob.md"
    blob.write_bytes(NUL_DOC)
    hand_commit(memory, "-m", "add blob")
    blob.write_text(PNPM, encoding="utf-8")
    edit = hand_commit(memory, "-am", "edit blob")
    result = qmem(memory, "undo")
    assert result.code == 0, result.err
    assert undone(memory) == edit and blob.read_bytes() == NUL_DOC
    assert git(memory, "diff", "HEAD~2", "HEAD", "--", "user/blob.md") == ""
    assert_clean_repo(memory)


def test_cli_undo_refuses_latin1_and_writes_nothing(memory: Path) -> None:
    remember(memory, "I prefer terse responses")
    cafe = memory / "user" / "cafe.md"
    cafe.write_bytes(LATIN1)
    hand_commit(memory, "-m", "add cafe")
    cafe.write_bytes(LATIN1 + b"Ferm\xe9 lundi\n")
    edit = hand_commit(memory, "-m", "edit cafe")
    for args in (("--dry-run",), (), ("--force",)):
        result = qmem(memory, "undo", *args)
        assert result.code == 1 and "user/cafe.md" in one_error_line(result.err)
        assert "git checkout" in result.err
    assert head(memory) == edit and cafe.read_bytes() == LATIN1 + b"Ferm\xe9 lundi\n"
    assert_clean_repo(memory)


def test_cli_plan_and_run_agree_on_a_non_memory_file(memory: Path) -> None:
    remember(memory, "I prefer terse responses")
    (memory / "project").mkdir()
    (memory / "project" / "ci.md").write_text(CI, encoding="utf-8")
    (memory / "notes.txt").write_text("scratch\n", encoding="utf-8")
    added = hand_commit(memory, "-m", "ci and notes")
    dry = qmem(memory, "--json", "undo", "--dry-run")
    assert dry.code == 0 and dry.json()["deletes"] == ["project/ci.md"]
    assert "notes.txt" in dry.err and "notes.txt" in dry.json()["notes"][0]
    real = qmem(memory, "--json", "undo")
    assert real.code == 0, real.err
    assert real.json()["deletes"] == ["project/ci.md"] and undone(memory) == added
    assert (memory / "notes.txt").read_text() == "scratch\n" and not (memory / "project").exists()
    assert_clean_repo(memory)


def test_cli_undo_of_a_side_branch_commit_behind_a_merge(memory: Path) -> None:
    remember(memory, "I prefer terse responses")
    git(memory, "checkout", "-q", "-b", "side")
    (memory / "project").mkdir()
    (memory / "project" / "side.md").write_text(CI, encoding="utf-8")
    side = hand_commit(memory, "-m", "side note")
    git(memory, "checkout", "-q", "main")
    remember(memory, "--type", "reference", "Dashboards live at grafana.internal")
    git(memory, "merge", "-q", "--no-edit", "--no-verify", "side")
    result = qmem(memory, "undo", "HEAD^2")
    assert result.code == 0, result.err
    assert undone(memory) == side and not (memory / "project" / "side.md").exists()
    assert_clean_repo(memory)


def test_cli_amended_commit_blocks_undo_and_shows_in_history(memory: Path) -> None:
    first, terse = remember(memory, "I prefer terse responses")
    remember(memory, "--type", "reference", "Dashboards live at grafana.internal")
    edited = (memory / terse).read_text(encoding="utf-8") + "Also in commit messages.\n"
    (memory / terse).write_text(edited, encoding="utf-8")
    # an amend seconds later (pinned: in the same second the signatures still match, see
    # store.history._trusted; undo reads trees and does not depend on it)
    later = str(int(git(memory, "log", "-1", "--format=%ct")) + 5)
    env = {"GIT_COMMITTER_DATE": f"{later} +0000"}
    subprocess.run(
        [*git_argv(str(memory)), "commit", "-q", "-a", "--amend", "--no-edit", "--no-verify"],
        env={**os.environ, **env},
        check=True,
    )
    amended = head(memory)
    for args in (("--dry-run",), ()):
        result = qmem(memory, "undo", "HEAD~1", *args)
        assert result.code == 1 and amended[:7] in one_error_line(result.err)
    assert (memory / terse).read_text(encoding="utf-8") == edited and head(memory) == amended
    history = qmem(memory, "--json", "history", terse).json()
    assert [e["commit"] for e in history] == [amended, first]
    assert_clean_repo(memory)


def test_plan_undo_takes_undo_targets_id_without_resolving_it_again(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    extract = undo_target(repo.path)
    resolved: list[str] = []
    real = History.resolve

    def recording(self: History, rev: str) -> str:
        resolved.append(rev)
        return real(self, rev)

    monkeypatch.setattr(History, "resolve", recording)
    assert plan_undo(repo.path, extract).trailers == ((UNDOES_TRAILER, extract),)
    assert resolved == []
    assert plan_undo(repo.path, "HEAD").trailers == ((UNDOES_TRAILER, extract),)
    assert resolved == ["HEAD"]
