"""store.walk: which folders are memory folders at all."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from qmem_git.errors import UsageError
from qmem_git.store.walk import check_memory_folder, foreign_entries


def test_a_memory_folder_holds_nothing_foreign(tmp_path: Path) -> None:
    for kind in ("user", "feedback", "project", "reference"):
        (tmp_path / kind / "deeper").mkdir(parents=True)
        (tmp_path / kind / "deeper" / "x.md").write_text("x")
        (tmp_path / f"{kind}.md").write_text("legacy topic file")
    (tmp_path / "MEMORY.md").write_text("")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".notes").mkdir()
    (tmp_path / ".draft.md").write_text("dot-files are never scanned")
    (tmp_path / "Makefile").write_text("other files are never scanned")
    assert foreign_entries(str(tmp_path)) == []
    check_memory_folder(str(tmp_path))
    assert foreign_entries(str(tmp_path / "missing")) == []


def test_other_folders_and_markdown_files_are_foreign(tmp_path: Path) -> None:
    (tmp_path / "user").mkdir()
    for name in ("src", "docs", "tmp", "quarantine", "User"):
        (tmp_path / name).mkdir()
    for name in ("README.md", "notes.md", "user.md.bak.md"):
        (tmp_path / name).write_text("x")
    (tmp_path / "project").write_text("a file where a type folder goes is not scanned")
    expected = ["README.md", "User", "docs", "notes.md", "quarantine", "src", "tmp"]
    assert foreign_entries(str(tmp_path)) == sorted([*expected, "user.md.bak.md"])
    shown = "it holds README.md, User, docs, notes.md, quarantine and 3 more (hint"
    with pytest.raises(UsageError, match=re.escape(shown)) as caught:
        check_memory_folder(str(tmp_path))
    assert caught.value.exit_code == 2
