"""Memory patches: normalise and filter them (spec §7.6), then plan the files they write (§7.7).

Shared by extraction (many patches from a planner) and ``remember`` (one patch from the user).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import NamedTuple

from qmem_git.core.codec import render_document, replace_body
from qmem_git.core.entries import merge_entries, parse_entries, render_entries
from qmem_git.core.lexicon import terms
from qmem_git.core.limits import MAX_FACT_CHARS
from qmem_git.core.model import MEMORY_TYPES, Document, Entry, MemoryType
from qmem_git.core.names import fold_name, is_allowed_memory_path
from qmem_git.core.secrets import scan_for_secrets
from qmem_git.core.text import CONFLICT_LINE, clean_text, content_problem, normalize_space

MIN_SUMMARY_CHARS = 12
MAX_SLUG_CHARS = 80
MAX_TITLE_CHARS = 72
MAX_NUMBERED_SUFFIX = 100

# spec §7.6: the complete list of temporal words and phrases, matched on word boundaries.
_TEMPORAL = re.compile(
    r"\b(?:today|now|currently|for\s+this\s+task|this\s+session|temporary|temporarily)\b",
    re.IGNORECASE,
)
_BULLET = re.compile(r"^\s*(?:[-*]|#+)\s+")  # a bullet, or a heading the body reader skips
_NOT_SLUG = re.compile(r"[^a-z0-9]+")
_NUMBERED = re.compile(r"\w*\d\w*")


class Patch(NamedTuple):
    """One fact to remember (spec §7.3); ``source_offset`` is the user message it came from.

    ``name`` and ``description`` are the frontmatter of a new file when the planner wrote
    them (the heuristic planner does: a short name, the full sentence as the description);
    otherwise the name is the shortened summary and the description the summary (spec §7.7).
    """

    topic: MemoryType
    summary: str
    why: str | None = None
    how_to_apply: str | None = None
    source_offset: int | None = None
    name: str | None = None
    description: str | None = None

    @property
    def key(self) -> str:
        """Dedupe key of spec §7.6 step 4."""
        return f"{self.topic}:{self.summary.lower()}"

    def entry(self) -> Entry:
        return Entry(self.summary, self.why, self.how_to_apply)


def is_temporal(text: str) -> bool:
    """True when the text mentions a temporal word or phrase of spec §7.6 (``right now`` counts)."""
    return _TEMPORAL.search(text) is not None


def clean_summary(summary: str) -> str:
    """Strip leading bullet markers, then normalise whitespace (spec §7.6 step 1).

    The spec strips one marker; we strip every leading one, so the result is idempotent and
    reads back as itself: a kept ``- `` would be parsed as a bullet when the file is read again,
    and a ``# `` line is skipped as a heading (spec §4.3), which would lose the memory.
    """
    text = clean_text(summary)
    while True:
        stripped = _BULLET.sub("", text, count=1)
        if stripped == text:
            return normalize_space(text)
        text = stripped


def rejection_reason(summary: str) -> str | None:
    """Why a cleaned summary is not a durable memory (spec §7.6 step 2), or None when it is."""
    if len(summary) < MIN_SUMMARY_CHARS:
        return f"too short ({len(summary)} characters, at least {MIN_SUMMARY_CHARS} needed)"
    if summary.endswith("?"):
        return "it is a question"
    if CONFLICT_LINE.match(summary):
        return "it reads as a git conflict marker"
    match = _TEMPORAL.search(summary)
    if match:
        return f"it is temporary (mentions {match.group(0)!r})"
    return None


def clean_detail(value: str | None) -> str | None:
    """Normalised why / how-to-apply; empty means absent (spec §7.6 step 3)."""
    if value is None:
        return None
    return normalize_space(clean_text(value)) or None


def size_problem(patch: Patch) -> str | None:
    """Why a fact is too long to be one memory (summary, why and how together), or None."""
    size = sum(len(text or "") for text in (patch.summary, patch.why, patch.how_to_apply))
    if size > MAX_FACT_CHARS:
        return f"too long ({size:,} characters, at most {MAX_FACT_CHARS:,})"
    return None


def normalize_patches(patches: Iterable[Patch]) -> list[Patch]:
    """Clean, filter and dedupe planner output, keeping the first of each topic+summary."""
    seen: set[str] = set()
    kept: list[Patch] = []
    for patch in patches:
        summary = clean_summary(patch.summary)
        if patch.topic not in MEMORY_TYPES or rejection_reason(summary) is not None:
            continue
        cleaned = patch._replace(
            summary=summary,
            why=clean_detail(patch.why),
            how_to_apply=clean_detail(patch.how_to_apply),
            name=clean_detail(patch.name),
            description=clean_detail(patch.description),
        )
        if size_problem(cleaned) is None and cleaned.key not in seen:
            seen.add(cleaned.key)
            kept.append(cleaned)
    return kept


def slugify(summary: str) -> str:
    """File stem for a new memory (spec §7.7); a trailing ``-`` can survive the 80-char cut."""
    slug = _NOT_SLUG.sub("-", summary.lower()).strip("-")[:MAX_SLUG_CHARS]
    return slug or "memory"


def title_for(summary: str) -> str:
    """Frontmatter ``name``: the summary, or its first 69 chars + ``...`` when longer than 72."""
    if len(summary) <= MAX_TITLE_CHARS:
        return summary
    return summary[: MAX_TITLE_CHARS - 3].rstrip() + "..."


def content_words(text: str) -> frozenset[str]:
    """Search terms plus every number and versioned name, however short (``23``, ``v2``)."""
    return frozenset(terms(text)) | frozenset(_NUMBERED.findall(text.lower()))


def fact_terms(entry: Entry) -> frozenset[frozenset[str]]:
    """The content words of an entry's summary, and of its summary with its why."""
    summary = content_words(entry.summary)
    with_why = content_words(f"{entry.summary} {entry.why}") if entry.why else summary
    return frozenset(words for words in (summary, with_why) if words)


