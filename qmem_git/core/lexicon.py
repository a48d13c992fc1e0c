"""Search terms of a text: recall's tokens minus stop words, accent-folded and lightly stemmed.

Shared by recall's BM25 scoring (``core.recall``) and the near-duplicate check of extraction
(``core.patches``). It runs on every prompt, so it imports only ``unicodedata`` and the
tokenizer, and keeps its word lists as frozensets.

- Stop words are removed: function words of English, French, Spanish and German, chat words
  (``please``, ``thanks``, ``okay``), and CJK bigrams made only of particles or politeness
  endings (``して``, ``ください`` → ``くだ``/``ださ``/``さい``, ``一下``, ``주세``).
- Generic words of coding prompts (``file``, ``test``, ``error``, ``fix``) stay, but recall
  weighs them down (:data:`GENERIC_WEIGHT`): they are in almost every prompt, so one of them
  alone says little about which memory helps.
- A hyphenated compound (``blue-green``, ``force-push``, ``on-call``) is a search term of its
  own for recall (:func:`recall_terms`); its parts are kept as marked part terms (``~green``)
  that recall matches only weakly (:data:`PART_WEIGHT`), so ``green`` alone does not find a
  ``blue-green`` memory while ``blue-green`` and ``blue green`` do.
- Latin words are folded (``déployer`` = ``deployer``) and stemmed with a few suffix rules
  (``deploys``/``deployed``/``deployment`` → ``deploy``); both sides go through the same rules,
  so a stem only has to be consistent, not a real word.
"""

from __future__ import annotations

import unicodedata

from qmem_git.core.tokenize import (
    _ASCII_SEPARATORS,
    MIN_WORD_LENGTH,
    ascii_tokens,
    is_cjk,
    normalize,
    unicode_tokens,
)

GENERIC_WEIGHT = 0.35
PART_WEIGHT = 0.3  # a lone word against a part of a compound, or the other way round
PART_MARK = "~"  # prefix of a part term: ``~green`` is "green" inside a compound
FIELD_WEIGHTS = (2.0, 1.5, 1.0)  # title, description, body
# Bump when the word lists or rules change: the recall cache stores indexes built with them.
LEXICON_VERSION = 2
MEMO_LIMIT = 200_000

# fmt: off
_ENGLISH = (
    "a about above after again against all almost already also although am an and another any"
    " anyone anything anyway are aren around as at back be because been before being below"
    " between both but by can cannot could couldn did didn do does doesn doing don done down"
    " during each either else enough etc even ever every few for from further get gets getting"
    " give go goes going gone got had hadn has hasn have haven having he her here hers herself"
    " him himself his how however i if in into is isn it its itself just last least less let"
    " lets like likely many may maybe me might mine more most much must mustn my myself near"
    " need needs neither next no nobody none nor not nothing now of off often on once one only"
    " onto or other others otherwise our ours ourselves out over own per perhaps put quite"
    " rather really same say says see seem seems shall shan she should shouldn since so some"
    " somebody someone something sometimes somewhere still such sure take than that the their"
    " theirs them themselves then there these they thing things this those though through thus"
    " till to too toward towards two under unless until up upon us very via want wants was"
    " wasn way we well were weren what whatever when whenever where whether which while who"
    " whom whose why will with within without won would wouldn yes yet you your yours yourself"
    " yourselves always never please pls thanks thank thx okay ok hello hey sure great cool"
    " nice perfect awesome lot lots kind sort bit able actually basically simply tell know"
    " think guess mean wonder try trying tried walk"
)
_FRENCH = (
    "alors au aucun aussi autre aux avec avoir bon car ce cela celle celui ces cet cette ceux"
    " chaque comme comment dans des donc dont elle elles encore est et etre fait faire faut"
    " ici ils je juste la le les leur leurs lui mais meme mes moi mon ne nos notre nous on ont"
    " ou par pas peut peux plus pour pourquoi quand que quel quelle quels qui sa sans se ses"
    " si sont son sur ta te tes toi ton tous tout toute toutes tres tu un une vos votre vous"
    " etait merci plait oui non"
)
_SPANISH = (
    "al algo como con cual cuando del desde donde el ella ellos en entre era es esa ese eso"
    " esta este esto estos hay los mas muy nos para pero por porque que quien se sin sobre"
    " son su sus tambien todo una uno unos usted gracias"
)
_GERMAN = (
    "aber alle als also auch auf aus bei bin bis bitte das dass dem den der des die doch dort"
    " durch ein eine einem einen einer es fur hat hier ich ihr ist jetzt kann mit nach nicht"
    " noch nur oder sich sie sind und uns von vor war warum was weil wenn wie wir wird zu zum"
    " zur danke"
)
# Bigrams of Japanese particles, copulas and politeness endings, Chinese function words and
# Korean endings: they pair with anything, so they carry no topic.
_CJK_STOP = (
    "して しま ます です でし ませ ない ある いる する され れる られ てい ての には では とは"
    " での への から まで など この その あの こと もの よう ので くだ ださ さい ちょ ょっ っと"
    " 一下 这个 那个 这段 什么 怎么 为什 么的 我们 你们 他们 可以 是否 如何 哪里 的时 时候 一个"
    " 没有 就是 还是 请帮 帮我 是什"
    " 주세 세요 해주 니다 습니 합니 있는 하는 에서 으로 해요 어요 알려 려줘 해도 돼요"
)
# Words of almost every coding prompt: kept, but weighed down.
_GENERIC = (
    "add added adding make makes made use used using uses fix fixed fixes change changes"
    " changed update updated remove delete create write read check show help explain work"
    " works working file files code function functions method class variable value values"
    " type types test tests error errors issue problem line lines page button form list name"
    " names message messages data new old time times set start stop build script output"
    " input result return call string number text default version project repo app user"
    " users run runs running find look looks right wrong good bad better best first second"
    " keep keeps instead here case cases part example"
)
# fmt: on

