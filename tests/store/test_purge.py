"""``store.purge`` on histories C git made: merges, a secret inherited through a merge, a
secret changed and then deleted, and no remote at all (every commit is unpushed)."""

from __future__ import annotations

import subprocess
from datetime import datetime, timezone
from pathlib import Path

from helpers_git import GitRepo, git_argv, memory_text

from qmem_git.core.paths import Layout
from qmem_git.store.purge import PurgeRequest, purge_locked

TOKEN_A = "ghp_" + "K3m4" * 9
TOKEN_B = "glpat-" + "x" * 20
NOW = datetime(2026, 5, 1, tzinfo=timezone.utc)


def layout(repo: GitRepo, tmp_path: Path) -> Layout:
    return Layout(repo.path, str(tmp_path / "state"), "explicit", "")


def test_secrets_are_taken_out_of_every_branch_of_an_unpushed_history(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "memory")
    repo.plain("start", {"user/a.md": memory_text("user", "A", "Alpha fact")})
    repo.git("checkout", "-q", "-b", "side")
    leak = memory_text("reference", "Keys", f"The key is {TOKEN_A}")
    repo.plain("side: key", {"reference/keys.md": leak})
    repo.git("checkout", "-q", "main")
    repo.plain("main: b", {"user/b.md": memory_text("user", "B", "Beta fact")})
    repo.git("merge", "-q", "--no-edit", "side")
    repo.plain("edit key", {"reference/keys.md": leak.replace(TOKEN_A, TOKEN_B)})
    repo.plain("more", {"user/c.md": memory_text("user", "C", "Gamma fact")})
    old_head = repo.head()

    result = purge_locked(
        layout(repo, tmp_path), PurgeRequest(secrets=True), now=NOW, dry_run=False
    )

    assert result.unpushed == 6 and result.rewritten == 4
    assert sorted(r.path for r in result.removals) == ["reference/keys.md"] * 2
    log = repo.git("log", "-p", "main")
    assert TOKEN_A not in log and TOKEN_B not in log
    assert repo.git("rev-parse", result.backup or "").strip() == old_head
    merge = repo.git("log", "--merges", "--format=%P", "main").split()
    assert len(merge) == 2
    assert repo.git("log", "--format=%s", "main").splitlines()[:2] == ["more", "edit key"]
    tip = repo.git("ls-tree", "-r", "--name-only", "HEAD").split()
    assert tip == ["MEMORY.md", "user/a.md", "user/b.md", "user/c.md"]
    assert repo.git("status", "--porcelain") == ""
    subprocess.run([*git_argv(repo.path), "fsck", "--strict"], check=True, capture_output=True)


def test_a_dry_run_writes_nothing_and_a_clean_history_is_left_alone(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "memory")
    repo.plain("start", {"user/a.md": memory_text("user", "A", "Alpha fact")})
    repo.plain("key", {"reference/k.md": memory_text("reference", "K", f"Key {TOKEN_A}")})
    head = repo.head()
    objects = repo.git("count-objects").split()[0]
    dry = purge_locked(layout(repo, tmp_path), PurgeRequest(secrets=True), now=NOW, dry_run=True)
    assert dry.rewritten == 1 and [r.path for r in dry.removals] == ["reference/k.md"]
    assert repo.head() == head and repo.git("count-objects").split()[0] == objects
    clean = purge_locked(
        layout(repo, tmp_path), PurgeRequest(paths=("project",)), now=NOW, dry_run=False
    )
    assert clean.rewritten == 0 and repo.head() == head and clean.backup is None
