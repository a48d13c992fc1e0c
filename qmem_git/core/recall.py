"""Recall: pick the memories relevant to a prompt and render the injected block (spec §10).

Pure and on the per-prompt hook path, so it avoids ``typing`` and ``dataclasses`` at run time
(each costs 10-30 ms of start-up here, ARCHITECTURE §6): documents are anything with the
attributes of :class:`qmem_git.core.model.Document` (the ``RecallDoc`` protocol), which lets
the document cache hand over light records without importing the model module.
"""

from __future__ import annotations

import math
from itertools import pairwise

from qmem_git.core.age import age_days, age_text, freshness_text
from qmem_git.core.lexicon import (
    PART_MARK,
    PART_WEIGHT,
    field_index,
    is_word_term,
    recall_terms,
    term,
    term_weight,
    terms,
)
from qmem_git.core.tokenize import MAX_TOKENS, cap_tokens, tokenize

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Literal, Protocol, TypeVar

    class RecallDoc(Protocol):
        """What recall reads from a document (a subset of ``core.model.Document``)."""

        @property
        def type(self) -> str: ...
        @property
        def relative_path(self) -> str: ...
        @property
        def title(self) -> str: ...
        @property
        def description(self) -> str: ...
        @property
        def body(self) -> str: ...
        @property
        def mtime_ms(self) -> float: ...

    D = TypeVar("D", bound=RecallDoc)
    Strategy = Literal["none", "heuristic", "model"]
    Selector = Callable[[list[D], str, int], Sequence[D]]

MAX_RECALL_DOCS = 5
MAX_BODY_CHARS = 1_200
EMPTY_BODY = "_No entries yet._"
NO_BODY = "_No detailed entries yet._"
HEADING = "## Relevant memory"
INSTRUCTION = (
    "Use the following memories only when they are directly relevant to the current request. "
    "Verify file/function claims before relying on them."
)
TRUNCATED_NOTE = "\n\n> NOTE: Relevant memory truncated for prompt budget."

# spec §10.3: type keywords, the seed's singular forms plus the source's plural/short forms.
TYPE_KEYWORDS: dict[str, frozenset[str]] = {
    "user": frozenset(("user", "preference", "preferences", "background", "role", "terse")),
    "feedback": frozenset(("feedback", "rule", "rules", "avoid", "style", "summary")),
    "project": frozenset(("project", "goal", "goals", "incident", "deadline", "release")),
    "reference": frozenset(("reference", "dashboard", "ticket", "docs", "doc", "link")),
}
_NO_KEYWORDS: frozenset[str] = frozenset()


class RecallResult:
    """What recall decided: the block to inject, the chosen documents and how they were chosen.

    ``docs_scanned`` counts the candidates after exclusions (telemetry, spec §10.1 step 6).
    """

    __slots__ = ("docs_scanned", "prompt", "selected", "strategy")

    def __init__(
        self, prompt: str, selected: list[RecallDoc], strategy: Strategy, docs_scanned: int
    ) -> None:
        self.prompt = prompt
        self.selected = selected
        self.strategy: Strategy = strategy
        self.docs_scanned = docs_scanned

    def _key(self) -> tuple[str, list[RecallDoc], str, int]:
        return (self.prompt, self.selected, self.strategy, self.docs_scanned)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RecallResult):
            return NotImplemented
        return self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]  # mutable value object

    def __repr__(self) -> str:
        paths = [doc.relative_path for doc in self.selected]
        return (
            f"RecallResult(strategy={self.strategy!r}, selected={paths!r}, "
            f"docs_scanned={self.docs_scanned}, prompt={len(self.prompt)} chars)"
        )


def recall_body(doc: RecallDoc) -> str:
    """The trimmed body, with the placeholder ``_No entries yet._`` counted as empty."""
    body = doc.body.strip()
    return "" if body == EMPTY_BODY else body


# BM25 (Robertson/Sparck Jones idf, k1 and b as usual) over title, description and body.
K1 = 1.2
B = 0.75
MIN_STORE_SIZE = 20  # idf as if the store had at least this many memories (small stores)
MIN_SCORE = 1.0  # a topical word in the title of half the store still passes; see select_heuristic
RELATIVE_CUTOFF = 0.4  # of the best score: a much weaker match is noise next to it
TYPE_BONUS = 0.25  # per query word that names the memory's type (spec §10.3 keywords)


def doc_terms(doc: RecallDoc) -> tuple[dict[str, float], float]:
    """The document's search index: the cached one when the scan has it, else built here."""
    cached: tuple[dict[str, float], float] | None = getattr(doc, "search_index", None)
    if cached is not None:
        return cached
    return search_index(doc.title, doc.description, doc.body)


def search_index(title: str, description: str, body: str) -> tuple[dict[str, float], float]:
    """Weighted term frequencies and length over title, description, first 1,200 body chars."""
    text = body.strip()
    text = "" if text == EMPTY_BODY else text[:MAX_BODY_CHARS]
    return field_index((title, description, text))


