"""Issue 21 item 4: two spellings of one name never wedge sync.

Machine B snapshots ``user/Notes.md``, machine C ``user/notes.md``; both sync through a bare
remote. Real ``qmem-git`` processes, C git checking each repository and the remote.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from clihelpers import assert_clean_repo, git, head, one_error_line, qmem, trailers
from servers import fsck_strict, init_bare

from qmem_git.core.names import find_case_collisions


def note_doc(title: str, body: str) -> str:
    return f"---\nname: {title}\ndescription: {title}\ntype: user\n---\n\n{body}\n"


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    remote = init_bare(tmp_path / "remote.git")
    first = tmp_path / "a" / "memory"
    assert qmem(first, "init").code == 0
    assert qmem(first, "remember", "--type", "user", "I review memory changes weekly").code == 0
    assert qmem(first, "init", "--remote", str(remote)).code == 0
    return remote


def machine(tmp_path: Path, name: str, remote: Path) -> Path:
    root = tmp_path / name / "memory"
    cloned = qmem(root, "clone", str(remote))
    assert cloned.code == 0, cloned.err
    return root


def remote_paths(remote: Path) -> list[str]:
    return git(remote, "ls-tree", "-r", "--name-only", "main").split()


def test_two_machines_two_spellings_merge_into_two_names(tmp_path: Path, remote: Path) -> None:
    b, c = machine(tmp_path, "b", remote), machine(tmp_path, "c", remote)
    (b / "user" / "Notes.md").write_text(note_doc("Notes from B", "B prefers tabs"))
    (c / "user" / "notes.md").write_text(note_doc("Notes from C", "C prefers spaces"))
    assert qmem(b, "snapshot").code == 0 and qmem(c, "snapshot").code == 0
    assert qmem(b, "sync").code == 0
    merged = qmem(c, "--json", "sync")
    assert merged.code == 0, merged.err
    data = merged.json()
    assert data["pushed"] is True
    assert [n["kind"] for n in data["conflicts_reconciled"]] == ["renamed-case-clash"]
    assert qmem(b, "sync").code == 0 and qmem(c, "sync").code == 0
    assert head(b) == head(c) == git(remote, "rev-parse", "main").strip()
    assert find_case_collisions(remote_paths(remote)) == []
    for root in (b, c):
        assert (root / "user" / "Notes.md").read_text() == note_doc(
            "Notes from B", "B prefers tabs"
        )
        assert (root / "user" / "notes-2.md").read_text() == note_doc(
            "Notes from C", "C prefers spaces"
        )
        assert qmem(root, "index", "--check").code == 0
        assert_clean_repo(root)
    fsck_strict(remote)


def test_a_history_holding_both_spellings_is_repaired_by_one_commit(
    tmp_path: Path, remote: Path
) -> None:
    c = machine(tmp_path, "c", remote)
    (c / "user" / "Notes.md").write_text(note_doc("Upper", "Written as Notes.md"))
    (c / "user" / "notes.md").write_text(note_doc("Lower", "Written as notes.md"))
    git(c, "add", "user")
    git(c, "commit", "-q", "--no-verify", "-m", "hand: two spellings")  # what the old merge made
    before = git(remote, "rev-parse", "main").strip()
    refused = qmem(c, "sync")
    assert refused.code == 1
    line = one_error_line(refused.err)
    assert "user/notes.md" in line and "user/Notes.md" in line
    assert "qmem-git repair" in line
    assert git(remote, "rev-parse", "main").strip() == before

    dry = qmem(c, "repair", "--dry-run")
    assert (
        dry.code == 0 and "write  user/notes-2.md" in dry.out and "delete user/notes.md" in dry.out
    )
    fixed = qmem(c, "repair")
    assert fixed.code == 0, fixed.err
    assert trailers(c)["Qmem-Op"] == "repair"
    assert trailers(c)["Qmem-Renamed"] == "user/notes.md -> user/notes-2.md"
    assert git(c, "rev-list", "--count", "HEAD~1..HEAD").strip() == "1"
    assert (c / "user" / "Notes.md").read_text() == note_doc("Upper", "Written as Notes.md")
    assert (c / "user" / "notes-2.md").read_text() == note_doc("Lower", "Written as notes.md")
    assert qmem(c, "index", "--check").code == 0
    assert_clean_repo(c)
    assert qmem(c, "repair").out.strip() == "Nothing to change."

    synced = qmem(c, "sync")  # the older commit that holds both is never checked out again
    assert synced.code == 0, synced.err
    assert git(remote, "rev-parse", "main").strip() == head(c)
    assert find_case_collisions(remote_paths(remote)) == []
    d = machine(tmp_path, "d", remote)
    assert sorted(p.name for p in (d / "user").iterdir()) == sorted(
        p.name for p in (c / "user").iterdir()
    )
    assert_clean_repo(d)
    fsck_strict(remote)


def test_a_remote_tip_holding_both_spellings_is_refused_with_the_command(
    tmp_path: Path, remote: Path
) -> None:
    import subprocess

    work = tmp_path / "plain"
    subprocess.run(["git", "clone", "-q", str(remote), str(work)], check=True)
    (work / "user" / "Caf\u00e9.md").write_text(note_doc("Composed", "NFC"))
    (work / "user" / "Cafe\u0301.md").write_text(note_doc("Decomposed", "NFD"))
    git(work, "add", "user")
    git(work, "commit", "-q", "-m", "hand: two normalisations")
    git(work, "push", "-q", "origin", "main")
    fresh = qmem(tmp_path / "e" / "memory", "clone", str(remote))
    assert fresh.code == 1
    line = one_error_line(fresh.err)
    assert "case-insensitive" in line and "qmem-git repair" in line


def test_a_snapshot_never_commits_a_second_normalisation_of_a_name(tmp_path: Path) -> None:
    root = tmp_path / "s" / "memory"
    assert qmem(root, "init").code == 0
    composed, decomposed = "caf\u00e9.md", "cafe\u0301.md"
    (root / "user").mkdir(exist_ok=True)
    (root / "user" / composed).write_text(note_doc("Composed", "Written first"))
    assert qmem(root, "snapshot").code == 0
    (root / "user" / decomposed).write_text(note_doc("Decomposed", "Written second"))
    run = qmem(root, "snapshot")
    assert run.code == 0 and "path-collision" in run.err
    assert (
        git(root, "ls-tree", "-r", "--name-only", "-z", "HEAD")
        .split("\0")
        .count(f"user/{composed}")
        == 1
    )
    assert f"user/{decomposed}" not in git(root, "ls-tree", "-r", "--name-only", "-z", "HEAD")
    assert (root / "user" / decomposed).exists()  # held back where it is, not moved
    git(root, "fsck", "--strict")