def near_duplicate(words: frozenset[frozenset[str]], entry: Entry) -> bool:
    """Whether an entry states the same fact as ``words``: the same content words.

    Stop words, punctuation, case, accents and word forms are ignored, so ``Bugs go into the
    PAY project in Jira`` restates ``Bugs go in the PAY project in Jira.``; a reason given
    in the summary (``never X, CI deploys from it``) matches the same reason kept as ``Why:``.
    Any other word differs: ``port 4027`` and ``port 4036``, or ``kiwi`` and ``mango``, stay
    two memories.
    """
    return not words.isdisjoint(fact_terms(entry))


class PatchPlan(NamedTuple):
    """File texts to write (relative path -> text) and what they mean for the commit.

    A NamedTuple (cheaper to define than a dataclass, on every ``remember``); the planner
    that fills it makes it with its own containers, never the shared defaults.
    """

    writes: dict[str, str] = {}  # noqa: RUF012 - never filled: see the docstring
    touched_topics: list[str] = []  # noqa: RUF012
    created: list[str] = []  # noqa: RUF012
    updated: list[str] = []  # noqa: RUF012

    @property
    def is_empty(self) -> bool:
        return not self.writes


class _Record:
    """A scanned (or just planned) document whose entries may change during the plan."""

    __slots__ = ("body", "entries", "relative_path", "type")

    def __init__(
        self, kind: MemoryType, relative_path: str, body: str, entries: list[Entry]
    ) -> None:
        self.type = kind
        self.relative_path = relative_path
        self.body = body
        self.entries = entries


