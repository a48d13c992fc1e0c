"""Model-backed planners with deterministic fallbacks, and the strategy each run reports.

``--planner auto|heuristic|model`` picks a :class:`ModelConfig` (or none) with
:func:`model_for`; the factories below turn it into the callables ``plan_extract``,
``plan_dream_op``, ``plan_forget_op`` and ``recall`` accept. With no model they are the
deterministic planners; with one they ask the model and, on any failure — transport, HTTP,
malformed or invalid answer — run the deterministic planner and say why in the strategy.

This module is imported by the op modules for its result types, so it must not import
``requests``: each planner makes its HTTP client (``integrations.llm``) the first time it
actually asks the model, so a planner that is never asked — a gated-out dream, ``forget --id`` —
costs no ``requests`` import. Recall's selector lives in the lighter ``ops.recallmodel``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from qmem_git.core.dedupe import DreamPlan, ReadText, plan_dream
from qmem_git.core.extract import Message
from qmem_git.core.forget import Candidate, list_candidates, select_heuristic
from qmem_git.core.model import Document
from qmem_git.core.patches import Patch
from qmem_git.core.planner import plan_heuristic
from qmem_git.errors import ModelError, UsageError
from qmem_git.modelconfig import ModelConfig
from qmem_git.ops.recallmodel import LazyClient, log_fallback

if TYPE_CHECKING:
    from qmem_git.integrations.llm import ChatClient
    from qmem_git.integrations.transcripts import Transcript

K = TypeVar("K")
R = TypeVar("R")

STRATEGY_TRAILER = "Qmem-Strategy"
FALLBACK_TRAILER = "Qmem-Model-Fallback"
MODEL = "model"
HEURISTIC = "heuristic"
NONE = "none"
PLANNER_CHOICES = ("auto", "heuristic", "model")
PlannerChoice = Literal["auto", "heuristic", "model"]


@dataclass(frozen=True)
class Strategy:
    """Who decided: ``model``, ``heuristic`` or ``none``; ``fallback`` = why not the model."""

    name: str
    fallback: str | None = None

    def trailers(self) -> tuple[tuple[str, str], ...]:
        """``Qmem-Strategy`` and, after a failed model call, ``Qmem-Model-Fallback: <kind>``."""
        found: tuple[tuple[str, str], ...] = ((STRATEGY_TRAILER, self.name),)
        if self.fallback:
            found += ((FALLBACK_TRAILER, self.fallback),)
        return found

    def as_dict(self) -> dict[str, str | None]:
        """The ``--json`` and telemetry fields: ``strategy`` and ``model_fallback`` (never any
        model text, never the key)."""
        return {"strategy": self.name, "model_fallback": self.fallback}


@dataclass(frozen=True)
class PlannedPatches:
    """An extraction planner's answer with the strategy that produced it."""

    patches: list[Patch]
    strategy: Strategy


@dataclass(frozen=True)
class PlannedDream:
    """A dream plan with the strategy that produced it (``heuristic`` = mechanical pass)."""

    plan: DreamPlan
    strategy: Strategy


@dataclass(frozen=True)
class SelectedCandidates:
    """A forget selection with the strategy that produced it."""

    matches: list[Candidate]
    strategy: Strategy


ExtractPlanner = Callable[[list[Message]], PlannedPatches]
DreamPlanner = Callable[[Sequence[Document], ReadText], PlannedDream]
ForgetSelector = Callable[[Sequence[Candidate], str, int | None], SelectedCandidates]


def model_for(choice: str, config: ModelConfig | None) -> ModelConfig | None:
    """The endpoint a ``--planner`` choice uses: ``auto`` = the configured one, if any."""
    if choice == "heuristic":
        return None
    if choice == "model" and config is None:
        raise UsageError(
            "--planner model needs a model endpoint, and none is configured",
            "set QMEM_LLM_BASE_URL and QMEM_LLM_MODEL (see the README section 'Using a model'), "
            "or use --planner auto",
        )
    if choice not in PLANNER_CHOICES:
        raise UsageError(f"unknown planner {choice!r}", "use auto, heuristic or model")
    return config


