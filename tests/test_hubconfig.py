"""The hub setting in the machine's config file: read tolerantly, written atomically."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from qmem_git.errors import UsageError
from qmem_git.hubconfig import hub_url, set_hub, unset_hub


def test_reading_never_fails_and_writing_keeps_the_rest(tmp_path: Path) -> None:
    config = tmp_path / "cfg" / "config.json"
    env = {"QMEM_CONFIG": str(config)}
    assert hub_url(env, str(tmp_path)) is None  # no file
    assert set_hub(env, str(tmp_path), "/srv/hub.git") == str(config)
    assert stat.S_IMODE(config.stat().st_mode) == 0o600  # a new file is private
    assert hub_url(env, str(tmp_path)) == "/srv/hub.git"
    config.write_text('{"llm": {"model": "m"}, "hub": "  "}')
    assert hub_url(env, str(tmp_path)) is None  # blank: no hub
    config.write_text("{broken")
    assert hub_url(env, str(tmp_path)) is None
    with pytest.raises(UsageError, match='add "hub": "URL"'):
        set_hub(env, str(tmp_path), "/srv/hub.git")
    assert config.read_text() == "{broken"
    config.write_text("[1, 2]")
    with pytest.raises(UsageError):
        unset_hub(env, str(tmp_path))
    config.write_text('{"llm": {"model": "m"}}')
    assert unset_hub(env, str(tmp_path)) is False
    set_hub(env, str(tmp_path), "git://h/hub")
    assert json.loads(config.read_text()) == {"llm": {"model": "m"}, "hub": "git://h/hub"}
    assert [name for name in os.listdir(config.parent) if name != "config.json"] == []


def test_the_xdg_and_home_places(tmp_path: Path) -> None:
    xdg = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    set_hub(xdg, str(tmp_path / "home"), "/a.git")
    assert (tmp_path / "xdg" / "qmem-git" / "config.json").is_file()
    set_hub({}, str(tmp_path / "home"), "/b.git")
    assert hub_url({}, str(tmp_path / "home")) == "/b.git"
    assert (tmp_path / "home" / ".config" / "qmem-git" / "config.json").is_file()
