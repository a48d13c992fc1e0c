"""Secret scanner (spec §14): find credentials before they are committed or sent to a model.

Every rule is linear in the input length. Plain regexes are used where the engine cannot
backtrack more than a constant amount per start position; the two patterns that could go
quadratic with Python's backtracking engine (the OpenAI ``T3BlbkFJ`` form and the private-key
block with its lazy body) are matched by small scanners that look at each character a bounded
number of times. A finding carries the rule and the position, never the secret value.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator
from typing import NamedTuple

from qmem_git.core.names import is_ignorable

Span = tuple[int, int]
Matcher = Callable[[str], Iterator[Span]]


class SecretFinding(NamedTuple):
    """One rule that matched: ``start``/``end`` locate its first match in the scanned text."""

    rule_id: str
    label: str
    start: int
    end: int


# spec §14 label mapping; any other part just gets its first letter upper-cased
_LABEL_PARTS = {
    "aws": "AWS",
    "gcp": "GCP",
    "api": "API",
    "pat": "PAT",
    "oauth": "OAuth",
    "npm": "NPM",
    "github": "GitHub",
    "gitlab": "GitLab",
    "openai": "OpenAI",
    "digitalocean": "DigitalOcean",
    "huggingface": "HuggingFace",
    "alibaba": "Alibaba",
    "sendgrid": "SendGrid",
}


def rule_label(rule_id: str) -> str:
    """``github-pat`` -> ``GitHub PAT`` (spec §14)."""
    parts = rule_id.split("-")
    return " ".join(_LABEL_PARTS.get(part, part[:1].upper() + part[1:]) for part in parts)


def _regex(pattern: str, anchors: tuple[str, ...], flags: int = 0) -> Matcher:
    """A matcher from a regex whose backtracking per start position is bounded by a constant.

    ``anchors``: text every match holds (lower-case for a rule that ignores case). A text with
    none of them is not searched, and the regex is compiled when a text first has one: the
    rules' compiles cost every process that imports this module ~4 ms, and most texts (a
    memory, a prompt) hold no anchor at all."""
    fold = bool(flags & re.IGNORECASE)

    def spans(text: str) -> Iterator[Span]:
        haystack = text.lower() if fold else text
        if not any(anchor in haystack for anchor in anchors):
            return
        for match in _pattern(pattern, flags | re.ASCII).finditer(text):
            yield match.span()

    return spans


_PATTERNS: dict[tuple[str, int], re.Pattern[str]] = {}


def _pattern(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile``, on first use (see :func:`_regex`); a pattern and its flags are one key."""
    found = _PATTERNS.get((pattern, flags))
    if found is None:
        found = _PATTERNS[pattern, flags] = re.compile(pattern, flags)
    return found


def _union(*matchers: Matcher) -> Matcher:
    """Spans of several alternatives of one rule, in text order."""

    def spans(text: str) -> Iterator[Span]:
        yield from sorted(span for matcher in matchers for span in matcher(text))

    return spans


# openai, second form: sk- + >=20 [A-Za-z0-9_-] + T3BlbkFJ + >=20 [A-Za-z0-9_-]. Qwen 0.24.4 caps
# both runs at 512; uncapped, this flags a superset of what Qwen flags.
# "sk-" and "T3BlbkFJ" are themselves made of the class, so a regex match always extends to the
# end of the maximal class run holding it. Within one run, a later "sk-" only loses candidates,
# so only the first "sk-" of each run needs checking, and every character is looked at O(1) times.
_OPENAI_TAIL = r"[A-Za-z0-9_-]*"
_OPENAI_MARK = "T3BlbkFJ"


def _openai_marker_spans(text: str) -> Iterator[Span]:
    position = 0
    while True:
        start = text.find("sk-", position)
        if start < 0:
            return
        run_end = _pattern(_OPENAI_TAIL).match(text, start).end()  # type: ignore[union-attr]
        first = start + 3 + 20
        last = run_end - 20 - len(_OPENAI_MARK)
        if first <= last and text.find(_OPENAI_MARK, first, last + len(_OPENAI_MARK)) >= 0:
            yield (start, run_end)
        position = run_end


