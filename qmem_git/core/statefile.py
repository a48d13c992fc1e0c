"""The JSON format of meta.json and extract-cursor.json (spec §3.1-§3.3)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

SCHEMA_VERSION = 1
EPOCH_ISO = "1970-01-01T00:00:00.000Z"


def iso_ms(moment: datetime) -> str:
    """UTC ISO-8601 with milliseconds and ``Z``: ``2026-04-01T08:00:00.000Z``."""
    utc = moment.astimezone(timezone.utc)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def parse_iso(value: object) -> datetime | None:
    """Parse an ISO timestamp written by us or by Qwen Code; None when it does not parse."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def dumps_state(data: dict[str, Any]) -> str:
    """2-space indent, ``": "`` separators, non-ASCII kept, one trailing newline."""
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def initial_meta(now: datetime) -> dict[str, Any]:
    stamp = iso_ms(now)
    return {"version": SCHEMA_VERSION, "createdAt": stamp, "updatedAt": stamp}


def initial_cursor(now: datetime) -> dict[str, Any]:
    return {"updatedAt": iso_ms(now)}


def update_fields(data: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """Existing keys keep their position, new keys append (spec §3.1)."""
    merged = dict(data)
    merged.update(changes)
    return merged
