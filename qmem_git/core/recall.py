"""Recall: pick the memories relevant to a prompt and render the injected block (spec §10).

Pure and on the per-prompt hook path, so it avoids ``typing`` and ``dataclasses`` at run time
(each costs 10-30 ms of start-up here, ARCHITECTURE §6): documents are anything with the
attributes of :class:`qmem_git.core.model.Document` (the ``RecallDoc`` protocol), which lets
the document cache hand over light records without importing the model module.
"""

from __future__ import annotations

from qmem_git.core.age import age_days, age_text, freshness_text
from qmem_git.core.tokenize import normalize, tokenize

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


def score_document(doc: RecallDoc, tokens: Sequence[str]) -> int:
    """Seed score with the lexical gate: 0 unless some token is a substring (spec §10.3)."""
    body = recall_body(doc)
    content = normalize(f"{doc.type} {doc.title} {doc.description} {body[:MAX_BODY_CHARS]}")
    keywords = TYPE_KEYWORDS.get(doc.type, _NO_KEYWORDS)
    score = 0
    hit = False
    for token in tokens:
        if token in content:
            score += 2
            hit = True
        if token in keywords:
            score += 1
    if not hit:
        return 0
    return score + 1 if body else score


def select_heuristic(docs: Sequence[D], query: str, limit: int = MAX_RECALL_DOCS) -> list[D]:
    """Up to ``limit`` docs with a lexical hit, best first (spec §10.4).

    ``docs`` must be in scan order: it is the last tie-break, after score and type name.
    """
    tokens = tokenize(query)
    if not tokens or limit <= 0:
        return []
    ranked: list[tuple[int, str, int]] = []
    for index, doc in enumerate(docs):
        score = score_document(doc, tokens)
        if score:
            ranked.append((-score, doc.type, index))
    ranked.sort()
    return [docs[index] for _, _, index in ranked[:limit]]


def render_body(doc: RecallDoc) -> str:
    """The body as injected: placeholder when empty, cut at 1,200 chars with a NOTE."""
    body = recall_body(doc)
    if not body:
        return NO_BODY
    if len(body) > MAX_BODY_CHARS:
        return body[:MAX_BODY_CHARS].rstrip() + TRUNCATED_NOTE
    return body


def doc_lines(doc: RecallDoc, now_ms: float) -> list[str]:
    """One document's section of the block, ending with its blank line (spec §10.5)."""
    days = age_days(doc.mtime_ms, now_ms)
    lines = [
        f"### {doc.title} ({doc.relative_path})",
        f"Saved {age_text(days)}.",
        doc.description,
        "",
        render_body(doc),
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
