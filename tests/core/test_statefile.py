"""meta.json / extract-cursor.json format (spec §3.1-§3.3)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qmem_git.core.statefile import (
    EPOCH_ISO,
    SCHEMA_VERSION,
    dumps_state,
    initial_cursor,
    initial_meta,
    iso_ms,
    parse_iso,
    update_fields,
)

NOW = datetime(2026, 4, 1, 8, 0, tzinfo=timezone.utc)


def test_iso_ms_has_milliseconds_and_z() -> None:
    assert iso_ms(NOW) == "2026-04-01T08:00:00.000Z"
    assert iso_ms(datetime(2026, 4, 1, 8, 0, 5, 123_999, tzinfo=timezone.utc)) == (
        "2026-04-01T08:00:05.123Z"
    )


def test_iso_ms_converts_to_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    assert iso_ms(datetime(2026, 4, 1, 10, 0, 0, 7_000, tzinfo=plus_two)) == (
        "2026-04-01T08:00:00.007Z"
    )


@pytest.mark.parametrize(
    "text",
    [
        "2026-04-01T08:00:00.000Z",
        "2026-04-01T08:00:00Z",
        "2026-04-01T08:00:00+00:00",
        "2026-04-01T10:00:00.000+02:00",
        "2026-04-01T08:00:00",  # naive -> UTC
        "2026-04-01T08:00:00.000000",
    ],
)
def test_parse_iso_tolerates_common_forms(text: str) -> None:
    assert parse_iso(text) == NOW


@pytest.mark.parametrize("value", [None, "", "yesterday", "2026-13-01T00:00:00Z", 17, 1.5, [], {}])
def test_parse_iso_rejects_garbage(value: object) -> None:
    assert parse_iso(value) is None


def test_parse_iso_result_is_aware() -> None:
    parsed = parse_iso("2026-04-01T08:00:00")
    assert parsed is not None and parsed.tzinfo is not None


@given(
    st.datetimes(
        min_value=datetime(1970, 1, 1),
        max_value=datetime(9999, 1, 1),
        timezones=st.just(timezone.utc),
    )
)
def test_iso_round_trip_at_millisecond_precision(moment: datetime) -> None:
    text = iso_ms(moment)
    assert len(text) == 24 and text.endswith("Z") and text[19] == "."
    assert parse_iso(text) == moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def test_checklist_7_initial_values() -> None:
    assert SCHEMA_VERSION == 1
    meta = initial_meta(NOW)
    assert json.loads(dumps_state(meta)) == {
        "version": 1,
        "createdAt": "2026-04-01T08:00:00.000Z",
        "updatedAt": "2026-04-01T08:00:00.000Z",
    }
    assert list(meta) == ["version", "createdAt", "updatedAt"]
    assert initial_cursor(NOW) == {"updatedAt": "2026-04-01T08:00:00.000Z"}
    assert EPOCH_ISO == "1970-01-01T00:00:00.000Z"


def test_dumps_state_exact_bytes() -> None:
    data = {
        "version": 1,
        "createdAt": "2026-04-01T08:00:00.000Z",
        "lastExtractionSessionId": "5f0c…",
        "lastExtractionTouchedTopics": ["user", "reference"],
        "lastDreamTouchedTopics": [],
        "processedOffset": 3,
    }
    # Identical to JavaScript's JSON.stringify(data, null, 2) + "\n" (what Qwen Code writes).
    assert dumps_state(data) == (
        "{\n"
        '  "version": 1,\n'
        '  "createdAt": "2026-04-01T08:00:00.000Z",\n'
        '  "lastExtractionSessionId": "5f0c…",\n'
        '  "lastExtractionTouchedTopics": [\n'
        '    "user",\n'
        '    "reference"\n'
        "  ],\n"
        '  "lastDreamTouchedTopics": [],\n'
        '  "processedOffset": 3\n'
        "}\n"
    )


def test_dumps_state_format_rules() -> None:
    text = dumps_state({"a": "日本語 é", "b": {"c": [1, {"d": None}]}, "e": True})
    assert text.endswith("}\n") and not text.endswith("\n\n")
    assert "日本語 é" in text and "\\u" not in text  # non-ASCII not escaped
    assert all(line == line.rstrip() for line in text.split("\n"))  # no trailing spaces
    assert '"a": ' in text and '"a" :' not in text
    indents = {len(line) - len(line.lstrip(" ")) for line in text.split("\n")}
    assert indents <= {0, 2, 4, 6, 8}
    assert json.loads(text) == {"a": "日本語 é", "b": {"c": [1, {"d": None}]}, "e": True}


def test_update_fields_keeps_positions_and_appends_new_keys() -> None:
    meta = initial_meta(NOW)
    later = iso_ms(NOW + timedelta(days=1))
    updated = update_fields(
        meta, {"lastExtractionAt": later, "updatedAt": later, "lastExtractionStatus": "noop"}
    )
    assert list(updated) == [
        "version",
        "createdAt",
        "updatedAt",
        "lastExtractionAt",
        "lastExtractionStatus",
    ]
    assert updated["updatedAt"] == later and updated["createdAt"] == meta["createdAt"]
    assert meta["updatedAt"] == "2026-04-01T08:00:00.000Z"  # input not mutated
    assert dumps_state(updated).index('"updatedAt"') < dumps_state(updated).index(
        '"lastExtractionAt"'
    )
