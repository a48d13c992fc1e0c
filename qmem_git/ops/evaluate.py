"""Score extraction and recall on labelled sets (issue 23): the numbers ``make bench`` prints.

The sets are JSON (``tests/fixtures/eval/extract-eval.json`` and ``recall-eval.json``; their
``about`` fields describe the shape). The caller loads them and hands over the planner or the
selector to score, so the heuristic and a configured model are scored on the same cases:

- extraction: every turn is planned alone as one user message; a turn is *kept* when it yields
  a patch. Durable turns should be kept with the labelled type, the others (questions,
  requests, thanks, temporary, chatter) never; a turn that restates a memory of ``existing``
  must not create a file over those memories.
- recall: every case is a prompt over the set's memories (same mtime, path
  ``<type>/<id>.md``); the first of ``relevant`` should be chosen first; an empty ``relevant``
  means recall must stay silent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from qmem_git.core.codec import render_document
from qmem_git.core.extract import Message
from qmem_git.core.model import Document
from qmem_git.core.patches import Patch, normalize_patches, plan_patches
from qmem_git.core.recall import MAX_RECALL_DOCS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmem_git.modelconfig import ModelConfig

EvalSet = Mapping[str, Any]
Planner = Callable[[list[Message]], Sequence[Patch]]
Selector = Callable[[list[Document], str, int], Sequence[Document]]
NOW_MS = 1_800_000_000_000
TALK_KINDS = ("question", "request", "thanks", "temporary", "chatter")


def documents(items: Sequence[Mapping[str, str]]) -> list[Document]:
    """The set's memories as documents at ``<type>/<id>.md``, all with the same mtime."""
    return [
        Document(
            item["type"],  # type: ignore[arg-type]  # the sets only hold the four types
            f"{item['type']}/{item['id']}.md",
            item["title"],
            item["description"],
            item["body"],
            NOW_MS,
        )
        for item in items
    ]


def doc_id(doc: Document) -> str:
    return doc.relative_path.rsplit("/", 1)[-1].removesuffix(".md")


@dataclass
class ExtractScores:
    """Counts over the extraction set; the rates are properties."""

    durable: int = 0
    durable_kept: int = 0
    kept: int = 0
    type_right: int = 0
    talk_kept: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TALK_KINDS, 0))
    talk: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TALK_KINDS, 0))
    restated: int = 0
    duplicates: int = 0
    lead_ins: int = 0
    lead_ins_left: int = 0
    misses: list[str] = field(default_factory=list)

    @property
    def recall(self) -> float:
        """Durable turns kept / durable turns."""
        return self.durable_kept / self.durable if self.durable else 0.0

    @property
    def precision(self) -> float:
        """Durable turns among the kept ones."""
        return self.durable_kept / self.kept if self.kept else 0.0

    @property
    def type_accuracy(self) -> float:
        """Right type among the kept durable turns."""
        return self.type_right / self.durable_kept if self.durable_kept else 0.0

    @property
    def questions_or_requests_kept(self) -> int:
        return self.talk_kept["question"] + self.talk_kept["request"]


def score_extraction(data: EvalSet, planner: Planner, batch: str | None = None) -> ExtractScores:
    """Plan every turn of the set (or of one ``batch``) alone and count what was kept."""
    existing = documents(data["existing"])
    texts = {
        doc.relative_path: render_document(doc.title, doc.description, doc.type, doc.body)
        for doc in existing
    }
    scores = ExtractScores()
    for turn in data["turns"]:
        if batch is not None and turn.get("batch", "tuned") != batch:
            continue
        patches = normalize_patches(planner([Message(0, "user", turn["text"])]))
        _count_turn(scores, turn, patches)
        if turn.get("duplicateOf") and patches:
            scores.restated += 1
            created = plan_patches(
                existing,
                patches,
                read_text=texts.__getitem__,
                path_taken=lambda rel: False,
                now_ms=NOW_MS,
            ).created
            scores.duplicates += bool(created)
    return scores


