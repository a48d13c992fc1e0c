"""``--agent claude``: Claude Code's auto-memory folder as a store qmem-git versions as it is.

Real ``qmem-git`` processes, checked with C git (``fsck --strict``, ``show``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clihelpers import Run, qmem_in
from helpers_git import git_argv

from qmem_git.core.claudepaths import claude_key
from qmem_git.store.claudesettings import canonical_root

CLAUDE_MEMORY = """---
name: build-tool
description: The zebra project builds with pnpm
metadata: \n  type: project
  node_type: memory
  originSessionId: 5b0c
---

The zebra project builds with pnpm, never npm.

**Why:** the lockfile is pnpm's.
"""
CLAUDE_INDEX = "- [Build tool](build-tool.md) — pnpm, never npm\n"


def run(project: Path, *args: str, env: dict[str, str] | None = None) -> Run:
    return qmem_in(project, *args, env=env)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "zebra"
    folder.mkdir()
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    return folder


def claude_folder(project: Path) -> Path:
    home = Path(os.environ["HOME"])
    return home / ".claude" / "projects" / claude_key(canonical_root(str(project))) / "memory"


def write_old(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    past = time.time() - 30
    os.utime(path, (past, past))


def git_in(folder: Path, *args: str) -> str:
    argv = [*git_argv(folder), *args]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def test_where_names_claudes_folder_and_state_beside_it(project: Path) -> None:
    done = run(project, "--agent", "claude", "where", "--json")
    assert done.code == 0, done.err
    info = json.loads(done.out)
    folder = claude_folder(project)
    assert info["memory_root"] == str(folder)
    assert info["repository"] == f"{folder}.git"
    assert info["state_dir"] == f"{folder}.qmem"
    assert info["mode"] == "claude"
    after = run(project, "where", "--agent", "claude", "--json")  # after the command's name too
    assert json.loads(after.out)["memory_root"] == str(folder)


def test_init_and_snapshot_commit_claudes_files_as_they_are(project: Path) -> None:
    folder = claude_folder(project)
    write_old(folder / "build-tool.md", CLAUDE_MEMORY)
    write_old(folder / "MEMORY.md", CLAUDE_INDEX)
    done = run(project, "--agent", "claude", "init")
    assert done.code == 0, done.err
    assert (folder / "MEMORY.md").read_text("utf-8") == CLAUDE_INDEX  # never regenerated
    assert sorted(os.listdir(folder)) == ["MEMORY.md", "build-tool.md"]  # nothing of ours
    assert git_in(folder, "show", "HEAD:MEMORY.md") == CLAUDE_INDEX
    assert git_in(folder, "show", "HEAD:build-tool.md") == CLAUDE_MEMORY
    message = git_in(folder, "log", "-1", "--format=%B")
    assert "Qmem-Op: snapshot" in message and "Qmem-Topics: project" in message
    write_old(folder / "feedback-terse.md", CLAUDE_MEMORY.replace("project\n", "feedback\n", 1))
    write_old(folder / "MEMORY.md", CLAUDE_INDEX + "- [Terse](feedback-terse.md) — short\n")
    again = run(project, "--agent", "claude", "snapshot")
    assert again.code == 0, again.err
    assert "snapshot: update 2 memory files (Claude Code)" in again.out
    assert git_in(folder, "show", "--name-status", "--format=", "HEAD").split() == [
        "M",
        "MEMORY.md",
        "A",
        "feedback-terse.md",
    ]
    assert run(project, "--agent", "claude", "snapshot").out.strip() == "Nothing to change."
    subprocess.run([*git_argv(folder), "fsck", "--strict"], check=True)


def test_a_secret_stays_out_of_history(project: Path) -> None:
    folder = claude_folder(project)
    write_old(folder / "MEMORY.md", CLAUDE_INDEX)
    key = "AKIA" + "IOSFODNN7" + "EXAMPLE"
    write_old(folder / "cloud.md", CLAUDE_MEMORY.replace("pnpm, never npm.", f"key {key}"))
    done = run(project, "--agent", "claude", "init")
    assert done.code == 0, done.err
    assert "cloud.md" in done.err and "secret" in done.err
    assert git_in(folder, "ls-files").split() == ["MEMORY.md"]


def test_recall_validate_and_status_read_claudes_memories(project: Path) -> None:
    folder = claude_folder(project)
    write_old(folder / "build-tool.md", CLAUDE_MEMORY)
    write_old(folder / "MEMORY.md", CLAUDE_INDEX)
    assert run(project, "--agent", "claude", "init").code == 0
    recall = run(project, "--agent", "claude", "recall", "which build tool, pnpm?", "--json")
    assert recall.code == 0, recall.err
    assert json.loads(recall.out)["selected"] == ["build-tool.md"]
    assert run(project, "recall", "which build tool, pnpm?").code == 1  # Qwen's store
    validate = run(project, "--agent", "claude", "validate", "--json")
    assert validate.code == 0, validate.out
    assert json.loads(validate.out) == []
    status = run(project, "--agent", "claude", "status", "--json")
    assert json.loads(status.out)["uncommitted"] == {}
    doctor = run(project, "--agent", "claude", "doctor")
    assert doctor.code == 0, doctor.out
    assert "index" not in doctor.out and "validate: 2 files: 0 error(s)" in doctor.out
    write_old(folder / "MEMORY.md", CLAUDE_INDEX + "- [More](more.md) — more\n")
    status = run(project, "--agent", "claude", "status", "--json")
    assert json.loads(status.out)["uncommitted"] == {"MEMORY.md": "M"}


@pytest.mark.parametrize(
    "args",
    [
        ("remember", "x"),
        ("index",),
        ("forget", "pnpm"),
        ("dream", "--force"),
        ("undo",),
        ("restore", "pnpm"),
        ("extract", "--transcript", "t.jsonl"),
        ("purge", "--secrets"),
        ("repair",),
    ],
)
def test_commands_that_would_write_into_claudes_folder_refuse(
    project: Path, args: tuple[str, ...]
) -> None:
    done = run(project, "--agent", "claude", *args)
    assert done.code == 2
    assert done.err.startswith("Error:") and "Claude owns" in done.err
    assert not claude_folder(project).exists()


def test_a_bad_agent_is_a_usage_error(project: Path) -> None:
    done = run(project, "--agent", "gemini", "recall", "x")
    assert done.code == 2 and "gemini" in done.err


def test_claudes_folder_named_by_memory_dir_is_still_claudes(project: Path) -> None:
    """Once versioned, the folder is Claude's however it is named: ``--memory-dir``, standing
    in it, or a hand-made commit through the repository's own pre-commit hook."""
    folder = claude_folder(project)
    write_old(folder / "build-tool.md", CLAUDE_MEMORY)
    write_old(folder / "MEMORY.md", CLAUDE_INDEX)
    assert run(project, "--agent", "claude", "init").code == 0
    named = ["--memory-dir", str(folder)]
    where = json.loads(run(project, *named, "where", "--json").out)
    assert where["mode"] == "claude" and where["state_dir"] == f"{folder}.qmem"
    for args in (("remember", "x"), ("undo",), ("index",)):
        refused = run(project, *named, *args)
        assert refused.code == 2 and "Claude owns" in refused.err, args
    assert run(folder, "recall", "pnpm build tool").code == 0  # standing in it
    write_old(folder / "MEMORY.md", CLAUDE_INDEX + "- [Hand](hand.md) — by hand\n")
    subprocess.run([*git_argv(folder), "add", "MEMORY.md"], check=True)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    hand = subprocess.run(
        [*git_argv(folder), "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "hand"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert hand.returncode == 0, hand.stderr  # Claude's index is not held to Qwen's format
    assert (folder / "MEMORY.md").read_text("utf-8").endswith("by hand\n")


def test_a_file_still_being_written_waits_for_the_next_snapshot(project: Path) -> None:
    folder = claude_folder(project)
    write_old(folder / "MEMORY.md", CLAUDE_INDEX)
    assert run(project, "--agent", "claude", "init").code == 0
    (folder / "build-tool.md").write_text(CLAUDE_MEMORY, "utf-8")  # just now
    fresh = run(project, "--agent", "claude", "snapshot", env={"QMEM_QUIET_SECONDS": "60"})
    assert fresh.code == 0 and "build-tool.md" in fresh.err
    assert git_in(folder, "ls-files").split() == ["MEMORY.md"]
    settled = run(project, "--agent", "claude", "snapshot", env={"QMEM_QUIET_SECONDS": "0"})
    assert "add build-tool.md (Claude Code)" in settled.out, settled.err
    (folder / "build-tool.md").unlink()
    gone = run(project, "--agent", "claude", "snapshot")
    assert "delete build-tool.md (Claude Code)" in gone.out, gone.err
    assert git_in(folder, "ls-files").split() == ["MEMORY.md"]
