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
