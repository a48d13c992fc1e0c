"""The heuristic extraction planner (spec §7.5): keyword rules over the user's own messages."""

from __future__ import annotations

import re
from collections.abc import Iterable

from qmem_git.core.model import MemoryType
from qmem_git.core.patches import Patch, rejection_reason
from qmem_git.core.text import normalize_space

TYPE_CHECKING = False
if TYPE_CHECKING:  # core.extract costs ~5 ms to import; `remember` only needs classify_topic
    from qmem_git.core.extract import Message

_I = re.IGNORECASE

# step 2: an explicit request, `please remember that …`
_REQUEST = re.compile(r"^(?:please\s+)?(?:remember|save|note)\s+(?:that\s+)?(\S.*)$", _I | re.S)
_REQUEST_LEAD = re.compile(r"^[:\-\s]+")

_URL = re.compile(r"https?://", _I)
_PREFERENCE = re.compile(
    r"\b(?:I|we)\s+(?:prefer|like|need|want)\b|\bmy\s+(?:preferred|favorite)\b", _I
)
_REFERENCE_WORDS = re.compile(
    r"\b(?:grafana|dashboard|runbook|ticket|doc|docs|wiki|notion|jira)\b", _I
)
_DURABLE_WORDS = re.compile(
    r"\b(?:grafana|dashboard|runbook|ticket|doc|docs|wiki|notion|jira|release|deadline|freeze|incident)\b",
    _I,
)
_INSTRUCTION_WORDS = re.compile(r"\b(?:please|always|never|avoid|respond)\b", _I)
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


def heuristic_summary(text: str) -> str | None:
    """The summary a user message yields (spec §7.5 steps 1-3), or None when it yields nothing."""
    t = normalize_space(text)
    if rejection_reason(t) is not None:
        return None
    request = _REQUEST.match(t)
    if request:
        return normalize_space(_REQUEST_LEAD.sub("", request.group(1))) or None
    durable = _PREFERENCE.search(t) or _URL.search(t) or _DURABLE_WORDS.search(t)
    return t if durable or _INSTRUCTION_WORDS.search(t) else None


def plan_heuristic(messages: Iterable[Message]) -> list[Patch]:
    """Patches from the user messages of a slice, in order, without duplicates (spec §7.5)."""
    patches: list[Patch] = []
    seen: set[str] = set()
    for message in messages:
        if message.role != "user":
            continue
        summary = heuristic_summary(message.text)
        topic = classify_topic(summary) if summary else None
        if summary is None or topic is None:
            continue
        patch = Patch(topic, summary, source_offset=message.offset)
        if patch.key not in seen:
            seen.add(patch.key)
            patches.append(patch)
    return patches
