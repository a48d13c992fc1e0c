"""ICU root collation (``localeCompare``) approximated: the orders Qwen Code's Node gives."""

from __future__ import annotations

import itertools
import random

import pytest

from qmem_git.core import collate
from qmem_git.core.collate import collation_key


@pytest.mark.parametrize(
    "ordered",
    [
        [" ", "_", "-", ",", ";", ":", "!", "?", ".", "'", '"', "(", ")", "@", "*", "/", "&", "#"],
        ["%", "`", "^", "+", "<", "=", ">", "|", "~", "$", "0", "1", "9", "a", "A", "b", "z", "Z"],
        ["a", "á", "ä", "e", "E", "é", "É", "ê", "ë", "f", "n", "ñ", "o", "ö", "ø", "ss", "ß", "z"],
        [
            "😀",
            "😁",
            "$",
            "€",
            "1",
            "１",
            "3",
            "a",
            "ａ",
            "A",
            "Ａ",
            "α",
            "Ω",
            "я",
            "ا",
            "あ",
            "ア",
            "中",
        ],
        ["a_b.md", "a-b.md", "a.md", "a\u200b.md", "ab.md", "aB.md", "Ab.md", "AB.md", "b.md"],
    ],
)
def test_orders_as_node(ordered: list[str]) -> None:
    keys = [collation_key(text) for text in ordered]
    assert all(a <= b for a, b in itertools.pairwise(keys))
    assert sorted(reversed(ordered), key=collation_key)[0] == ordered[0]


def test_ignorable_characters_collate_equal() -> None:
    assert collation_key("a\u200bb") == collation_key("ab")
    assert collation_key("x\x01") == collation_key("x")


def _walked(text: str) -> tuple[object, ...]:
    """The key by the element walk alone (what the ASCII shortcut must equal)."""
    elements = [element for char in text for element in collate._elements(char)]
    return (
        tuple(element[0] for element in elements if element[0]),
        tuple(element[1] for element in elements),
        tuple(element[2] for element in elements),
    )


def test_the_ascii_shortcut_gives_the_element_walks_key() -> None:
    """Names of printable ASCII skip the element walk; their keys (and so Qwen's order) stay
    what the walk gives, and a control character still takes the walk."""
    printable = [chr(code) for code in range(32, 127)]
    picked = random.Random(18)
    texts = ["", *printable, "user/m00042.md", "Deploy-Notes_v2 (final).md"]
    texts += ["".join(picked.choices(printable, k=picked.randint(1, 40))) for _ in range(2000)]
    texts += ["tab\there.md", "bell\x07.md", "del\x7f.md", "café.md"]
    for text in texts:
        assert collation_key(text) == _walked(text), repr(text)