# spec §14 private-key: BEGIN header, >=64 characters (lazy), END footer. As one regex the lazy
# body rescans the rest of the text for every header without a footer (quadratic). Here the
# footers are listed once and each header is paired by binary search, trying the header's
# possible ends in the order the regex would (longest first). A header start whose shortest
# end has no footer far enough after it ends the scan: no later header can do better.
_KEY_BEGIN = r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----"
_KEY_END = r"-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----"
_KEY_END_PREFIX = r"-----END"
_KEY_LABEL = r"[ A-Z0-9_-]{0,100}"
_KEY_TAIL = r"PRIVATE KEY(?: BLOCK)?-----"
_KEY_MIN_BODY = 64


def _key_footers(text: str) -> list[tuple[int, int]]:
    footers = []
    for prefix in _pattern(_KEY_END_PREFIX, re.I).finditer(text):
        footer = _pattern(_KEY_END, re.I | re.A).match(text, prefix.start())
        if footer is not None:
            footers.append(footer.span())
    return footers


def _key_header_ends(text: str, start: int) -> list[int]:
    """Ends of the headers starting at ``start``, longest first (greedy regex order)."""
    label = start + len("-----BEGIN")
    limit = _pattern(_KEY_LABEL, re.I | re.A).match(text, label).end()  # type: ignore[union-attr]
    tails = _pattern(_KEY_TAIL, re.I).finditer(text, label, limit + len("PRIVATE KEY BLOCK-----"))
    return sorted((tail.end() for tail in tails if tail.start() <= limit), reverse=True)


def _private_key_spans(text: str) -> Iterator[Span]:
    footers: list[tuple[int, int]] | None = None
    starts: list[int] = []
    position = 0
    if "-----" not in text:  # every header starts so: nothing to compile or search
        return
    while True:
        header = _pattern(_KEY_BEGIN, re.I | re.A).search(text, position)
        if header is None:
            return
        if footers is None:
            footers = _key_footers(text)
            starts = [start for start, _ in footers]
        span = None
        for end in _key_header_ends(text, header.start()):
            index = bisect.bisect_left(starts, end + _KEY_MIN_BODY)
            if index < len(starts):
                span = (header.start(), footers[index][1])
                break
        if span is None:
            return
        yield span
        position = span[1]


_ALNUM = "[A-Za-z0-9]"

# Rule order is Qwen Code 0.24.4's (its ``SECRET_RULES``); scan results follow it.
RULES: dict[str, Matcher] = {
    "aws-access-token": _regex(
        r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b",
        ("A3T", "AKIA", "ASIA", "ABIA", "ACCA"),
    ),
    "alibaba-cloud-access-key": _regex(r"\bLTAI[A-Za-z0-9]{12,20}\b", ("LTAI",)),
    "gcp-api-key": _regex(r"AIza[A-Za-z0-9_-]{35}", ("AIza",)),
    "gcp-oauth-client-secret": _regex(r"GOCSPX-[A-Za-z0-9_-]{24}", ("GOCSPX-",)),
    "digitalocean-pat": _regex(r"dop_v1_[a-f0-9]{64}", ("dop_v1_",)),
    "anthropic-api-key": _regex(r"sk-ant-[A-Za-z0-9_-]{20,}", ("sk-ant-",)),
    "openai-api-key": _union(
        _regex(r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}", ("sk-",)),
        _openai_marker_spans,
        _regex(r"sk-" + _ALNUM + "{48}", ("sk-",)),
    ),
    "huggingface-access-token": _regex(r"hf_" + _ALNUM + "{34,}", ("hf_",)),
    "github-pat": _regex(r"ghp_" + _ALNUM + "{36}", ("ghp_",)),
    "github-fine-grained-pat": _regex(r"github_pat_[A-Za-z0-9_]{82}", ("github_pat_",)),
    "github-app-token": _regex(r"gh[us]_" + _ALNUM + "{36}", ("ghu_", "ghs_")),
    "github-oauth": _regex(r"gho_" + _ALNUM + "{36}", ("gho_",)),
    "gitlab-pat": _regex(r"glpat-[A-Za-z0-9_-]{20}", ("glpat-",)),
    "slack-bot-token": _regex(r"xoxb-[0-9]{10,13}-[0-9]{10,13}[A-Za-z0-9-]*", ("xoxb-",)),
    "slack-app-token": _regex(r"xapp-[0-9]-[A-Z0-9]+-[0-9]+-[a-z0-9]+", ("xapp-",), re.IGNORECASE),
    "sendgrid-api-token": _regex(r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}", ("SG.",)),
    "npm-access-token": _regex(r"npm_" + _ALNUM + "{36}", ("npm_",)),
    "stripe-access-token": _regex(
        r"[sr]k_(?:test|live|prod)_" + _ALNUM + "{10,99}", ("sk_", "rk_")
    ),
    "private-key": _private_key_spans,
}


