"""Recall query tokenizer (spec §10.2): NFKC, lowercase, CJK bigrams, word runs of 3+.

Runs on every prompt (the agent hook), so it imports only ``unicodedata`` and ``bisect``:
``re`` alone costs ~10 ms of interpreter start-up here (ARCHITECTURE §6). ASCII text goes
through ``str.translate`` + ``str.split`` (C speed); other text is classified one code point at
a time with a per-call class cache, which keeps a 100 KB query linear.
"""

from __future__ import annotations

import unicodedata
from bisect import bisect_right
from itertools import groupby

MIN_WORD_LENGTH = 3
MAX_TOKENS = 64
HEAD_TOKENS = 32
TAIL_TOKENS = MAX_TOKENS - HEAD_TOKENS

# Code-point ranges (inclusive) of the CJK class: Script=Han, Hiragana, Hangul and
# Script_Extensions=Katakana (spec §10.2 source detail). Whole blocks are used where a block is
# all one script; unassigned code points inside them do not occur in real text.
CJK_RANGES: tuple[tuple[int, int], ...] = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x2E80, 0x2EFF),  # CJK Radicals Supplement (Han)
    (0x2F00, 0x2FDF),  # Kangxi Radicals (Han)
    (0x3001, 0x3003),  # 、 。 〃 (scx Katakana)
    (0x3005, 0x3005),  # 々 (Han)
    (0x3007, 0x3011),  # 〇 (Han), 〈 〉 《 》 「 」 『 』 【 】 (scx Katakana)
    (0x3013, 0x301F),  # 〓 〔 〕 … 〟 (scx Katakana)
    (0x3021, 0x3029),  # Hangzhou numerals (Han)
    (0x302E, 0x302F),  # Hangul tone marks
    (0x3030, 0x3035),  # 〰 and kana repeat marks (scx Katakana)
    (0x3037, 0x303D),  # 〷 (scx Katakana), 〸-〻 (Han), 〼 〽 (scx Katakana)
    (0x3040, 0x30FF),  # Hiragana, Katakana incl. ・ (U+30FB) and ー (U+30FC)
    (0x3130, 0x318F),  # Hangul Compatibility Jamo
    (0x31F0, 0x31FF),  # Katakana Phonetic Extensions
    (0x3200, 0x321E),  # parenthesized Hangul
    (0x3260, 0x327E),  # circled Hangul
    (0x32D0, 0x32FE),  # circled Katakana
    (0x3300, 0x3357),  # squared Katakana words
    (0x3400, 0x4DBF),  # CJK Unified Ideographs Extension A
    (0x4E00, 0x9FFF),  # CJK Unified Ideographs
    (0xA960, 0xA97F),  # Hangul Jamo Extended-A
    (0xAC00, 0xD7FF),  # Hangul Syllables, Hangul Jamo Extended-B
    (0xF900, 0xFAFF),  # CJK Compatibility Ideographs
    (0xFE45, 0xFE46),  # sesame dots (scx Katakana)
    (0xFF61, 0xFFDC),  # half-width CJK punctuation, Katakana and Hangul
    (0x16FE2, 0x16FE3),  # old Chinese hook mark, iteration mark (Han)
    (0x16FF0, 0x16FF1),  # Vietnamese reading marks (Han)
    (0x1AFF0, 0x1AFFF),  # Kana Extended-B
    (0x1B000, 0x1B16F),  # Kana Supplement, Kana Extended-A, Small Kana Extension
    (0x1F200, 0x1F200),  # squared hiragana hoka
    (0x20000, 0x2FA1F),  # Extensions B-F, I and Compatibility Ideographs Supplement
    (0x30000, 0x323AF),  # Extensions G, H
)
_STARTS = tuple(start for start, _ in CJK_RANGES)
_ENDS = tuple(end for _, end in CJK_RANGES)

# One class letter per code point: separator, CJK, word (letters L*, digits N*), mark (M*).
SEPARATOR, CJK, WORD, MARK = " ", "c", "w", "m"

