"""Small text helpers the spec uses everywhere."""

from __future__ import annotations


def normalize_space(text: str) -> str:
    """Collapse every whitespace run to one space and trim (spec §4.3)."""
    return " ".join(text.split())