class _Planner:
    """Mutable state of one :func:`plan_patches` call; records refresh after every write."""

    def __init__(
        self,
        docs: list[Document],
        read_text: Callable[[str], str],
        path_taken: Callable[[str], bool],
        now_ms: int,
    ) -> None:
        self.records = [
            _Record(d.type, d.relative_path, d.body, parse_entries(d.body)) for d in docs
        ]
        self.used = {fold_name(d.relative_path) for d in docs}  # as a case-insensitive disk
        self.read_text = read_text
        self.path_taken = path_taken
        self.now_ms = now_ms
        self.plan = PatchPlan({}, [], [], [])  # filled in place: never the shared defaults

    def apply(self, patch: Patch) -> None:
        record = self.find_target(patch)
        if record is None:
            self.create(patch)
        else:
            self.merge(record, patch)

    def find_target(self, patch: Patch) -> _Record | None:
        """First record of the same type whose first entry has the same summary (any case);
        else the first of that type whose first entry says nearly the same thing
        (:func:`near_duplicate`), so a restated fact updates its memory instead of adding one.
        """
        wanted = patch.summary.lower()
        for record in self.records:
            if (
                record.type == patch.topic
                and record.entries
                and record.entries[0].summary.lower() == wanted
            ):
                return record
        words = fact_terms(patch.entry())
        for record in self.records:
            if (
                record.type == patch.topic
                and record.entries
                and near_duplicate(words, record.entries[0])
            ):
                return record
        return None

    def merge(self, record: _Record, patch: Patch) -> None:
        """Merge into the first entry and rewrite the body in place (spec §4.3, §4.4).

        A near-duplicate keeps the stored wording and only gains the details it lacked.
        """
        incoming = patch.entry()
        if record.entries[0].summary.lower() != patch.summary.lower():
            incoming = incoming._replace(summary=record.entries[0].summary)
        merged = merge_entries(record.entries[0], incoming)
        if merged == record.entries[0]:
            return
        entries = [merged, *record.entries[1:]]
        new_body = render_entries(entries)
        rel = record.relative_path
        old_text = self.plan.writes.get(rel)
        if old_text is None:
            old_text = self.read_text(rel)
        new_text = replace_body(old_text, record.body, new_body)  # §4.4, below the frontmatter
        if new_text == old_text or content_problem(new_text) is not None:
            return  # unchanged, or the file would break a limit validate enforces: left as is
        record.body, record.entries = new_body, entries
        self.plan.writes[rel] = new_text
        if rel not in self.plan.created and rel not in self.plan.updated:
            self.plan.updated.append(rel)
        self.touch(record.type)

    def create(self, patch: Patch) -> None:
        rel = self.free_path(patch.topic, slugify(patch.summary))
        body = render_entries([patch.entry()])
        name = title_for(patch.name or patch.summary)
        text = render_document(name, patch.description or patch.summary, patch.topic, body)
        self.records.append(_Record(patch.topic, rel, body, [patch.entry()]))
        self.used.add(fold_name(rel))
        self.plan.writes[rel] = text
        self.plan.created.append(rel)
        self.touch(patch.topic)

    def free_path(self, topic: str, slug: str) -> str:
        """``<slug>.md``, ``-2`` … ``-100``, then ``-<epoch-ms>`` (bumped if even that is taken)."""
        candidates = [f"{topic}/{slug}.md"]
        candidates += [f"{topic}/{slug}-{n}.md" for n in range(2, MAX_NUMBERED_SUFFIX + 1)]
        for rel in candidates:
            if not self.is_taken(rel):
                return rel
        stamp = self.now_ms
        while self.is_taken(f"{topic}/{slug}-{stamp}.md"):
            stamp += 1
        return f"{topic}/{slug}-{stamp}.md"

    def is_taken(self, rel: str) -> bool:
        """Used by a scanned doc, this plan or a file on disk, under any spelling a
        case-insensitive disk would take for it; unsafe names (``con.md``) too."""
        if fold_name(rel) in self.used or not is_allowed_memory_path(rel):
            return True
        return self.path_taken(rel)

    def touch(self, topic: str) -> None:
        if topic not in self.plan.touched_topics:
            self.plan.touched_topics.append(topic)


def plan_patches(
    docs: list[Document],
    patches: Iterable[Patch],
    *,
    read_text: Callable[[str], str],
    path_taken: Callable[[str], bool],
    now_ms: int,
) -> PatchPlan:
    """Plan the writes of spec §7.7 for already-normalised patches over the scanned documents.

    ``read_text(rel)`` returns a scanned file's current text; ``path_taken(rel)`` says whether a
    file exists at a path the scan did not list (so a new memory never overwrites one).
    """
    planner = _Planner(docs, read_text, path_taken, now_ms)
    for patch in patches:
        planner.apply(patch)
    return planner.plan


def patch_secrets(patch: Patch) -> list[str]:
    """Rule ids of the secrets found in a patch's summary, why or how-to-apply (spec §14)."""
    found: list[str] = []
    for text in (patch.summary, patch.why, patch.how_to_apply, patch.name, patch.description):
        for finding in scan_for_secrets(text or ""):
            if finding.rule_id not in found:
                found.append(finding.rule_id)
    return found


def drop_secret_patches(patches: Iterable[Patch]) -> tuple[list[Patch], list[str]]:
    """Patches without secrets, and the rule ids that made the others be dropped (never written)."""
    kept: list[Patch] = []
    dropped: list[str] = []
    for patch in patches:
        rules = patch_secrets(patch)
        if rules:
            dropped += [rule for rule in rules if rule not in dropped]
        else:
            kept.append(patch)
    return kept, dropped
