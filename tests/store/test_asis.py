"""``store.asis``: the writer-lock tenure a sync of Claude Code's folder takes.

Real repositories, checked with C git; a killed sync is staged as it leaves things (its files
half written, its journal in the repository), since the kill itself is covered for every store
by ``test_sync_crash``.
"""

from __future__ import annotations

import os
import subprocess
from contextlib import AbstractContextManager
from datetime import datetime, timezone
from pathlib import Path

from helpers_git import git_argv

from qmem_git.core.paths import Layout
from qmem_git.ops.claude import snapshot_claude
from qmem_git.settings import build_settings
from qmem_git.store import journal
from qmem_git.store.asis import AsIsResult, as_is_tenure
from qmem_git.store.recovery import RecoveryReport
from qmem_git.store.repo import Identity, blob_id

NOW = datetime(2026, 1, 2, tzinfo=timezone.utc)
WHO = Identity("Test Author", "author@example.com")
BUILD = b"---\nname: build\ndescription: pnpm\nmetadata: \n  type: project\n---\n\nUse pnpm.\n"
INDEX = "- [Build](build.md) — pnpm\n".encode()


def claude_store(tmp_path: Path) -> Layout:
    project = tmp_path / "shop"
    project.mkdir()
    settings = build_settings(dict(os.environ), project=str(project), agent="claude")
    root = Path(settings.layout.memory_root)
    root.mkdir(parents=True)
    (root / "build.md").write_bytes(BUILD)
    (root / "MEMORY.md").write_bytes(INDEX)
    assert snapshot_claude(settings, NOW).commit is not None
    return settings.layout


def git(layout: Layout, *args: str) -> str:
    argv = [*git_argv(layout.memory_root), *args]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def tenure(
    layout: Layout, recover: bool, snapshots: list[AsIsResult]
) -> AbstractContextManager[RecoveryReport | None]:
    return as_is_tenure(
        layout,
        identity=WHO,
        host="testhost",
        now=NOW,
        lock_timeout=5,
        recover=recover,
        snapshots=snapshots,
    )


def test_a_killed_sync_is_put_back_and_only_claudes_own_change_committed(
    tmp_path: Path,
) -> None:
    layout = claude_store(tmp_path)
    root = Path(layout.memory_root)
    head = git(layout, "rev-parse", "HEAD").strip()
    fetched = BUILD.replace(b"Use pnpm.", b"Use pnpm 9.")  # what the killed sync had written
    (root / "build.md").write_bytes(fetched)
    journal.begin(layout.git_dir, journal.Journal("sync", head, {"build.md": blob_id(fetched)}, []))
    (root / "style.md").write_bytes(BUILD.replace(b"build", b"style"))  # Claude, meanwhile
    snapshots: list[AsIsResult] = []
    with tenure(layout, True, snapshots) as report:
        assert report is not None
        assert report.warnings[0] == "an interrupted sync was undone: put back build.md"
        assert report.warnings[1].startswith("committed 1 changed file(s) as ")
    assert (root / "build.md").read_bytes() == BUILD
    assert (root / "MEMORY.md").read_bytes() == INDEX  # Claude's, never rebuilt
    assert [change.path for change in snapshots[0].changes] == ["style.md"]
    assert git(layout, "show", "--name-status", "--format=", "HEAD").split() == ["A", "style.md"]
    assert git(layout, "status", "--porcelain") == ""
    assert journal.read(layout.git_dir) is None


def test_a_tenure_without_recovery_commits_nothing_and_a_secret_stays_out(
    tmp_path: Path,
) -> None:
    layout = claude_store(tmp_path)
    root = Path(layout.memory_root)
    key = "AKIA" + "IOSFODNN7" + "EXAMPLE"
    (root / "cloud.md").write_bytes(BUILD.replace(b"Use pnpm.", f"Key {key}.".encode()))
    head = git(layout, "rev-parse", "HEAD")
    snapshots: list[AsIsResult] = []
    with tenure(layout, False, snapshots) as report:
        assert report is None
    assert snapshots == [] and git(layout, "rev-parse", "HEAD") == head
    with tenure(layout, True, snapshots) as report:
        assert report is not None and dict(report.held)["cloud.md"].startswith("secret:")
    assert snapshots[0].commit is None and git(layout, "rev-parse", "HEAD") == head
    assert key.encode() in (root / "cloud.md").read_bytes()  # left where Claude wrote it