def _visible(text: str) -> tuple[str, list[int]] | None:
    """``text`` without invisible characters (zero-width, joiners, bidi controls, BOM, soft
    hyphen: :func:`names.is_ignorable`), and each kept character's index in ``text``; None when
    there is none to remove. One inside a token must not hide it, so every rule also runs on
    the text without them."""
    if text.isascii():
        return None
    hidden = {char for char in set(text) if not char.isascii() and is_ignorable(char)}
    if not hidden:  # each distinct character tested once, not each of a long text's characters
        return None
    kept = [index for index, char in enumerate(text) if char not in hidden]
    return "".join(text[index] for index in kept), kept


def _rule_spans(matcher: Matcher, text: str, visible: tuple[str, list[int]] | None) -> list[Span]:
    """The rule's spans in ``text``, then those found only once invisible characters are gone
    (mapped back to ``text``)."""
    spans = list(matcher(text))
    if visible is not None:
        stripped, kept = visible
        for start, end in matcher(stripped):
            if end > start:
                spans.append((kept[start], kept[end - 1] + 1))
    return spans


def scan_for_secrets(text: str) -> list[SecretFinding]:
    """One finding per rule that matches anywhere in ``text`` (its first match), in rule order.

    Invisible characters inside a token do not hide it (they are skipped for a second look)."""
    visible = _visible(text)
    findings = []
    for rule_id, matcher in RULES.items():
        first = next(matcher(text), None)
        if first is None and visible is not None:
            spans = _rule_spans(matcher, text, visible)
            first = min(spans) if spans else None
        if first is not None:
            findings.append(SecretFinding(rule_id, rule_label(rule_id), first[0], first[1]))
    return findings


def redact_secrets(text: str) -> str:
    """Replace every match of every rule by ``[REDACTED:<rule-id>]`` (before text leaves the host).

    Overlapping matches are merged; the merged span is named after the earliest-starting rule.
    """
    visible = _visible(text)
    spans = sorted(
        (start, end, rule_id)
        for rule_id, matcher in RULES.items()
        for start, end in _rule_spans(matcher, text, visible)
        if end > start
    )
    pieces: list[str] = []
    cursor = 0
    for start, end, rule_id in _merge_spans(spans):
        pieces += [text[cursor:start], f"[REDACTED:{rule_id}]"]
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces)


def _merge_spans(spans: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    merged: list[tuple[int, int, str]] = []
    for start, end, rule_id in spans:
        if merged and start < merged[-1][1]:
            last = merged[-1]
            merged[-1] = (last[0], max(last[1], end), last[2])
        else:
            merged.append((start, end, rule_id))
    return merged
