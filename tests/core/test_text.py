"""Small text helpers: whitespace normalisation (spec §4.3) and the one clipping rule."""

from __future__ import annotations

import pytest

from qmem_git.core.text import clip, normalize_space


def test_normalize_space_collapses_and_trims() -> None:
    assert normalize_space("  a \t b\n\nc  ") == "a b c"


@pytest.mark.parametrize(
    ("text", "limit", "clipped"),
    [
        ("short", 10, "short"),
        ("exactly10!", 10, "exactly10!"),
        ("eleven chars", 10, "eleven ch…"),
        ("word    then more", 9, "word…"),  # no space left before the ellipsis
        ("", 5, ""),
    ],
)
def test_clip(text: str, limit: int, clipped: str) -> None:
    assert clip(text, limit) == clipped
    assert len(clip(text, limit)) <= limit
