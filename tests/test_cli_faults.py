"""Faults found by attacking the landed code (issue 21), each through the real CLI and checked
with C git: nothing lost, nothing leaked, one documented error line per failure."""

from __future__ import annotations

from pathlib import Path

import pytest
from clihelpers import assert_clean_repo, git, head, one_error_line, qmem


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    root = tmp_path / "state" / "memory"
    assert qmem(root, "init").code == 0
    assert qmem(root, "remember", "I prefer green tea in the morning").code == 0
    return root


# --------------------------------------------------------------------------- MEMORY.md


@pytest.mark.parametrize(
    "content",
    [b"x" * 300_000, b"\xff\xfe\x00" * 100 + b"\n<<<<<<< ours\n"],
    ids=["over-256-KiB", "binary"],
)
@pytest.mark.parametrize("extra", [(), ("--why", "it keeps me awake")], ids=["fast", "click"])
def test_an_oversized_or_malformed_index_is_just_regenerated(
    memory: Path, content: bytes, extra: tuple[str, ...]
) -> None:
    (memory / "MEMORY.md").write_bytes(content)
    result = qmem(memory, "remember", "I prefer black coffee in the afternoon", *extra)
    assert result.code == 0, result.err
    assert "Traceback" not in result.err
    index = (memory / "MEMORY.md").read_text(encoding="utf-8")
    assert index.startswith("- [I prefer black coffee in the afternoon](user/")
    assert "I prefer green tea in the morning" in index
    assert git(memory, "show", "HEAD:MEMORY.md") == index
    assert_clean_repo(memory)
