"""``String.prototype.localeCompare`` as Qwen Code's Node runs it (ICU root collation), in Python.

Qwen orders memories of equal mtime by ``a.filename.localeCompare(b.filename)``; MEMORY.md must
list them in the same order. This is an approximation of ICU's root collation (tertiary strength,
punctuation not ignorable) that is exact for ASCII, Latin letters with diacritics, digits, case,
full-width forms, kana and Han, and close elsewhere: three levels compared one after the other
(base letters, then accents, then case and width), as ICU compares them.
"""

from __future__ import annotations

import functools
import unicodedata

from qmem_git.core.collate_table import GROUPS

_RANK = {char: rank for rank, group in enumerate(GROUPS) for char in group}
_WHITESPACE = {"\t": -5, "\n": -4, "\v": -3, "\f": -2, "\r": -1}  # before the table's first
_SPACE = _RANK[" "]
_PUNCT = _RANK["%"]  # punctuation the table lacks sorts among ASCII's, after "%"
_SYMBOL = _RANK["$"]  # symbols the table lacks (emoji) just before "$", currency just after
_DIGIT = _RANK["0"]
_UPPER = 2  # tertiary: lower case 0, compatibility forms (full-width) +1, upper case 2
_LETTERS_END = len(GROUPS)  # scripts the table lacks sort after it

# secondary order of the common combining marks (DUCET): acute, grave, breve, circumflex, ...
_MARKS = [0x301, 0x300, 0x306, 0x302, 0x30C, 0x30A, 0x308, 0x30B, 0x303, 0x307, 0x338]
_MARKS += [0x327, 0x328, 0x304]
_MARK_RANK = {chr(mark): rank + 1 for rank, mark in enumerate(_MARKS)}
_STROKE = len(_MARKS) + 1  # the stroke of ø, đ, ł: after the marks above
_L, _MIDDLE_DOT = (_RANK["l"], 0), (_RANK["\u00b7"], 0)
_LIGATURE = 0x10000  # the secondary mark inside æ, œ, ß: after every accent
# letters ICU sorts as a base letter with a stroke-like accent, or as two letters
_LATIN_EXTRA = {"ø": "o", "ð": "d", "đ": "d", "ħ": "h", "ł": "l"}
_LATIN_EXPANSIONS = {"æ": "ae", "œ": "oe", "ß": "ss", "ƍ": "zw", "ƾ": "ts", "ȸ": "db", "ȹ": "qp"}

Weight = tuple[int, ...]
Element = tuple[Weight, int, int]  # (primary, secondary, tertiary) of one collation element


# the printable ASCII characters (all in the table): one collation element each, as
# :func:`_elements` gives it; most file names are made of nothing else
_ASCII_PRIMARY = {char: (rank, 0) for char, rank in _RANK.items() if char.isascii()}
_ASCII_TERTIARY = {char: _UPPER if char.isupper() else 0 for char in _ASCII_PRIMARY}


@functools.lru_cache(maxsize=4096)  # a writer orders the same names up to four times
def collation_key(text: str) -> tuple[tuple[Weight, ...], tuple[int, ...], tuple[int, ...]]:
    """Sort key: ``sorted(names, key=collation_key)`` orders as ``localeCompare`` does.

    A name of printable ASCII takes the table lookups alone (~10x faster than the element
    walk, which cost ~5 ms for the 400 newest names a writer at 10,000 files ranks)."""
    if text.isascii():
        primary = tuple(map(_ASCII_PRIMARY.get, text))
        if None not in primary:  # not a control character
            tertiary = tuple(map(_ASCII_TERTIARY.__getitem__, text))
            return primary, (0,) * len(text), tertiary  # type: ignore[return-value]
    elements = _contract_middle_dots([element for char in text for element in _elements(char)])
    return (
        tuple(element[0] for element in elements if element[0]),
        tuple(element[1] for element in elements),
        tuple(element[2] for element in elements),
    )


def _contract_middle_dots(elements: list[Element]) -> list[Element]:
    """CLDR's Catalan contraction: a middle dot right after l or L (``l·``, or ``ŀ``, which
    decomposes to it) is an accent of the l, after the stroke of ``ł``, not punctuation."""
    for at in range(1, len(elements)):
        if elements[at][0] == _MIDDLE_DOT and elements[at - 1][0] == _L:
            elements[at] = ((), _STROKE + 1, elements[at][2])
    return elements