def _count_turn(scores: ExtractScores, turn: Mapping[str, Any], patches: list[Patch]) -> None:
    kept = bool(patches)
    scores.kept += kept
    if not turn["durable"]:
        scores.talk[turn["kind"]] += 1
        scores.talk_kept[turn["kind"]] += kept
        if kept:
            scores.misses.append(f"kept {turn['kind']}: {turn['id']}")
        return
    scores.durable += 1
    scores.durable_kept += kept
    if not kept:
        scores.misses.append(f"missed: {turn['id']}")
        return
    if patches[0].topic == turn["type"]:
        scores.type_right += 1
    else:
        scores.misses.append(f"type {patches[0].topic} != {turn['type']}: {turn['id']}")
    if "summary" in turn:
        scores.lead_ins += 1
        left = patches[0].summary.lower().startswith(("remember", "note", "fyi", "save"))
        scores.lead_ins_left += left


@dataclass
class RecallScores:
    """Counts over the recall set; the rates are properties."""

    prompts: int = 0
    answerable: int = 0
    first_right: int = 0
    any_right: int = 0
    unanswerable: int = 0
    silent: int = 0
    chosen: int = 0
    chosen_relevant: int = 0
    irrelevant: int = 0
    errors: int = 0
    misses: list[str] = field(default_factory=list)

    @property
    def top1(self) -> float:
        """Answerable prompts whose expected memory came first."""
        return self.first_right / self.answerable if self.answerable else 0.0

    @property
    def recall(self) -> float:
        """Answerable prompts with at least one relevant memory chosen."""
        return self.any_right / self.answerable if self.answerable else 0.0

    @property
    def silence(self) -> float:
        """Prompts with nothing relevant that got nothing."""
        return self.silent / self.unanswerable if self.unanswerable else 0.0

    @property
    def precision(self) -> float:
        """Relevant memories among all chosen ones."""
        return self.chosen_relevant / self.chosen if self.chosen else 0.0

    @property
    def irrelevant_per_prompt(self) -> float:
        return self.irrelevant / self.prompts if self.prompts else 0.0


def score_recall(
    data: EvalSet, select: Selector, batch: str | None = None, limit: int = MAX_RECALL_DOCS
) -> RecallScores:
    """Ask ``select`` for every case (or one ``batch``) and count right, silent and noise.

    A selector that raises counts as an error and as choosing nothing.
    """
    docs = documents(data["docs"])
    scores = RecallScores()
    for case in data["cases"]:
        if batch is not None and case.get("batch", "tuned") != batch:
            continue
        try:
            chosen = [doc_id(doc) for doc in select(list(docs), case["query"], limit)][:limit]
        except Exception:
            scores.errors += 1
            chosen = []
        _count_case(scores, case, chosen)
    return scores


def _count_case(scores: RecallScores, case: Mapping[str, Any], chosen: list[str]) -> None:
    relevant = list(case["relevant"])
    scores.prompts += 1
    scores.chosen += len(chosen)
    right = [doc for doc in chosen if doc in relevant]
    scores.chosen_relevant += len(right)
    scores.irrelevant += len(chosen) - len(right)
    if len(chosen) > len(right):
        scores.misses.append(f"noise {[d for d in chosen if d not in relevant]}: {case['id']}")
    if not relevant:
        scores.unanswerable += 1
        scores.silent += not chosen
        return
    scores.answerable += 1
    scores.any_right += bool(right)
    first = bool(chosen) and chosen[0] == relevant[0]
    scores.first_right += first
    if not first:
        scores.misses.append(f"first {chosen[:1]} != {relevant[0]}: {case['id']}")


# --- the model paths, scored on the same sets -------------------------------------------------


class ModelPlanner:
    """The model's extraction planner (spec §7.4) over the set's existing memories.

    A turn the model did not answer (error, invalid answer) keeps nothing and is counted in
    ``failures``: the heuristic fallback the real run would use is scored on its own row.
    """

    def __init__(self, config: ModelConfig, existing: Sequence[Document]) -> None:
        from qmem_git.ops.models import extract_planner

        self.planner = extract_planner(config, lambda: existing)
        self.failures: list[str] = []

    def __call__(self, messages: list[Message]) -> list[Patch]:
        result = self.planner(messages)
        if result.strategy.name != "model":
            self.failures.append(result.strategy.fallback or result.strategy.name)
            return []
        return result.patches


def model_selector(config: ModelConfig) -> Selector:
    """The model's recall selector (spec §10.6); a failure raises (counted as an error)."""
    from qmem_git.ops.recallmodel import recall_selector

    selector = recall_selector(config)

    def select(docs: list[Document], query: str, limit: int) -> Sequence[Document]:
        return selector(docs, query, limit)

    return select
