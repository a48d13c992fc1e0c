"""Small text helpers: whitespace normalisation (spec §4.3) and the one clipping rule."""

from __future__ import annotations

import pytest

from qmem_git.core.limits import MAX_FILE_BYTES
from qmem_git.core.text import (
    clean_text,
    clip,
    content_problem,
    normalize_space,
    visible_controls,
)


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


@pytest.mark.parametrize(
    ("text", "cleaned"),
    [
        ("plain text, ünïcode and 中文", "plain text, ünïcode and 中文"),
        ("tab\tand\nnewline stay", "tab\tand\nnewline stay"),
        ("nul\x00 bell\x07 del\x7f c1\x85\x9b gone", "nul bell del c1 gone"),
        ("\x1b]0;pwned\x07title", "title"),  # a terminal escape goes whole
        ("\x1b[31mred\x1b[0m and \x1b[1;4mbold\x1b[m", "red and bold"),
        ("\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\ text", "link text"),
        ("a\x1b(Bb \x1b7saved\x1b8 \x9b31mc1", "ab saved c1"),
        ("\x1b]0;never ended\nnext line stays", "\nnext line stays"),
        ("\x1bP1$r data\x1b\\after", "after"),
        ("ends with ESC\x1b", "ends with ESC"),
        ("half an emoji \ud83d here", "half an emoji \ufffd here"),
        ("\udcff undecodable argv byte", "\ufffd undecodable argv byte"),
    ],
)
def test_clean_text_drops_controls_and_mends_surrogates(text: str, cleaned: str) -> None:
    assert clean_text(text) == cleaned
    cleaned.encode("utf-8")  # always writable


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("---\nname: ok\n---\n\nfine\n", None),
        ("a \ud83d b", "not valid UTF-8"),
        ("a \x00 b", "NUL byte"),
        ("x" * (MAX_FILE_BYTES + 1), "larger than 256 KiB"),
        ("é" * (MAX_FILE_BYTES // 2 + 1), "larger than 256 KiB"),  # counted in bytes
        ("é" * (MAX_FILE_BYTES // 2), None),
        ("body\n<<<<<<< HEAD\nx\n", "conflict marker"),
        ("body\n=======\n", "conflict marker"),
        ("body\n<<<<<<<x is not a marker\n", None),
    ],
)
def test_content_problem_names_what_validate_would_reject(text: str, problem: str | None) -> None:
    found = content_problem(text)
    assert (found is None) == (problem is None)
    assert problem is None or (found is not None and problem in found)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain text, é and 😀", "plain text, é and 😀"),
        ("tab\tand\nnewline stay", "tab\tand\nnewline stay"),
        ("\x1b]0;title\x07", "^[]0;title^G"),
        ("over\rwrite", "over^Mwrite"),
        ("nul\x00 del\x7f", "nul^@ del^?"),
        ("csi\x9b2J next\x85line", "csi\\x9b2J next\\x85line"),
    ],
)
def test_visible_controls_spells_out_what_a_terminal_would_act_on(text: str, shown: str) -> None:
    assert visible_controls(text) == shown