def query_terms(
    query: str, found: list[str] | None = None, tokens: list[str] | None = None
) -> dict[str, float]:
    """The query's search terms and how strongly each counts (1 or :data:`PART_WEIGHT`).

    Words come from the capped tokens (spec §10.2), stop words out. A word counts fully, and
    weakly as a part of a memory's compound (``green`` in ``blue-green``). A hyphenated
    compound of the query counts fully as a whole and weakly through its parts, so
    ``two-space`` does not find a memory about a "space". Two adjacent words also look for
    the compound they spell (``force push`` finds ``force-push``). ``found`` is
    ``recall_terms(query)`` and ``tokens`` is ``tokenize(query)`` when the caller has them.
    """
    if found is None:
        found = recall_terms(query)
    words = {key for key in found if is_word_term(key)}
    wanted: dict[str, float] = {}
    for token in tokenize(query) if tokens is None else tokens:
        word = term(token)
        if word is None:
            continue
        wanted[word] = 1.0 if word in words else max(wanted.get(word, 0.0), PART_WEIGHT)
        wanted[PART_MARK + word] = PART_WEIGHT
    for key in compound_keys(found):
        wanted[key] = 1.0
    return wanted


def compound_keys(found: list[str]) -> list[str]:
    """The compounds among recall terms, then every two adjacent words joined by ``-``.

    Capped like query tokens (spec §10.2), so a long prompt stays bounded.
    """
    compounds = [key for key in found if "-" in key and not key.startswith(PART_MARK)]
    pairs = [
        f"{first}-{second}"
        for first, second in pairwise(found)
        if is_word_term(first) and is_word_term(second)
    ]
    return cap_tokens(compounds + pairs)[:MAX_TOKENS]


def open_compounds(found: list[str], wanted: dict[str, float]) -> dict[str, list[str]]:
    """The query's compounds of two or more content parts, with those parts as words.

    A memory that has every such part as a word (``Docker Compose``) has the compound
    (``docker-compose``) written open; a compound like ``two-space`` has one content part, and
    a memory with that word alone does not have it.
    """
    spelled: dict[str, list[str]] = {}
    for index, key in enumerate(found):
        if key in wanted and "-" in key and not key.startswith(PART_MARK):
            parts = []
            for part in found[index + 1 :]:
                if not part.startswith(PART_MARK):
                    break
                parts.append(part.removeprefix(PART_MARK))
            if len(parts) >= 2:
                spelled[key] = parts
    return spelled


def document_hits(
    indexed: list[tuple[dict[str, float], float]],
    wanted: dict[str, float],
    spelled: dict[str, list[str]],
) -> list[dict[str, float]]:
    """Per document, the wanted terms it has and their weighted frequencies.

    An open compound (:func:`open_compounds`) counts as often as its rarest part.
    """
    words = [found for found in wanted if is_word_term(found)]
    others = [found for found in wanted if not is_word_term(found)]  # compounds and parts
    hits = []
    for counts, _ in indexed:
        found_here = {found: counts[found] for found in words if found in counts}
        if PART_MARK in counts:  # the memory has compounds
            found_here.update((found, counts[found]) for found in others if found in counts)
        hits.append(found_here)
    if spelled:
        for (counts, _), found_here in zip(indexed, hits, strict=True):
            for compound, parts in spelled.items():
                if compound not in found_here and all(part in counts for part in parts):
                    found_here[compound] = min(counts[part] for part in parts)
    return hits


def score_documents(docs: Sequence[RecallDoc], query: str) -> list[float]:
    """BM25 score of every document for ``query``.

    0 when the document shares no topical term with the query (generic words and parts of
    compounds alone do not count), which is the lexical gate of spec §10.3 on whole words.
    """
    found = recall_terms(query)
    tokens = tokenize(query)
    wanted = query_terms(query, found, tokens)
    if not wanted or not docs:
        return [0.0] * len(docs)
    indexed = [doc_terms(doc) for doc in docs]
    hits = document_hits(indexed, wanted, open_compounds(found, wanted))
    weights, topical = term_weights(wanted, hits, max(len(docs), MIN_STORE_SIZE))
    average = sum(length for _, length in indexed) / len(indexed) or 1.0
    scores = []
    for doc, (_, length), found_here in zip(docs, indexed, hits, strict=True):
        if topical.isdisjoint(found_here):
            scores.append(0.0)  # only generic words or compound parts in common: not a topic
            continue
        norm = K1 * (1.0 - B + B * length / average)
        score = 0.0
        for term_found, tf in found_here.items():
            score += weights[term_found] * tf * (K1 + 1.0) / (tf + norm)
        keywords = TYPE_KEYWORDS.get(doc.type, _NO_KEYWORDS)
        score += TYPE_BONUS * sum(1 for token in tokens if token in keywords)
        scores.append(score)
    return scores


