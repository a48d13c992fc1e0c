"""Recall tokenizer (spec §10.2, checklist 60-63)."""

from __future__ import annotations

import itertools
import re
import time
import unicodedata
from collections import OrderedDict

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qmem_git.core.tokenize import (
    CJK,
    CJK_RANGES,
    MARK,
    SEPARATOR,
    WORD,
    ascii_tokens,
    cap_tokens,
    char_class,
    is_cjk,
    normalize,
    tokenize,
    unicode_tokens,
)


def g2_tokens(text: str) -> list[str]:
    """The older ASCII tokenizer: lowercase, split on non-[a-z0-9], keep length >= 3, dedupe."""
    return list(dict.fromkeys(t for t in re.split(r"[^a-z0-9]+", text.lower()) if len(t) >= 3))


def lru_cap(tokens: list[str]) -> list[str]:
    """The cap as the spec words it: head of 32 distinct, LRU tail of 32."""
    if len(dict.fromkeys(tokens)) <= 64:
        return list(dict.fromkeys(tokens))
    head: list[str] = []
    tail: OrderedDict[str, None] = OrderedDict()
    for token in tokens:
        if token in head:
            continue
        if len(head) < 32:
            head.append(token)
            continue
        if token in tail:
            tail.move_to_end(token)
        tail[token] = None
        if len(tail) > 32:
            tail.popitem(last=False)
    return head + list(tail)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("生产部署", ["生产", "产部", "部署"]),
        ("ＡＰＩ", ["api"]),
        ("ＱＷＥＮ ＡＰＩ", ["qwen", "api"]),
        ("abc漢字", ["abc", "漢字"]),
        ("qwen api 限流", ["qwen", "api", "限流"]),
        ("deployment 发布说明", ["deployment", "发布", "布说", "说明"]),
        ("デプロイ手順", ["デプ", "プロ", "ロイ", "イ手", "手順"]),
        ("リリース", ["リリ", "リー", "ース"]),
        ("よくあるしつもん", ["よく", "くあ", "ある", "るし", "しつ", "つも", "もん"]),
        ("배포 절차", ["배포", "절차"]),
        (
            "コードレビューの基準",
            ["コー", "ード", "ドレ", "レビ", "ビュ", "ュー", "ーの", "の基", "基準"],
        ),
        ("生产。部署", ["生产", "产。", "。部", "部署"]),
        ("「設定」", ["「設", "設定", "定」"]),
        ("snake_case kebab-case", ["snake", "case", "kebab"]),
        ("go 部 배 ok", []),
        ("   ", []),
        ("", []),
        ("Release RELEASE release", ["release"]),
        ("ownership 2024 v12 x86", ["ownership", "2024", "v12", "x86"]),
        ("café naïve", ["café", "naïve"]),
        ("हिन्दी", ["हिन्दी"]),  # vowel signs and virama (M*) continue the word run
        ("İstanbul", ["i̇stanbul"]),  # lowercase adds a combining dot, still one word
        ("ａｂｃ１２３", ["abc123"]),
        ("Ⅻ-test", ["xii", "test"]),
    ],
)
def test_tokenize_cases(query: str, expected: list[str]) -> None:
    assert tokenize(query) == expected


def test_normalize_is_nfkc_then_lowercase() -> None:
    assert normalize("ＡＰＩ Ｄｅｐｌｏｙ") == "api deploy"


@pytest.mark.parametrize(
    "char",
    [
        "々",
        "〇",
        "ー",
        "・",
        "、",
        "。",
        "〃",
        "「",
        "】",
        "〓",
        "〟",
        "ｶ",
        "ｰ",
        "ㇰ",
        "ア",
        "あ",
        "ゝ",
        "한",
        "ᄀ",
        "ㄱ",
        "ꥠ",
        "ힰ",
        "豈",
        "𠀀",
        "𪜀",
        "𰀀",
        "丽",
        "⺀",
        "⼀",
    ],
)
def test_cjk_class_members(char: str) -> None:
    assert is_cjk(char)
    assert char_class(char) == CJK


@pytest.mark.parametrize(
    "char", ["a", "Z", "5", "é", "ß", "Ж", "α", "ا", "ก", " ", "　", "_", "〆"]
)
def test_not_cjk(char: str) -> None:
    assert not is_cjk(char)


