"""``index --check`` and ``doctor`` judge MEMORY.md by the same rule as ``validate``."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest
from clihelpers import qmem

from qmem_git.ops.doctor import run_checks
from qmem_git.ops.lifecycle import check_index, ensure_repository
from qmem_git.ops.remember import plan_remember
from qmem_git.ops.runner import execute
from qmem_git.ops.validate import validate_tree
from qmem_git.settings import Settings, build_settings

NOW = datetime(2026, 4, 2, 9, 0, tzinfo=timezone.utc)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    env = {"HOME": str(tmp_path), "QMEM_TELEMETRY": "0", "QMEM_HOST": "h"}
    found = build_settings(env, memory_dir=str(tmp_path / "state" / "memory"), home=str(tmp_path))
    ensure_repository(found, NOW)
    root = found.layout.memory_root
    outcome = execute(found, lambda: plan_remember(root, "I prefer terse responses", now=NOW), NOW)
    assert outcome.commit
    return found


def index_check(settings: Settings) -> tuple[bool, bool, bool]:
    """(index --check, doctor, validate) each saying MEMORY.md is current."""
    doctor = {c.name: c for c in run_checks(settings)}["index"]
    report = validate_tree(settings.layout.memory_root)
    stale = any(f.rule == "index-stale" for f in report.findings)
    return check_index(settings).up_to_date, doctor.ok, not stale


def test_one_trailing_newline_is_current_everywhere(settings: Settings) -> None:
    index = Path(settings.layout.memory_root) / "MEMORY.md"
    assert index_check(settings) == (True, True, True)
    index.write_text(index.read_text() + "\n")  # what an end-of-file fixer does
    assert index_check(settings) == (True, True, True)
    assert qmem(Path(settings.layout.memory_root), "index", "--check").code == 0


def test_more_than_one_extra_newline_is_stale_everywhere(settings: Settings) -> None:
    index = Path(settings.layout.memory_root) / "MEMORY.md"
    index.write_text(index.read_text() + "\n\n")
    assert index_check(settings) == (False, False, False)
    doctor = {c.name: c for c in run_checks(settings)}["index"]
    assert doctor.detail == "MEMORY.md is stale"
    assert qmem(Path(settings.layout.memory_root), "index", "--check").code == 1