def _elements(char: str) -> list[Element]:
    rank = _RANK.get(char)
    if rank is not None:
        return [((rank, 0), 0, _UPPER if char.isupper() else 0)]
    if char in _WHITESPACE:
        return [((_WHITESPACE[char], 0), 0, 0)]
    lower = char.lower()
    upper = _UPPER if lower != char else 0
    if lower in _LATIN_EXPANSIONS:  # æ: a, a ligature mark (after every accent), e
        first, *rest = (((_RANK[letter], 0), 0, 1 + upper) for letter in _LATIN_EXPANSIONS[lower])
        return [first, ((), _LIGATURE, 0), *rest]
    if lower in _LATIN_EXTRA:  # ø: o and a stroke (an accent after the common ones)
        return [((_RANK[_LATIN_EXTRA[lower]], 0), 0, upper), ((), _STROKE, 0)]
    decomposed = unicodedata.normalize("NFKD", char)
    if decomposed != char:
        return _decomposed(char, decomposed)
    return _single(char)


def _decomposed(char: str, decomposed: str) -> list[Element]:
    """A character that decomposes: its parts' weights, marks as accents, compatibility forms
    (full-width, ligatures, ...) one tertiary step above their plain form."""
    compat = unicodedata.normalize("NFD", char) != decomposed
    elements: list[Element] = []
    for part in decomposed:
        mark = _MARK_RANK.get(part)
        if mark is not None or unicodedata.category(part) == "Mn":
            rank = mark if mark is not None else len(_MARKS) + 2 + ord(part)
            elements.append(((), rank, 0))
            continue
        for primary, secondary, tertiary in _elements(part):
            elements.append((primary, secondary, tertiary + (1 if compat else 0)))
    return elements


def _single(char: str) -> list[Element]:
    code = ord(char)
    category = unicodedata.category(char)
    if category in ("Cc", "Cf", "Mn", "Me") or category == "Cs":
        return []  # ignorable
    if category == "Zs" or category in ("Zl", "Zp"):
        return [((_SPACE, 1, code), 0, 0)]
    if category == "Nd":
        return [((_DIGIT + unicodedata.digit(char, 0), 0), 0, 1)]
    if category.startswith("P"):
        return [((_PUNCT, 1, code), 0, 0)]
    if category in ("Sm", "Sk", "So", "No"):
        return [((_SYMBOL, -1, code), 0, 0)]
    if category == "Sc":
        return [((_SYMBOL, 1, code), 0, 0)]
    lower = char.lower()
    if len(lower) == 1 and lower != char:
        return [((_LETTERS_END, *_script_rank(ord(lower))), 0, _UPPER)]
    return [((_LETTERS_END, *_script_rank(code)), 0, _kana_tertiary(code))]


def _script_rank(code: int) -> tuple[int, int]:
    """Scripts after Latin, Greek and Cyrillic in CLDR root order: most by code point, Hangul
    before kana (katakana with hiragana), then Han by radical and strokes, then the rest."""
    if 0x30A1 <= code <= 0x30F6:
        return (2, code - 0x60)  # katakana sorts with its hiragana
    if 0x3041 <= code <= 0x309F:
        return (2, code)
    if 0xAC00 <= code <= 0xD7A3 or 0x1100 <= code <= 0x11FF or 0x3130 <= code <= 0x318F:
        return (1, code)
    if 0x3400 <= code <= 0x4DBF or 0x4E00 <= code <= 0x9FFF:
        return (3, _han_rank(chr(code)))
    if 0x20000 <= code <= 0x3FFFF:
        return (4, code)  # other extensions: by code point, after the table (approximate)
    return (0, code)


_HAN_RANK: dict[str, int] = {}


def _han_rank(char: str) -> int:
    if not _HAN_RANK:
        from qmem_git.core.collate_han import HAN_ORDER

        _HAN_RANK.update((han, rank) for rank, han in enumerate("".join(HAN_ORDER)))
    return _HAN_RANK[char]


def _kana_tertiary(code: int) -> int:
    return 1 if 0x30A1 <= code <= 0x30F6 else 0