class LastCall(Generic[K, R]):
    """Remembers the last answer by a key of its inputs.

    The pipeline asks the model once *before* taking the repository's writer lock (a slow
    endpoint must not hold up other writers for up to a minute), then plans again under the
    lock; when nothing changed in between the second call costs nothing. When something did
    change, the model is simply asked again — a stale answer is never reused.
    """

    def __init__(self) -> None:
        self._entry: tuple[K, R] | None = None

    def get(self, key: K, compute: Callable[[], R]) -> R:
        if self._entry is not None and self._entry[0] == key:
            return self._entry[1]
        value = compute()
        self._entry = (key, value)
        return value


# --------------------------------------------------------------------------- extraction


def extract_planner(
    config: ModelConfig | None,
    load_docs: Callable[[], Sequence[Document]],
    client: ChatClient | None = None,
) -> ExtractPlanner:
    """Spec §7.4 side-query planner over ``config``, else the heuristic (§7.5).

    ``load_docs`` gives the current memories for the prompt's summaries (read only when the
    model is actually asked).
    """
    if config is None:
        return lambda messages: PlannedPatches(plan_heuristic(messages), Strategy(HEURISTIC))
    chat = LazyClient(config, client)
    last: LastCall[tuple[Message, ...], PlannedPatches] = LastCall()

    def ask(messages: list[Message]) -> PlannedPatches:
        if not any(m.role == "user" and m.text for m in messages):
            return PlannedPatches([], Strategy(MODEL))  # §7.4: the model is not called
        try:
            patches = ask_extract(chat(), messages, load_docs())
        except ModelError as exc:
            return PlannedPatches(plan_heuristic(messages), fell_back("extract", exc))
        return PlannedPatches(patches, Strategy(MODEL))

    return lambda messages: last.get(tuple(messages), lambda: ask(messages))


def ask_extract(
    chat: ChatClient, messages: Sequence[Message], docs: Sequence[Document]
) -> list[Patch]:
    """Model patches for the messages that fit the prompt, heuristic ones for older messages."""
    from qmem_git.ops.modelplans import extract_prompt, parse_extract_answer
    from qmem_git.ops.recallmodel import load_prompt

    prompt = extract_prompt(messages, docs)
    answer = chat.complete_json(load_prompt("extract"), prompt.text)
    patches = parse_extract_answer(answer, prompt.sent)
    return plan_heuristic(prompt.omitted) + patches


def fell_back(planner: str, exc: ModelError) -> Strategy:
    return Strategy(HEURISTIC, log_fallback(planner, exc))


# --------------------------------------------------------------------------- dream


def mechanical_dream(docs: Sequence[Document], read_text: ReadText) -> PlannedDream:
    return PlannedDream(plan_dream(docs, read_text), Strategy(HEURISTIC))


def dream_planner(config: ModelConfig | None, client: ChatClient | None = None) -> DreamPlanner:
    """Spec §8.4: the model's checked plan, else (failure, empty or no-op) the mechanical pass."""
    if config is None:
        return mechanical_dream
    chat = LazyClient(config, client)
    last: LastCall[tuple[Document, ...], PlannedDream] = LastCall()

    def ask(docs: Sequence[Document], read_text: ReadText) -> PlannedDream:
        if not docs:
            return mechanical_dream(docs, read_text)
        try:
            planned = ask_dream(chat(), docs, read_text)
        except ModelError as exc:
            return PlannedDream(plan_dream(docs, read_text), fell_back("dream", exc))
        if planned.is_empty:
            return PlannedDream(plan_dream(docs, read_text), Strategy(HEURISTIC, "no-op"))
        return PlannedDream(planned, Strategy(MODEL))

    return lambda docs, read_text: last.get(tuple(docs), lambda: ask(docs, read_text))


