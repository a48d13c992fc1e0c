"""store.identity: user.name / user.email read once per state of the git config files."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from qmem_git.store import identity


@pytest.fixture
def git_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A memory repo's .git; config files count as settled at once (their change time cannot
    be set back, and a test should not sleep two seconds)."""
    monkeypatch.setattr(identity, "_SETTLED_NS", -(10**12))
    path = tmp_path / "memory" / ".git"
    path.mkdir(parents=True)
    return str(path)


def settle(path: Path) -> None:
    """Date the file back: different stamps for the next edit."""
    past = time.time() - 3
    os.utime(path, (past, past))


def configure(name: str, email: str = "ada@example.com") -> Path:
    path = Path(os.environ["GIT_CONFIG_GLOBAL"])
    path.write_text(f"[user]\n\tname = {name}\n\temail = {email}\n")
    settle(path)
    return path


def read(git_dir: str) -> tuple[str, str]:
    return identity.config_identity(git_dir, dict(os.environ), os.environ["HOME"])


def test_the_identity_is_read_once_per_state_of_the_config(
    git_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure("Ada Lovelace")
    assert read(git_dir) == ("Ada Lovelace", "ada@example.com")

    def no_config() -> tuple[str, str]:
        raise AssertionError("the config was read again")

    monkeypatch.setattr(identity, "read_config_identity", no_config)
    assert read(git_dir) == ("Ada Lovelace", "ada@example.com")


def test_a_changed_config_file_is_read_again(git_dir: str) -> None:
    configure("Ada Lovelace")
    assert read(git_dir)[0] == "Ada Lovelace"
    configure("Grace Hopper")
    assert read(git_dir)[0] == "Grace Hopper"


def test_a_config_file_that_appears_is_read(git_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GIT_CONFIG_GLOBAL")
    home = Path(os.environ["HOME"])
    assert read(git_dir) == ("", "")
    xdg = Path(os.environ["XDG_CONFIG_HOME"]) / "git" / "config"
    xdg.parent.mkdir(parents=True)
    xdg.write_text("[user]\n\tname = Xdg Name\n")
    settle(xdg)
    assert read(git_dir) == ("Xdg Name", "")
    (home / ".gitconfig").write_text("[user]\n\temail = home@example.com\n")
    settle(home / ".gitconfig")
    assert read(git_dir) == ("Xdg Name", "home@example.com")


def test_another_global_config_is_another_key(
    git_dir: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure("Ada Lovelace")
    assert read(git_dir)[0] == "Ada Lovelace"
    other = tmp_path / "other.gitconfig"
    other.write_text("[user]\n\tname = Other Name\n")
    settle(other)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(other))
    assert read(git_dir)[0] == "Other Name"


def test_a_fresh_config_is_not_kept(git_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An edit in the same clock tick as the read would leave the stamp as kept."""
    monkeypatch.setattr(identity, "_SETTLED_NS", 2_000_000_000)
    path = configure("Ada Lovelace")
    path.touch()  # changed just now
    assert read(git_dir)[0] == "Ada Lovelace"
    assert not (Path(git_dir) / "qmem-identity").exists()


def test_a_config_with_includes_is_read_every_time(git_dir: str, tmp_path: Path) -> None:
    included = tmp_path / "included"
    included.write_text("[user]\n\tname = Included Name\n")
    path = Path(os.environ["GIT_CONFIG_GLOBAL"])
    path.write_text(f"[include]\n\tpath = {included}\n")
    settle(path)
    assert read(git_dir)[0] == "Included Name"
    assert not (Path(git_dir) / "qmem-identity").exists()


def test_a_damaged_record_is_read_past(git_dir: str) -> None:
    configure("Ada Lovelace")
    read(git_dir)
    (Path(git_dir) / "qmem-identity").write_bytes(b"\x00garbage")
    assert read(git_dir)[0] == "Ada Lovelace"


def test_the_files_are_git_s(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"XDG_CONFIG_HOME": "/x"}
    assert identity.config_files(env, "/h") == ["/h/.gitconfig", "/x/git/config", "/etc/gitconfig"]
    assert identity.config_files({}, "/h")[1] == "/h/.config/git/config"
    env = {"GIT_CONFIG_GLOBAL": "/g", "GIT_CONFIG_NOSYSTEM": "1"}
    assert identity.config_files(env, "/h") == ["/g"]
    assert identity.config_files({"GIT_CONFIG_SYSTEM": "/s"}, "/h")[-1] == "/s"
