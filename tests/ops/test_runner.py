"""identity_for: C git's precedence, environment over the user's git config."""

from __future__ import annotations

import os
from pathlib import Path

from qmem_git.ops.runner import identity_for
from qmem_git.settings import build_settings
from qmem_git.store.repo import Identity


def _identity(tmp_path: Path, **env: str) -> Identity:
    base = {k: v for k, v in os.environ.items() if not k.startswith("GIT_AUTHOR_")}
    settings = build_settings({**base, **env}, memory_dir=str(tmp_path / "memory"))
    return identity_for(settings)


def _configure_user() -> None:
    Path(os.environ["GIT_CONFIG_GLOBAL"]).write_text(
        "[user]\n\tname = Ada Lovelace\n\temail = ada@example.com\n"
    )


def test_identity_comes_from_git_config_without_author_env(tmp_path: Path) -> None:
    _configure_user()
    assert _identity(tmp_path) == Identity("Ada Lovelace", "ada@example.com")


def test_author_env_wins_over_git_config(tmp_path: Path) -> None:
    _configure_user()
    both = _identity(tmp_path, GIT_AUTHOR_NAME="Env Name", GIT_AUTHOR_EMAIL="env@example.com")
    assert both == Identity("Env Name", "env@example.com")


def test_one_author_variable_fills_only_its_field(tmp_path: Path) -> None:
    _configure_user()
    assert _identity(tmp_path, GIT_AUTHOR_NAME="Env Name") == Identity(
        "Env Name", "ada@example.com"
    )
    assert _identity(tmp_path, GIT_AUTHOR_EMAIL="env@example.com") == Identity(
        "Ada Lovelace", "env@example.com"
    )
