"""Small text helpers the spec uses everywhere."""

from __future__ import annotations


def normalize_space(text: str) -> str:
    """Collapse every whitespace run to one space and trim (spec §4.3)."""
    return " ".join(text.split())


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, ending in ``…`` when it was cut."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
