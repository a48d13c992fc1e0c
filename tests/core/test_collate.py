"""ICU root collation (``localeCompare``) approximated: the orders Qwen Code's Node gives."""

from __future__ import annotations

import itertools

import pytest

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