@pytest.mark.parametrize(
    ("char", "cls"),
    [
        ("a", WORD),
        ("٣", WORD),
        ("Ⅻ", WORD),
        ("\u0301", MARK),
        ("\u093f", MARK),
        ("-", SEPARATOR),
        ("_", SEPARATOR),
        ("€", SEPARATOR),
        ("\u3000", SEPARATOR),
    ],
)
def test_char_classes(char: str, cls: str) -> None:
    assert char_class(char) == cls


def test_cjk_ranges_are_sorted_and_disjoint() -> None:
    for (start, end), (next_start, _) in itertools.pairwise(CJK_RANGES):
        assert start <= end < next_start


_CJK_NAMES = (
    "CJK",
    "HIRAGANA",
    "KATAKANA",
    "KANA",
    "HANGUL",
    "KOREAN",
    "KANGXI",
    "IDEOGRAPH",
    "HENTAIGANA",
    "SQUARE",
    "HANGZHOU",
    "OLD CHINESE",
    "VIETNAMESE",
    "SESAME",
)


def _cjk_punctuation(code: int) -> bool:
    return 0x3000 <= code <= 0x303F or 0xFF61 <= code <= 0xFF65


def test_every_named_cjk_code_point_is_classified_cjk() -> None:
    """Han, kana and Hangul letters by Unicode name are in the table; nothing unrelated is."""
    for code in range(0x1100, 0x323B0):
        char = chr(code)
        name = unicodedata.name(char, "")
        if not name:
            continue
        named = name.startswith(
            (
                "CJK UNIFIED",
                "CJK COMPATIBILITY IDEOGRAPH",
                "HIRAGANA",
                "KATAKANA",
                "HANGUL",
                "HALFWIDTH KATAKANA",
                "HALFWIDTH HANGUL",
            )
        )
        if named and unicodedata.category(char)[0] == "L":
            assert is_cjk(char), name
        if is_cjk(char):
            assert any(part in name for part in _CJK_NAMES) or _cjk_punctuation(code), name


def test_cap_keeps_head_and_most_recent_tail() -> None:
    tokens = [f"t{i:03d}" for i in range(100)]
    assert cap_tokens(tokens) == tokens[:32] + tokens[-32:]
    assert cap_tokens([*tokens, "t050"]) == tokens[:32] + tokens[69:] + ["t050"]
    assert (
        cap_tokens([*tokens, "t001"]) == tokens[:32] + tokens[-32:]
    )  # head repeats change nothing


def test_cap_keeps_first_seen_order_up_to_64() -> None:
    tokens = [f"w{i:02d}" for i in range(64)]
    assert cap_tokens(tokens + tokens[::-1]) == tokens


@given(st.lists(st.integers(0, 120).map(lambda n: f"k{n}"), max_size=400))
def test_cap_matches_the_spec_lru(tokens: list[str]) -> None:
    assert cap_tokens(tokens) == lru_cap(tokens)
    assert len(cap_tokens(tokens)) <= 64


ascii_text = st.text(st.characters(min_codepoint=0, max_codepoint=127), max_size=200)


@given(ascii_text)
def test_ascii_query_equals_the_g2_tokenizer(text: str) -> None:
    assert tokenize(text) == cap_tokens(g2_tokens(text))


@given(ascii_text)
def test_unicode_path_agrees_with_ascii_fast_path(text: str) -> None:
    lowered = text.lower()
    assert unicode_tokens(lowered) == ascii_tokens(lowered)


@given(st.text(max_size=300))
def test_tokens_are_distinct_normalised_and_long_enough(text: str) -> None:
    tokens = tokenize(text)
    assert len(tokens) == len(set(tokens)) <= 64
    normalized = normalize(text)
    for token in tokens:
        assert token in normalized
        assert len(token) >= 2
        assert len(token) >= 3 or all(is_cjk(c) for c in token)


def test_hundred_kilobyte_query_is_linear() -> None:
    chunk = "部署 deploy ＡＰＩ café 生产。リリース 배포 x̃y " * 10
    small, large = chunk * 40, chunk * 400
    assert len(large) >= 100_000
    start = time.perf_counter()
    tokenize(small)
    small_s = time.perf_counter() - start
    start = time.perf_counter()
    tokens = tokenize(large)
    large_s = time.perf_counter() - start
    assert tokens
    assert large_s < 2.0
    assert large_s < 40 * small_s + 0.05  # 10x the input, far from 100x (quadratic)