# ASCII: letters and digits stay, everything else (``_`` and ``-`` included) separates.
_ASCII_SEPARATORS = {code: " " for code in range(128) if not chr(code).isalnum()}
_ASCII_CLASSES = {code: SEPARATOR if code in _ASCII_SEPARATORS else WORD for code in range(128)}


class _ClassTable(dict[int, str]):
    """``str.translate`` table mapping a code point to its class letter, filled on first use."""

    def __missing__(self, code: int) -> str:
        value = self[code] = char_class(chr(code))
        return value


def is_cjk(char: str) -> bool:
    """True for a code point of the CJK class (spec §10.2)."""
    code = ord(char)
    index = bisect_right(_STARTS, code) - 1
    return index >= 0 and code <= _ENDS[index]


def char_class(char: str) -> str:
    """SEPARATOR, CJK, WORD (letters L*, digits N*) or MARK (M*, continues a word run)."""
    if is_cjk(char):
        return CJK
    major = unicodedata.category(char)[0]
    if major in "LN":
        return WORD
    return MARK if major == "M" else SEPARATOR


def normalize(text: str) -> str:
    """NFKC, then lowercase (full-width ``ＡＰＩ`` becomes ``api``)."""
    return unicodedata.normalize("NFKC", text).lower()


def tokenize(text: str) -> list[str]:
    """Distinct query tokens in first-seen order, capped to 64 (spec §10.2)."""
    normalized = normalize(text)
    if normalized.isascii():
        return cap_tokens(ascii_tokens(normalized))
    return cap_tokens(unicode_tokens(normalized))


def ascii_tokens(text: str) -> list[str]:
    """Tokens of normalised ASCII text: ``[a-z0-9]`` runs of 3 or more (the G2 tokenizer)."""
    return [word for word in text.translate(_ASCII_SEPARATORS).split() if len(word) >= 3]


def unicode_tokens(text: str) -> list[str]:
    """Tokens of normalised text, in order, with repeats (spec §10.2 step 2).

    The text is mapped to one class letter per code point with ``str.translate`` and walked
    one same-class group at a time (``groupby``), so the Python-level work is per run, not per
    code point.
    """
    classes = text.translate(_ClassTable(_ASCII_CLASSES))
    tokens: list[str] = []
    pos = 0
    word_start = -1  # start of the open word run, -1 when none
    for cls, group in groupby(classes):
        end = pos + len(list(group))
        if cls == WORD:
            if word_start < 0:
                word_start = pos
        elif cls != MARK or word_start < 0:  # marks only continue a word run
            if word_start >= 0:
                _emit_word(text[word_start:pos], tokens)
                word_start = -1
            if cls == CJK and end - pos >= 2:
                tokens.extend(text[i : i + 2] for i in range(pos, end - 1))  # overlapping bigrams
        pos = end
    if word_start >= 0:
        _emit_word(text[word_start:], tokens)
    return tokens


def _emit_word(word: str, tokens: list[str]) -> None:
    if len(word) >= MIN_WORD_LENGTH:
        tokens.append(word)


def cap_tokens(tokens: list[str]) -> list[str]:
    """De-duplicate; past 64 distinct keep the first 32 and the 32 most recently seen others.

    The LRU-like tail of the spec (a repeat moves a token to the end, overflow evicts the
    oldest) ends up holding the 32 non-head tokens seen last, ordered by their last occurrence,
    so it is found by one backwards walk. Both walks stop early on long queries.
    """
    distinct: dict[str, None] = {}
    for token in tokens:
        if token not in distinct:
            distinct[token] = None
            if len(distinct) > MAX_TOKENS:
                break
    if len(distinct) <= MAX_TOKENS:
        return list(distinct)
    head = list(distinct)[:HEAD_TOKENS]
    skip = set(head)
    tail: list[str] = []
    for token in reversed(tokens):
        if token not in skip:
            skip.add(token)
            tail.append(token)
            if len(tail) == TAIL_TOKENS:
                break
    tail.reverse()
    return head + tail
