"""Claude Code's settings file as it was before qmem-git's first install, kept to restore it.

``install-hooks --agent claude`` (with ``--engine`` it also sets ``autoMemoryEnabled: false``)
keeps the file's bytes, or the fact that there was none, in ``settings.json.qmem-git-original``
beside it, with the text it wrote. ``--uninstall`` puts the original back byte for byte when
the file still holds what qmem-git wrote; when someone changed it since, only qmem-git's hooks
and its ``autoMemoryEnabled`` are taken out (the switch gets its original value back) and the
rest of their change is kept.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

ORIGINAL_SUFFIX = ".qmem-git-original"
RECORD_VERSION = 1
AUTO_MEMORY_KEY = "autoMemoryEnabled"


def record_path(settings_path: str) -> str:
    return settings_path + ORIGINAL_SUFFIX


def read_record(settings_path: str) -> dict[str, Any] | None:
    """The kept original (``existed``, ``text``, ``installed``), or None."""
    try:
        with open(record_path(settings_path), encoding="utf-8") as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        return None
    valid = isinstance(record, dict) and record.get("version") == RECORD_VERSION
    return record if valid and isinstance(record.get("text"), str) else None


def keep_original(settings_path: str, previous: str | None, installed: str, mode: int) -> None:
    """Record the file as it was before the first install (an existing record keeps its
    original) and what this install wrote."""
    from qmem_git.store.workdir import atomic_write

    record = read_record(settings_path)
    if record is None:
        record = {"version": RECORD_VERSION, "existed": previous is not None}
        record["text"] = previous or ""
    record["installed"] = installed
    data = json.dumps(record, ensure_ascii=False, indent=2) + "\n"
    atomic_write(record_path(settings_path), data.encode("utf-8"), mode=mode)


def restored(record: dict[str, Any], current_text: str | None) -> tuple[str | None, bool]:
    """What uninstall writes: (the original text, True) when the file holds what qmem-git
    wrote (None: there was no file), else (None, False): the caller writes the file with
    only qmem-git's parts taken out instead."""
    if current_text == record.get("installed"):
        return (record["text"] if record.get("existed") else None), True
    return None, False


def original_switch(record: dict[str, Any], cleaned: dict[str, Any]) -> dict[str, Any]:
    """``cleaned`` with ``autoMemoryEnabled`` as the original had it (or without it)."""
    from qmem_git.integrations.hooksettings import parse_jsonc

    result = dict(cleaned)
    result.pop(AUTO_MEMORY_KEY, None)
    try:
        original = parse_jsonc(record["text"], "original") if record["text"].strip() else {}
    except Exception:
        original = {}
    if isinstance(original, dict) and AUTO_MEMORY_KEY in original:
        result[AUTO_MEMORY_KEY] = original[AUTO_MEMORY_KEY]
    return result


def forget_record(settings_path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(record_path(settings_path))