def term_weights(
    wanted: dict[str, float], hits: list[dict[str, float]], size: int
) -> tuple[dict[str, float], set[str]]:
    """Each found term's idf x generic weight x strength, and the topical ones among them.

    A term is topical when it counts fully (not a generic word, not a compound part).
    """
    df: dict[str, int] = {}
    for found_here in hits:
        if found_here:
            for found in found_here:
                df[found] = df.get(found, 0) + 1
    weights: dict[str, float] = {}
    topical: set[str] = set()
    for found, count in df.items():
        idf = math.log(1.0 + (size - count + 0.5) / (count + 0.5))
        weight = term_weight(found.removeprefix(PART_MARK))
        strength = wanted[found]
        weights[found] = idf * weight * strength
        if weight == 1.0 and strength == 1.0:
            topical.add(found)
    return weights, topical


def select_heuristic(docs: Sequence[D], query: str, limit: int = MAX_RECALL_DOCS) -> list[D]:
    """Up to ``limit`` docs whose score passes the relevance threshold, best first.

    Whole-word BM25 replaces the seed's substring score (spec §10.3): ``the`` no longer hits
    ``other``. A memory is chosen only when its score reaches :data:`MIN_SCORE` and
    :data:`RELATIVE_CUTOFF` of the best one, so a prompt that shares only stop words or one
    generic word with the store injects nothing. Ties break by type name, then scan order
    (spec §10.4); ``docs`` must be in scan order.
    """
    if limit <= 0:
        return []
    scores = score_documents(docs, query)
    best = max(scores, default=0.0)
    floor = max(MIN_SCORE, RELATIVE_CUTOFF * best)
    chosen = sorted((-score, docs[i].type, i) for i, score in enumerate(scores) if score >= floor)
    return [docs[index] for _, _, index in chosen[:limit]]


def render_body(doc: RecallDoc) -> str:
    """The body as injected: placeholder when empty, cut at 1,200 chars with a NOTE."""
    body = recall_body(doc)
    if not body:
        return NO_BODY
    if len(body) > MAX_BODY_CHARS:
        return body[:MAX_BODY_CHARS].rstrip() + TRUNCATED_NOTE
    return body


def shown_description(title: str, description: str, body: str) -> str:
    """The description line, left empty when it says nothing the title and body do not.

    Extraction used to write one sentence as name, description and body; printing it three
    times spends the prompt budget on nothing. "Nothing new" means every search term of the
    description is in the title or the body. The line itself stays (spec §10.5).
    """
    words = set(terms(description))
    if not words or words <= set(terms(f"{title}\n{body}")):
        return ""
    return description


def doc_lines(doc: RecallDoc, now_ms: float) -> list[str]:
    """One document's section of the block, ending with its blank line (spec §10.5)."""
    days = age_days(doc.mtime_ms, now_ms)
    body = render_body(doc)
    lines = [
        f"### {doc.title} ({doc.relative_path})",
        f"Saved {age_text(days)}.",
        shown_description(doc.title, doc.description, body),
        "",
        body,
    ]
    freshness = freshness_text(days)
    if freshness:
        lines += ["", f"> NOTE: {freshness}"]
    lines.append("")
    return lines


def render_block(docs: Iterable[RecallDoc], now_ms: float) -> str:
    """The ``## Relevant memory`` block; "" for no docs, else it ends with exactly one newline."""
    lines = [HEADING, "", INSTRUCTION, ""]
    for doc in docs:
        lines += doc_lines(doc, now_ms)
    return "\n".join(lines) if len(lines) > 4 else ""


def resolve_recall(
    docs: Sequence[D],
    query: str,
    now_ms: float,
    limit: int = MAX_RECALL_DOCS,
    excluded: Iterable[str] = (),
    selector: Selector[D] | None = None,
) -> RecallResult:
    """Recall flow (spec §10.1) over docs in scan order; ``excluded`` holds relative paths.

    A selector (the model, §10.6) that returns docs wins, one that returns none means "nothing
    is relevant" (no heuristic fallback), and one that raises falls through to the heuristic.
    """
    skip = set(excluded)
    candidates = [doc for doc in docs if doc.relative_path not in skip]
    scanned = len(candidates)
    if not query.strip() or not candidates or limit <= 0:
        return RecallResult("", [], "none", scanned)
    if selector is not None:
        chosen = _ask_selector(selector, candidates, query, limit)
        if chosen is not None:
            return _result(chosen, "model", now_ms, scanned)
    return _result(select_heuristic(candidates, query, limit), "heuristic", now_ms, scanned)


def _result(
    chosen: Sequence[RecallDoc], how: Strategy, now_ms: float, scanned: int
) -> RecallResult:
    """Strategy ``how`` when something was chosen, else ``none`` with an empty prompt."""
    if not chosen:
        return RecallResult("", [], "none", scanned)
    selected: list[RecallDoc] = list(chosen)
    return RecallResult(render_block(selected, now_ms), selected, how, scanned)


def _ask_selector(selector: Selector[D], docs: list[D], query: str, limit: int) -> list[D] | None:
    """The selector's answer cut to ``limit``, or None when it failed (any error falls back)."""
    try:
        return list(selector(docs, query, limit))[:limit]
    except Exception:
        return None
