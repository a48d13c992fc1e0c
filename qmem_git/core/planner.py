"""The heuristic extraction planner (spec §7.5, refined): durable sentences of the user's messages.

Spec §7.5's keyword rules kept requests and questions (``please add a README section``) and
missed plain facts (``I'm the tech lead``); here each sentence of a user message is read with
:mod:`qmem_git.core.sentences`: lead-ins (``remember:``) are stripped, questions, requests,
thanks, temporary and chatter sentences are dropped, the type follows Qwen's definitions, a
reason clause becomes the entry's ``Why:`` and an imperative after ``, so`` its ``How to
apply:``. The new file's name is the fact's first clause,
its description the whole sentence, so name, description and body do not just repeat.

:func:`classify_topic` keeps the spec's §7.5 step 4 rules as the fallback of :func:`topic_of`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from qmem_git.core.model import MemoryType
from qmem_git.core.patches import Patch, rejection_reason
from qmem_git.core.sentences import (
    memory_type,
    sentences,
    short_name,
    split_apply,
    split_reason,
    strip_lead_in,
    talk_kind,
)
from qmem_git.core.text import normalize_space

TYPE_CHECKING = False
if TYPE_CHECKING:  # core.extract costs ~5 ms to import; `remember` only needs classify_topic
    from qmem_git.core.extract import Message

_I = re.IGNORECASE
MAX_SENTENCE_CHARS = 500

_URL = re.compile(r"https?://", _I)
_PREFERENCE = re.compile(
    r"\b(?:I|we)\s+(?:prefer|like|need|want)\b|\bmy\s+(?:preferred|favorite)\b", _I
)
_REFERENCE_WORDS = re.compile(
    r"\b(?:grafana|dashboard|runbook|ticket|doc|docs|wiki|notion|jira)\b", _I
)
_FEEDBACK_WORDS = re.compile(
    r"\b(?:please|always|never|avoid|respond|format|style|terse|concise|detailed)\b", _I
)
_PROJECT_WORDS = re.compile(
    r"\b(?:project|repo|repository|service|release|deadline|freeze|incident|environment|stack)\b",
    _I,
)


def classify_topic(summary: str) -> MemoryType | None:
    """The first matching topic rule of spec §7.5 step 4, or None when none matches."""
    if _URL.search(summary) or _REFERENCE_WORDS.search(summary):
        return "reference"
    if _PREFERENCE.search(summary):
        return "user"
    if _FEEDBACK_WORDS.search(summary):
        return "feedback"
    if _PROJECT_WORDS.search(summary):
        return "project"
    return None


def infer_type(text: str) -> MemoryType | None:
    """The memory type of a fact by Qwen's definitions, or None when nothing marks it."""
    fact, _ = strip_lead_in(normalize_space(text)[:MAX_SENTENCE_CHARS])
    return memory_type(fact)


def topic_of(text: str) -> MemoryType | None:
    """The type a fact reads as: by Qwen's definitions, else the spec's §7.5 keyword topic.

    One rule for every place that types a fact (remember without ``--type``, review's
    "reads like" advice), so review never contradicts what extraction filed."""
    return infer_type(text) or classify_topic(text)


def sentence_patch(sentence: str, offset: int | None) -> Patch | None:
    """The patch one sentence yields, or None when it is not a durable fact.

    A "sentence" longer than :data:`MAX_SENTENCE_CHARS` is pasted output, not a statement.
    """
    if len(sentence) > MAX_SENTENCE_CHARS:
        return None
    fact, explicit = strip_lead_in(sentence)
    if talk_kind(fact, explicit) is not None:
        return None
    topic = memory_type(fact)
    if topic is None:
        if not explicit:
            return None
        topic = "project"  # "remember that …" with no other mark: a fact of this project
    summary, why = split_reason(fact)
    summary, how = split_apply(summary)
    if rejection_reason(summary) is not None:
        return None
    name = short_name(summary)
    return Patch(
        topic,
        summary,
        why=why,
        how_to_apply=how,
        source_offset=offset,
        name=name if name != summary.rstrip(" .。!！") else None,
        description=fact if why or how else None,
    )


def message_patches(text: str, offset: int | None = None) -> list[Patch]:
    """Patches from one user message, one per durable sentence."""
    t = normalize_space(text)
    found = []
    for sentence in sentences(t):
        patch = sentence_patch(sentence, offset)
        if patch is not None:
            found.append(patch)
    return found


def heuristic_summary(text: str) -> str | None:
    """The summary of the first durable sentence of a message, or None."""
    patches = message_patches(text)
    return patches[0].summary if patches else None


def plan_heuristic(messages: Iterable[Message]) -> list[Patch]:
    """Patches from the user messages of a slice, in order, without duplicates."""
    patches: list[Patch] = []
    seen: set[str] = set()
    for message in messages:
        if message.role != "user":
            continue
        for patch in message_patches(message.text, message.offset):
            if patch.key not in seen:
                seen.add(patch.key)
                patches.append(patch)
    return patches
