"""Scaffold and state files (spec §3, checklist items 7-8)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from qmem_git.core.paths import Layout
from qmem_git.errors import InvalidMemoryFile
from qmem_git.store.state import (
    ensure_scaffold,
    read_cursor,
    read_meta,
    record_session,
    session_cursor,
    update_meta,
    write_cursor,
)

NOW = datetime(2026, 4, 1, 8, 0, tzinfo=timezone.utc)
LATER = datetime(2026, 4, 2, 9, 30, 15, 123000, tzinfo=timezone.utc)


def layout(tmp_path: Path) -> Layout:
    state = tmp_path / "projects" / "-home-alice-proj"
    return Layout(str(state / "memory"), str(state), "global", "/home/alice/proj")


def test_item_7_scaffold_on_an_empty_store(tmp_path: Path) -> None:
    where = layout(tmp_path)
    ensure_scaffold(where, NOW)
    state = Path(where.state_dir)
    assert (state / "memory" / "MEMORY.md").read_bytes() == b""
    assert (state / "meta.json").read_text() == (
        '{\n  "version": 1,\n  "createdAt": "2026-04-01T08:00:00.000Z",\n'
        '  "updatedAt": "2026-04-01T08:00:00.000Z"\n}\n'
    )
    assert json.loads((state / "extract-cursor.json").read_text()) == {
        "updatedAt": "2026-04-01T08:00:00.000Z"
    }
    assert not (state / "memory" / "user.md").exists()
    assert sorted(p.name for p in (state / "memory").iterdir()) == ["MEMORY.md"]


def test_item_8_scaffold_twice_keeps_edits(tmp_path: Path) -> None:
    where = layout(tmp_path)
    ensure_scaffold(where, NOW)
    index = Path(where.memory_root) / "MEMORY.md"
    index.write_text("- [Hand](user/hand.md) — edited\n")
    assert ensure_scaffold(where, LATER) == []
    assert index.read_text() == "- [Hand](user/hand.md) — edited\n"
    assert read_meta(where) == {
        "version": 1,
        "createdAt": "2026-04-01T08:00:00.000Z",
        "updatedAt": "2026-04-01T08:00:00.000Z",
    }


def test_update_meta_keeps_key_order_and_bumps_updated(tmp_path: Path) -> None:
    where = layout(tmp_path)
    ensure_scaffold(where, NOW)
    update_meta(where, {"lastDreamStatus": "noop"}, LATER)
    text = Path(where.state_file("meta.json")).read_text()
    assert list(json.loads(text)) == ["version", "createdAt", "updatedAt", "lastDreamStatus"]
    assert json.loads(text)["updatedAt"] == "2026-04-02T09:30:15.123Z"


def test_corrupt_meta_is_skipped_silently(tmp_path: Path) -> None:
    where = layout(tmp_path)
    ensure_scaffold(where, NOW)
    Path(where.state_file("meta.json")).write_text("{broken")
    assert read_meta(where) is None
    update_meta(where, {"lastDreamStatus": "noop"}, LATER)  # best effort: no error
    assert Path(where.state_file("meta.json")).read_text() == "{broken"


def test_cursor_missing_reads_as_epoch_and_round_trips(tmp_path: Path) -> None:
    where = layout(tmp_path)
    Path(where.memory_root).mkdir(parents=True)
    assert read_cursor(where) == {"updatedAt": "1970-01-01T00:00:00.000Z"}
    cursor = {"sessionId": "s", "processedOffset": 3, "updatedAt": "2026-04-01T08:00:00.000Z"}
    write_cursor(where, cursor)
    assert read_cursor(where) == cursor


def test_malformed_cursor_is_an_error_with_a_hint(tmp_path: Path) -> None:
    where = layout(tmp_path)
    Path(where.memory_root).mkdir(parents=True)
    Path(where.state_file("extract-cursor.json")).write_text("[1, 2")
    with pytest.raises(InvalidMemoryFile) as caught:
        read_cursor(where)
    assert "delete the file" in caught.value.hint


def test_a_session_read_before_another_resumes_where_it_stopped(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    ensure_scaffold(lay, NOW)
    for session, offset in (("a", 4), ("b", 2)):
        cursor = {"sessionId": session, "processedOffset": offset, "updatedAt": "t"}
        write_cursor(lay, cursor)
        record_session(lay, cursor)
    assert session_cursor(lay, "b") == read_cursor(lay)  # the spec cursor's own session
    assert session_cursor(lay, "a") == {"sessionId": "a", "processedOffset": 4}
    assert session_cursor(lay, "new") == read_cursor(lay)  # unknown: spec §7.2, from 0
    assert session_cursor(lay, None) == read_cursor(lay)


def test_the_session_record_keeps_the_newest_64_and_survives_damage(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    ensure_scaffold(lay, NOW)
    for n in range(70):
        record_session(lay, {"sessionId": f"s{n}", "processedOffset": n})
    record_session(lay, {"sessionId": "s10", "processedOffset": 99})  # seen again: newest
    kept = json.loads(Path(lay.state_file("extract-sessions.json")).read_text())["sessions"]
    assert len(kept) == 64 and "s5" not in kept and list(kept)[-1] == "s10"
    assert session_cursor(lay, "s10")["processedOffset"] == 99
    Path(lay.state_file("extract-sessions.json")).write_text("{not json")
    assert session_cursor(lay, "s10") == read_cursor(lay)
    record_session(lay, {"sessionId": "s10", "processedOffset": 5})  # rewritten whole
    assert session_cursor(lay, "s10")["processedOffset"] == 5