def ask_dream(chat: ChatClient, docs: Sequence[Document], read_text: ReadText) -> DreamPlan:
    from qmem_git.ops.modeldream import dream_prompt, parse_dream_answer, plan_from_actions
    from qmem_git.ops.recallmodel import load_prompt

    text, listed = dream_prompt(docs)
    answer = chat.complete_json(load_prompt("dream"), text)
    return plan_from_actions(parse_dream_answer(answer, listed), docs, read_text)


# --------------------------------------------------------------------------- forget


def heuristic_forget(
    candidates: Sequence[Candidate], query: str, limit: int | None
) -> SelectedCandidates:
    matches = select_heuristic(candidates, query, limit)
    return SelectedCandidates(matches, Strategy(HEURISTIC if matches else NONE))


def forget_selector(config: ModelConfig | None, client: ChatClient | None = None) -> ForgetSelector:
    """Spec §11.2: the model's choice (``none`` when it picks nothing), heuristic on error."""
    if config is None:
        return heuristic_forget
    chat = LazyClient(config, client)
    last: LastCall[tuple[tuple[Candidate, ...], str, int | None], SelectedCandidates]
    last = LastCall()

    def ask(candidates: Sequence[Candidate], query: str, limit: int | None) -> SelectedCandidates:
        if not candidates or not query.strip():
            return SelectedCandidates([], Strategy(NONE))
        try:
            matches = ask_forget(chat(), candidates, query, limit)
        except ModelError as exc:
            fallback = heuristic_forget(candidates, query, limit)
            return SelectedCandidates(fallback.matches, fell_back("forget", exc))
        return SelectedCandidates(matches, Strategy(MODEL if matches else NONE))

    return lambda candidates, query, limit: last.get(
        (tuple(candidates), query, limit), lambda: ask(candidates, query, limit)
    )


def ask_forget(
    chat: ChatClient, candidates: Sequence[Candidate], query: str, limit: int | None
) -> list[Candidate]:
    from qmem_git.ops.modelplans import forget_prompt, parse_forget_answer
    from qmem_git.ops.recallmodel import load_prompt

    text, listed = forget_prompt(query, candidates)
    most = limit if limit is not None else len(listed)
    answer = chat.complete_json(load_prompt("forget", limit=most), text)
    return parse_forget_answer(answer, listed, limit)


# --------------------------------------------------------------------------- outside the lock


def warm_extract(
    planner: ExtractPlanner,
    transcript: Transcript,
    session_id: str | None,
    cursor: Mapping[str, Any],
) -> None:
    """Ask the planner now, for the slice ``plan_extract`` will plan under the writer lock.

    Both slice with ``ops.extract.extract_slice``, so the answer is reused under the lock unless
    the transcript or the cursor changed in between.
    """
    from qmem_git.ops.extract import extract_slice

    part = extract_slice(transcript, session_id, cursor)
    if not part.all_wrote_memory:
        planner(part.messages)


def warm_dream(planner: DreamPlanner, memory_root: str) -> None:
    """Ask the dream planner now, over the documents ``plan_dream_op`` will scan."""
    from qmem_git.ops.remember import unpinned
    from qmem_git.store.workdir import read_text, scan_documents

    docs = unpinned(scan_documents(memory_root))
    planner(docs, lambda rel: read_text(os.path.join(memory_root, rel)))


def warm_forget(
    selector: ForgetSelector, memory_root: str, query: str | None, limit: int | None = None
) -> None:
    """Ask the forget selector now, with the arguments ``plan_forget_op`` will pass."""
    from qmem_git.ops.remember import unpinned
    from qmem_git.store.workdir import scan_documents

    if query and query.strip():
        selector(list_candidates(unpinned(scan_documents(memory_root))), query.strip(), limit)
