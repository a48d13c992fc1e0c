"""qmem-git's collation key against Node's ``localeCompare`` (the ICU collation Qwen Code sorts
file names of equal mtime with), on generated file names."""

from __future__ import annotations

import itertools
import random

from qmem_git.core.collate import collation_key
from qwen.conftest import Bridge

# the characters file names hold: ASCII, accented and other Latin letters, Greek, Cyrillic,
# CJK, kana, Hangul, Arabic, emoji, full-width forms, punctuation, invisible characters
POOL = list("abcxyzABCXYZ0189_-. ~$'()[]#@+=,") + list("éÉèêëäöüøØßñçåÅæÆœŒðłŁđħŋŊı")
POOL += list("中日本語记忆あアいイカか가나") + list("αΩяЖا") + ["😀", "😁", "👍", "€", "£"]
POOL += ["１", "Ａ", "ａ", "\u200b", "\t", "—", "–", "…", "«", "»", "©", "½", "¿", "¡"]


def _names(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choices(POOL, k=rng.randint(1, 5))) + ".md" for _ in range(count)]


def test_file_names_sort_as_local_compare(qwen: Bridge) -> None:
    batches = [_names(seed, 1000) for seed in range(4)]
    results = qwen([{"op": "collate", "strings": names} for names in batches])
    disagreements = []
    for theirs in results:
        for first, second in itertools.pairwise(theirs):
            if collation_key(first) > collation_key(second):
                disagreements.append((first, second))
    # 4,000 names, 3,996 neighbouring pairs in Node's order: qmem-git orders every pair alike
    assert disagreements == []


def test_a_middle_dot_after_l_is_an_accent_as_in_icu(qwen: Bridge) -> None:
    """CLDR's Catalan contraction: ``l·`` (and ``ŀ``, which decomposes to it) is an l with an
    accent after ł's stroke, not l then punctuation (a generated folder of the index
    differential test listed ``Ŀ趯ň7.md`` before ``ļ嬬ó.md``; Qwen lists it after)."""
    names = ["ļ嬬ó.md", "Ŀ趯ň7.md", "ŀa.md", "ła.md", "ļa.md", "la.md", "lb.md", "ŀb.md"]
    names += ["col·lecció.md", "coll.md", "colm.md", "col.md", "l·.md", "l趯.md", "L·z.md"]
    (theirs,) = qwen([{"op": "collate", "strings": names}])
    assert sorted(names, key=collation_key) == theirs