STOP_WORDS: frozenset[str] = frozenset(
    " ".join((_ENGLISH, _FRENCH, _SPANISH, _GERMAN, _CJK_STOP)).split()
)
_GENERIC_WORDS = frozenset(_GENERIC.split())
_ACCENT_FREE: dict[str, str] = {}


def fold(word: str) -> str:
    """``déployer`` → ``deployer``: combining marks removed (Latin-script words only)."""
    folded = _ACCENT_FREE.get(word)
    if folded is None:
        decomposed = unicodedata.normalize("NFKD", word)
        folded = "".join(c for c in decomposed if not unicodedata.combining(c))
        _ACCENT_FREE[word] = folded
    return folded


def stem(word: str) -> str:
    """A light suffix stripper: plurals, ``-ing``, ``-ed``, ``-ment``, a final ``e``."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses") or word.endswith(("ches", "shes", "xes", "zes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if word.endswith("ing") and len(word) >= 7:
        word = _undouble(word[:-3])
    elif word.endswith("ed") and len(word) >= 6:
        word = _undouble(word[:-2])
    elif word.endswith("ment") and len(word) >= 8:
        word = word[:-4]
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


def _undouble(word: str) -> str:
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
        return word[:-1]
    return word


_TERMS: dict[str, str | None] = {}


def term(token: str) -> str | None:
    """The search term of one tokenizer token, or None for a stop word (memoised)."""
    try:
        return _TERMS[token]
    except KeyError:
        if len(_TERMS) >= MEMO_LIMIT:  # a long-lived process sees an open vocabulary
            _TERMS.clear()
            _ACCENT_FREE.clear()
        found = _TERMS[token] = _term(token)
        return found


def _term(token: str) -> str | None:
    if token in STOP_WORDS:
        return None
    if token.isascii():
        return stem(token)
    if len(token) == 2 and is_cjk(token[0]):
        return token  # a CJK bigram
    folded = fold(token)
    if folded in STOP_WORDS:
        return None
    return stem(folded)


def terms(text: str) -> list[str]:
    """Search terms of ``text`` in order, with repeats (for term frequencies)."""
    return _plain_terms(normalize(text))


def _plain_terms(normalized: str) -> list[str]:
    tokens = ascii_tokens(normalized) if normalized.isascii() else unicode_tokens(normalized)
    known = _TERMS
    found: list[str] = []
    for token in tokens:
        found_term = known[token] if token in known else term(token)
        if found_term is not None:
            found.append(found_term)
    return found


# ASCII punctuation except the hyphen separates chunks; U+2010 HYPHEN counts as ``-``.
_CHUNK_SEPARATORS = {**_ASCII_SEPARATORS, ord("-"): "-", 0x2010: "-"}


def recall_terms(text: str) -> list[str]:
    """Recall's terms of ``text`` in order, with repeats: words, compounds and compound parts.

    Like :func:`terms`, except that a hyphenated compound (``blue-green deploys``) gives the
    compound itself (``blue-green``) and its parts marked with :data:`PART_MARK` (``~blue``,
    ``~green``) instead of the plain words. Stop words and short words stay in the compound
    (``on-call``, ``two-space``); a compound of function words only (``peux-tu``) gives nothing.
    """
    normalized = normalize(text)
    if "-" not in normalized and "\u2010" not in normalized:
        return _plain_terms(normalized)
    found: list[str] = []
    plain: list[str] = []
    for chunk in normalized.translate(_CHUNK_SEPARATORS).split():
        compound = compound_terms(chunk) if "-" in chunk else None
        if compound is None:
            plain.append(chunk)
            continue
        if plain:
            found += _plain_terms(" ".join(plain))
            plain = []
        found += compound
    if plain:
        found += _plain_terms(" ".join(plain))
    return found


def compound_terms(chunk: str) -> list[str] | None:
    """``blue-green`` → ``["blue-green", "~blue", "~green"]``; None when not a compound.

    A compound is two or more runs of letters and digits joined by single hyphens, at least
    one with a letter (``2026-03-05`` is a date), none CJK. Each part is folded and stemmed
    like a word, so ``force-pushed`` is ``force-push`` and ``après-midi`` is ``apres-midi``.
    """
    pieces = chunk.split("-")
    if len(pieces) < 2 or not all(_compound_piece(piece) for piece in pieces):
        return None
    if all(piece.isdigit() for piece in pieces):
        return None
    keys: list[str] = []
    parts: list[str] = []
    for piece in pieces:
        found = term(piece) if len(piece) >= MIN_WORD_LENGTH else None
        keys.append(fold(piece) if found is None else found)
        if found is not None:
            parts.append(PART_MARK + found)
    return ["-".join(keys), *parts] if parts else []


def _compound_piece(piece: str) -> bool:
    if not piece.isalnum():
        return False
    return piece.isascii() or not any(is_cjk(char) for char in piece)


def is_word_term(found_term: str) -> bool:
    """True for a plain word term, False for a compound or a part of one."""
    return "-" not in found_term and not found_term.startswith(PART_MARK)


def term_weight(found_term: str) -> float:
    """1 for a topical term, :data:`GENERIC_WEIGHT` for a word of almost every coding prompt."""
    return GENERIC_WEIGHT if found_term in _GENERIC_TERMS else 1.0


_GENERIC_TERMS = frozenset(stem(word) for word in _GENERIC_WORDS)


def field_index(fields: tuple[str, ...]) -> tuple[dict[str, float], float]:
    """Weighted term frequencies over (title, description, body) and the weighted length.

    A term in the title counts 2, in the description 1.5, in the body 1 (BM25F-style), so a
    memory named after the prompt's topic outranks one that mentions it in passing. Terms are
    :func:`recall_terms`: compounds and their marked parts included; the bare
    :data:`PART_MARK` key counts the compounds, so recall looks for compounds and parts only
    in a memory that has some.
    """
    counts: dict[str, float] = {}
    length = 0.0
    for text, weight in zip(fields, FIELD_WEIGHTS, strict=False):
        for found in recall_terms(text):
            counts[found] = counts.get(found, 0.0) + weight
            if "-" not in found:  # the length counts words: a compound's are its parts
                length += weight
            elif not found.startswith(PART_MARK):
                counts[PART_MARK] = counts.get(PART_MARK, 0.0) + weight
    return counts, length
