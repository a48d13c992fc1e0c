"""Issue 21 item 1: a secret never reaches the remote, and ``purge`` is the way out.

Real ``qmem-git`` processes, a bare remote, a token planted with C git (``commit --no-verify``),
and C git checking the result (``fsck --strict``, ``log -p`` on the remote).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clihelpers import assert_clean_repo, git, head, one_error_line, qmem, trailers
from servers import fsck_strict, init_bare

TOKEN = "ghp_" + "A1b2" * 9  # the shape of a GitHub PAT (spec §14 github-pat)


def memory_doc(title: str, body: str, kind: str = "reference") -> str:
    return f"---\nname: {title}\ndescription: {title}\ntype: {kind}\n---\n\n{body}\n"


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    return init_bare(tmp_path / "remote.git")


@pytest.fixture
def memory(tmp_path: Path, remote: Path) -> Path:
    root = tmp_path / "a" / "memory"
    assert qmem(root, "init").code == 0
    assert qmem(root, "remember", "The billing service deploys on Tuesdays").code == 0
    assert qmem(root, "remote", "add", "origin", str(remote)).code == 0
    assert qmem(root, "sync").code == 0
    return root


def plant(memory: Path, rel: str, text: str, message: str = "hand: deploy notes") -> str:
    """Commit ``rel`` the way a person would, skipping the pre-commit hook."""
    (memory / rel).parent.mkdir(parents=True, exist_ok=True)
    (memory / rel).write_text(text)
    git(memory, "add", rel)
    git(memory, "commit", "-q", "--no-verify", "-m", message)
    return head(memory)


def everything(repo: Path, rev: str = "main") -> str:
    """Every version of every file ``rev`` reaches, as C git shows it."""
    return git(repo, "log", "-p", "--format=%H %s", rev)


def test_a_forgotten_secret_is_never_pushed_and_purge_clears_the_way(
    tmp_path: Path, memory: Path, remote: Path
) -> None:
    pushed = git(remote, "rev-parse", "main").strip()
    planted = plant(memory, "reference/deploy.md", memory_doc("Deploy", f"Token {TOKEN}"))
    assert qmem(memory, "remember", "The ledger service pages the on-call team").code == 0
    refused = qmem(memory, "sync")
    assert refused.code == 1
    line = one_error_line(refused.err)
    assert "refusing to push: reference/deploy.md" in line and "github-pat" in line
    assert "purge --secrets" in line and TOKEN not in refused.err
    assert qmem(memory, "forget", "--id", "reference/deploy.md").code == 0
    dry_sync = qmem(memory, "sync", "--dry-run")  # a dry run says what the real one refuses
    assert dry_sync.code == 1 and "refusing to push" in one_error_line(dry_sync.err)
    again = qmem(memory, "sync")  # the bug: the commit holding the token went out here
    assert again.code == 1 and "refusing to push" in one_error_line(again.err)
    assert git(remote, "rev-parse", "main").strip() == pushed
    assert TOKEN not in everything(remote)

    old_tip = head(memory)
    dry = qmem(memory, "--json", "purge", "--secrets", "--dry-run")
    assert dry.code == 0, dry.err
    plan = dry.json()
    assert plan["rewritten_commits"] == 3 and plan["unpushed_commits"] == 3
    assert [(r["commit"], r["path"]) for r in plan["removed"]] == [(planted, "reference/deploy.md")]
    assert head(memory) == old_tip and TOKEN in everything(memory)

    done = qmem(memory, "purge", "--secrets")
    assert done.code == 0, done.err
    assert "Purged 1 file version(s) from 3 unpushed commit(s)" in done.out
    assert TOKEN not in everything(memory)
    assert_clean_repo(memory)
    assert qmem(memory, "index", "--check").code == 0
    assert trailers(memory)["Qmem-Op"] == "forget"  # messages and trailers kept
    subjects = git(memory, "log", "--format=%s", "main").splitlines()
    assert subjects[:3] == [
        "forget: forgot 1 entry by id",
        "remember: add The ledger service pages the on-call team (project)",
        "hand: deploy notes",
    ]
    (backup,) = git(memory, "for-each-ref", "--format=%(refname)", "refs/qmem/purged").split()
    assert git(memory, "rev-parse", backup).strip() == old_tip  # the old tip stays findable
    assert "ledger service" in (memory / "MEMORY.md").read_text()

    synced = qmem(memory, "sync")
    assert synced.code == 0, synced.err
    assert git(remote, "rev-parse", "main").strip() == head(memory)
    assert TOKEN not in everything(remote)
    fsck_strict(remote)
    other = tmp_path / "b" / "memory"
    cloned = qmem(other, "clone", str(remote))
    assert cloned.code == 0, cloned.err
    assert TOKEN not in git(other, "log", "-p", "--all")
    assert_clean_repo(other)


def test_purge_paths_keeps_every_other_memory_and_the_pushed_version(
    memory: Path, remote: Path
) -> None:
    shared = "reference/shared.md"
    plant(memory, shared, memory_doc("Shared", "The version everyone has"))
    assert qmem(memory, "sync").code == 0
    plant(memory, shared, memory_doc("Shared", "A local edit to take back"), "hand: edit")
    plant(memory, "reference/private.md", memory_doc("Private", "Not for the team"), "hand: add")
    assert qmem(memory, "remember", "--type", "project", "Releases ship on Fridays").code == 0
    before = head(memory)
    done = qmem(memory, "--json", "purge", "reference/private.md", shared)
    assert done.code == 0, done.err
    assert f"warning: {shared} is already on origin/main" in done.err
    assert sorted(r["path"] for r in done.json()["removed"]) == ["reference/private.md", shared]
    assert not (memory / "reference" / "private.md").exists()
    assert "The version everyone has" in (memory / shared).read_text()
    assert "Releases ship on Fridays" in (memory / "MEMORY.md").read_text()
    log = everything(memory)
    assert "Not for the team" not in log and "A local edit to take back" not in log
    assert "reference/private.md" not in git(memory, "show", "main:MEMORY.md")
    assert (
        git(memory, "rev-list", "--count", "main").strip()
        == git(memory, "rev-list", "--count", before).strip()
    )
    assert_clean_repo(memory)
    assert qmem(memory, "index", "--check").code == 0
    assert qmem(memory, "sync").code == 0
    fsck_strict(remote)


def test_purge_says_plainly_when_a_secret_already_left_the_machine(
    memory: Path, remote: Path
) -> None:
    plant(memory, "reference/deploy.md", memory_doc("Deploy", f"Token {TOKEN}"))
    git(memory, "push", "-q", "origin", "main")  # by hand: it reached the remote
    assert qmem(memory, "forget", "--id", "reference/deploy.md").code == 0
    result = qmem(memory, "purge", "--secrets")
    assert result.code == 1
    assert "reference/deploy.md is already on origin/main" in result.err
    assert "rotate the credential" in result.err and TOKEN not in result.err + result.out
    assert "Nothing to purge" in result.out
    assert_clean_repo(memory)


def test_a_fetch_refuses_a_secret_buried_under_a_later_commit(
    tmp_path: Path, memory: Path, remote: Path
) -> None:
    work = tmp_path / "plain"
    subprocess.run(["git", "clone", "-q", str(remote), str(work)], check=True)
    plant(work, "reference/deploy.md", memory_doc("Deploy", f"Token {TOKEN}"))
    git(work, "rm", "-q", "reference/deploy.md")
    git(work, "commit", "-q", "-m", "hand: remove the token again")
    git(work, "push", "-q", "origin", "main")
    before = head(memory)
    refused = qmem(memory, "sync")
    assert refused.code == 1
    line = one_error_line(refused.err)
    assert "refusing the remote's history: reference/deploy.md" in line
    assert "rotate it" in line and TOKEN not in refused.err
    assert head(memory) == before and TOKEN not in git(memory, "log", "-p", "--all")
    assert_clean_repo(memory)
    fresh = qmem(tmp_path / "c" / "memory", "clone", str(remote))
    assert fresh.code == 1 and "github-pat" in one_error_line(fresh.err)


def test_purge_needs_something_to_purge(memory: Path) -> None:
    bare = qmem(memory, "purge")
    assert bare.code == 2 and "--secrets" in one_error_line(bare.err)
    outside = qmem(memory, "purge", "../elsewhere.md")
    assert outside.code == 2 and "'..'" in one_error_line(outside.err)
    index = qmem(memory, "purge", "MEMORY.md")
    assert index.code == 2 and "rebuilt from the files" in one_error_line(index.err)
    nothing = qmem(memory, "purge", "--secrets")
    assert nothing.code == 0 and "Nothing to purge in the 0 commit(s)" in nothing.out


def test_purge_killed_at_random_moments_loses_no_memory(memory: Path, remote: Path) -> None:
    """kill -9 anywhere in a purge: the next writer's recovery and a second purge end with every
    memory kept, no token in ``main`` and a repository C git calls sound."""
    rng = random.Random(2121)
    plant(memory, "reference/deploy.md", memory_doc("Deploy", f"Token {TOKEN}"))
    for i in range(8):
        assert qmem(memory, "remember", f"Service number {i} listens on port {7000 + i}").code == 0
    kept = {p for p in tracked(memory) if p not in ("reference/deploy.md", "MEMORY.md")}
    start = time.monotonic()
    assert qmem(memory, "purge", "--secrets", "--dry-run").code == 0
    single = time.monotonic() - start
    for _ in range(4):
        proc = subprocess.Popen(
            [sys.executable, "-m", "qmem_git", "--memory-dir", str(memory), "purge", "--secrets"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(single * 0.3, single * 1.2))
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    final = qmem(memory, "purge", "--secrets")
    assert final.code == 0, final.err
    assert TOKEN not in everything(memory)
    assert kept <= set(tracked(memory))
    assert_clean_repo(memory)
    assert qmem(memory, "index", "--check").code == 0
    assert qmem(memory, "sync").code == 0 and TOKEN not in everything(remote)
    fsck_strict(remote)


def tracked(repo: Path) -> list[str]:
    return git(repo, "ls-tree", "-r", "--name-only", "HEAD").split()


def test_purge_rewrites_an_unpushed_merge_and_keeps_the_other_machines_memories(
    tmp_path: Path, memory: Path, remote: Path
) -> None:
    other = tmp_path / "b" / "memory"
    assert qmem(other, "clone", str(remote)).code == 0
    assert qmem(other, "remember", "Machine B knows the staging database host").code == 0
    assert qmem(other, "sync").code == 0
    plant(memory, "reference/deploy.md", memory_doc("Deploy", f"Token {TOKEN}"))
    merged = qmem(memory, "--json", "sync", "--no-push")  # merges here, pushes nothing
    assert merged.code == 0, merged.err
    assert merged.json()["merged"] is True
    assert len(git(memory, "log", "-1", "--format=%P").split()) == 2
    assert qmem(memory, "forget", "--id", "reference/deploy.md").code == 0
    done = qmem(memory, "purge", "--secrets")
    assert done.code == 0, done.err
    assert TOKEN not in everything(memory)
    merge = git(memory, "log", "--merges", "-1", "--format=%H %P").split()
    assert len(merge) == 3 and git(remote, "rev-parse", "main").strip() in merge[1:]
    assert trailers(memory, merge[0])["Qmem-Op"] == "merge"
    assert "staging database host" in (memory / "MEMORY.md").read_text()
    assert_clean_repo(memory)
    assert qmem(memory, "sync").code == 0 and qmem(other, "sync").code == 0
    assert head(other) == head(memory) and TOKEN not in everything(remote)
    fsck_strict(remote)
