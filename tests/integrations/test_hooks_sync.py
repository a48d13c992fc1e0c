"""Hooks and sync: SessionEnd pushes to the remote, SessionStart pulls in the background."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from helpers_git import git_argv

from integrations.test_hooks_e2e import FIXTURES, Session, context_of
from qmem_git.store.remotes import create_bare_repository


def remote_head(bare: Path, branch: str = "refs/heads/main") -> str:
    done = subprocess.run(
        [*git_argv(str(bare)), "rev-parse", "--verify", "-q", branch],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip()


def poll(condition: object, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return True
        time.sleep(0.2)
    return False


def test_session_end_pushes_and_session_start_pulls(tmp_path: Path) -> None:
    bare = tmp_path / "shared" / "memory.git"
    create_bare_repository(str(bare))
    transcript = FIXTURES / "transcripts" / "claude-session.jsonl"
    laptop, desk = (machine(tmp_path / name, transcript) for name in ("laptop", "desk"))

    laptop.qmem("init", "--remote", str(bare))
    laptop.qmem("remember", "--type", "project", "Canary deploys roll out to 5% first")
    context_of(laptop.hook("SessionStart", laptop.payload("session-start")), "SessionStart")
    laptop.hook("SessionEnd", laptop.payload("session-end"))
    assert poll(lambda: remote_head(bare) == head(laptop)), laptop.state_dir / "hook.log"

    desk.qmem("clone", str(bare))
    laptop.qmem("remember", "--type", "project", "The staging database is rebuilt nightly")
    laptop.qmem("sync")
    recall = ("recall", "staging database nightly")
    assert "rebuilt nightly" not in desk.qmem(*recall, nothing_matched_ok=True)
    desk.hook("SessionStart", desk.payload("session-start"))  # pull-sync in the background
    assert poll(lambda: "rebuilt nightly" in desk.qmem(*recall, nothing_matched_ok=True))


def machine(home: Path, transcript: Path) -> Session:
    home.mkdir(parents=True)
    return Session(home, "claude", transcript)


def head(session: Session) -> str:
    return subprocess.run(
        [*git_argv(str(session.memory_root)), "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_hooks_sync_through_the_hub_when_the_store_has_no_remote(tmp_path: Path) -> None:
    """No remote anywhere, one hub per machine: SessionEnd pushes to the project's branch on
    the hub, SessionStart on a machine that never had the store adopts it."""
    hub = tmp_path / "hub.git"
    create_bare_repository(str(hub))
    transcript = FIXTURES / "transcripts" / "claude-session.jsonl"
    laptop, desk = (machine(tmp_path / name, transcript) for name in ("laptop", "desk"))
    for session, origin in ((laptop, "git@github.com:Alice/shop.git"), (desk, SHOP_HTTPS)):
        session.env["QMEM_CONFIG"] = str(session.project.parent / "config.json")
        subprocess.run(["git", "init", "-q", str(session.project)], check=True)
        git_c = ["git", "-C", str(session.project)]
        subprocess.run([*git_c, "remote", "add", "origin", origin], check=True)
        session.qmem("hub", "set", str(hub))
    branch = "refs/heads/projects/github.com/alice/shop"
    laptop.qmem("remember", "--type", "project", "Canary deploys roll out to 5% first")
    laptop.hook("SessionStart", laptop.payload("session-start"))
    laptop.hook("SessionEnd", laptop.payload("session-end"))
    assert poll(lambda: remote_head(hub, branch) == head(laptop)), laptop.state_dir / "hook.log"
    assert laptop.qmem("remote", "list").startswith("No remotes")
    assert not desk.memory_root.exists()
    desk.hook("SessionStart", desk.payload("session-start"))  # adopts the branch, in background
    recall = ("recall", "canary deploys")
    assert poll(lambda: "5% first" in desk.qmem(*recall, nothing_matched_ok=True))
    subprocess.run([*git_argv(str(hub)), "fsck", "--strict"], check=True, capture_output=True)


SHOP_HTTPS = "https://github.com/alice/shop"
