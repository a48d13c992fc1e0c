"""Entries inside a memory body (spec §4.3, checklist 17-24) and their round-trip properties."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qmem_git.core.entries import (
    EMPTY_BODY,
    body_heading,
    entry_search_text,
    merge_entries,
    parse_entries,
    render_entries,
)
from qmem_git.core.model import Entry
from qmem_git.core.text import normalize_space

# --- conformance checklist -------------------------------------------------------------------


def test_17_plain_paragraph_entry_with_details() -> None:
    body = "Use short responses\n\nWhy: Brevity.\n\nHow to apply: Three sentences."
    assert parse_entries(body) == [Entry("Use short responses", "Brevity.", "Three sentences.")]


def test_18_legacy_nested_bullets() -> None:
    body = "- A\n  - Why: x\n- B"
    assert parse_entries(body) == [Entry("A", why="x"), Entry("B")]


def test_19_bold_why_and_snake_case_how() -> None:
    body = "Summary line\n**Why**: x\nhow_to_apply: y"
    assert parse_entries(body) == [Entry("Summary line", "x", "y")]


@pytest.mark.parametrize(
    "body",
    ["# Heading", "_No entries yet._", "# Heading\n\n_No entries yet._\n", "  # Heading  "],
)
def test_20_headings_and_placeholder_produce_nothing(body: str) -> None:
    assert parse_entries(body) == []


def test_20_heading_does_not_close_or_become_an_entry() -> None:
    assert parse_entries("# Feedback Memory\n\n- A\n_No entries yet._\n- B") == [
        Entry("A"),
        Entry("B"),
    ]


def test_21_every_plain_line_is_an_entry() -> None:
    assert parse_entries("Alpha fact\nBeta fact") == [Entry("Alpha fact"), Entry("Beta fact")]


def test_22_render_one_entry_with_details() -> None:
    assert render_entries([Entry("S", "W", "H")]) == "S\n\nWhy: W\n\nHow to apply: H"


def test_23_render_two_bare_entries_and_none() -> None:
    assert render_entries([Entry("A"), Entry("B")]) == "A\n\nB"
    assert render_entries([]) == "_No entries yet._"
    assert EMPTY_BODY == "_No entries yet._"


def test_24_merge_keeps_existing_details_and_fills_missing() -> None:
    merged = merge_entries(Entry("S", why="old"), Entry("s", why="new", how_to_apply="h"))
    assert merged == Entry("s", "old", "h")


def test_merge_keeps_current_summary_when_incoming_is_empty() -> None:
    assert merge_entries(Entry("S", how_to_apply="h"), Entry("", "w")) == Entry("S", "w", "h")


def test_spec_example_renders_byte_for_byte() -> None:
    entries = [
        Entry("Use pnpm for installs", why="Lockfile is pnpm-lock.yaml."),
        Entry("Prefer small PRs"),
    ]
    expected = "Use pnpm for installs\n\nWhy: Lockfile is pnpm-lock.yaml.\n\nPrefer small PRs"
    assert render_entries(entries) == expected
    assert parse_entries(expected) == entries


def test_spec_legacy_g1_body() -> None:
    body = (
        "# Feedback Memory\n\n"
        "- Use short responses when debugging\n"
        "  - Why: The user prefers brevity in debug sessions.\n"
        "  - How to apply: Keep replies to 3 sentences max.\n"
        "- Always use TypeScript strict mode"
    )
    assert parse_entries(body) == [
        Entry(
            "Use short responses when debugging",
            "The user prefers brevity in debug sessions.",
            "Keep replies to 3 sentences max.",
        ),
        Entry("Always use TypeScript strict mode"),
    ]


# --- tricky inputs ---------------------------------------------------------------------------

TRICKY = [
    pytest.param("A\r\n\r\nWhy: w\r\n", [Entry("A", "w")], id="crlf"),
    pytest.param("S\n**Why**: x", [Entry("S", "x")], id="bold-why"),
    pytest.param("S\n**Why:** x", [Entry("S", "x")], id="bold-why-colon-inside"),
    pytest.param("S\n**How to apply**: y", [Entry("S", how_to_apply="y")], id="bold-how"),
    pytest.param("S\nhow_to_apply: y", [Entry("S", how_to_apply="y")], id="snake-how"),
    pytest.param("S\nHOW TO APPLY:   y  ", [Entry("S", how_to_apply="y")], id="upper-how"),
    pytest.param("S\nwhy:x", [Entry("S", "x")], id="no-space-after-colon"),
    pytest.param("- S\n  * How to apply: z", [Entry("S", how_to_apply="z")], id="star-nested-how"),
    pytest.param("- S\n\t\tWhy: tabs", [Entry("S", "tabs")], id="tab-indented-why"),
    pytest.param("- S\n    -   Why:   a   b  ", [Entry("S", "a b")], id="nested-normalised"),
    pytest.param("- S\n  - How_to_apply: z", [Entry("S", how_to_apply="z")], id="nested-snake"),
    pytest.param(
        "- S\n  - Stability: stable\n  - Why: w",
        [Entry("S", "w")],
        id="legacy-stability-accepted-and-ignored",
    ),
    pytest.param(
        "- S\nStability: working",
        [Entry("S"), Entry("Stability: working")],
        id="unindented-stability-is-an-entry",
    ),
    pytest.param("Why: orphan\nS", [Entry("S")], id="why-before-any-entry-ignored"),
    pytest.param("  Why: orphan\nS", [Entry("S")], id="indented-why-before-any-entry"),
    pytest.param("  - Why: x", [Entry("Why: x")], id="nested-why-without-entry-is-a-bullet"),
    pytest.param("S\nWhy:\nWhy:   ", [Entry("S"), Entry("Why:"), Entry("Why:")], id="empty-why"),
    pytest.param("S\nWhy: a\nWhy: b", [Entry("S", "b")], id="later-why-wins"),
    pytest.param(
        "* star bullet\n-   dash   bullet ",
        [Entry("star bullet"), Entry("dash bullet")],
        id="bullets",
    ),
    pytest.param("-not a bullet", [Entry("-not a bullet")], id="dash-without-space"),
    pytest.param("#hashtag", [Entry("#hashtag")], id="hash-without-space"),
    pytest.param("  many   inner\tspaces  ", [Entry("many inner spaces")], id="normalised"),
    pytest.param("", [], id="empty"),
    pytest.param("\n \n\t\n", [], id="blank-lines"),
    pytest.param(
        "A\nWhy: w\nB\nHow to apply: h", [Entry("A", "w"), Entry("B", how_to_apply="h")], id="two"
    ),
]


@pytest.mark.parametrize(("body", "expected"), TRICKY)
def test_tricky_bodies(body: str, expected: list[Entry]) -> None:
    assert parse_entries(body) == expected


def test_crlf_body_parses_like_lf_twin() -> None:
    lf = "# H\n\n- A\n  - Why: x\n- B\n\nC\n\nHow to apply: y"
    assert parse_entries(lf.replace("\n", "\r\n")) == parse_entries(lf)


def test_render_skips_empty_details() -> None:
    assert render_entries([Entry("S", "", "")]) == "S"


def test_entry_search_text() -> None:
    assert entry_search_text(Entry("Use PNPM", None, "Run Installs")) == "use pnpm run installs"
    assert entry_search_text(Entry("A", "B", "C")) == "a b c"


@pytest.mark.parametrize(
    ("body", "heading"),
    [
        ("intro\n  # Feedback Memory \n# Other", "# Feedback Memory"),
        ("no heading here\n#not", "# Memory"),
        ("", "# Memory"),
    ],
)
def test_body_heading(body: str, heading: str) -> None:
    assert body_heading(body) == heading


# --- round-trip properties -------------------------------------------------------------------
#
# The plain-paragraph grammar cannot represent every string.  A value survives
# render -> parse only when it is already normalised (single spaces, trimmed, non-empty) and,
# for a summary, when its rendered line does not mean something else to the parser:
#   * it is skipped:   `_No entries yet._` or starts with `# `;
#   * it is a bullet:  starts with `-`/`*` + whitespace (the marker would be stripped);
#   * it is a detail:  starts with `why`/`how to apply`/`how_to_apply` (any case, optionally
#                      `**`-wrapped) + colon + value (it would attach to the previous entry).
# Why / how-to-apply values only need to be normalised and non-empty: they follow a fixed
# `Why: ` / `How to apply: ` prefix, so nothing in them is interpreted.
# The "detail" test below is deliberately broader than the parser (any `why`/`how` prefix, any
# leading `*`) so the strategy does not depend on the parser's own regex.

_DETAILISH = re.compile(r"^\**\s*(why|how)", re.IGNORECASE)


def representable_summary(text: str) -> bool:
    return (
        bool(text)
        and text != EMPTY_BODY
        and not text.startswith("# ")
        and not re.match(r"^[-*]\s", text)
        and not _DETAILISH.match(text)
    )


_chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n")
normalised_text = st.text(_chars, min_size=1, max_size=40).map(normalize_space).filter(bool)
summaries = normalised_text.filter(representable_summary)
summaries_with_traps = st.one_of(
    summaries,
    st.sampled_from(["#", "-", "*", "#tag", "-x", "*y", "**bold**", "Whole", "Hower"]).filter(
        representable_summary
    ),
)
details = st.none() | normalised_text
entries_strategy = st.lists(st.builds(Entry, summaries_with_traps, details, details), max_size=6)


def test_representable_summary_rejects_grammar_words() -> None:
    for text in ["- x", "* x", "# x", "_No entries yet._", "Why: x", "**How to apply**: y", ""]:
        assert not representable_summary(text), text
    assert representable_summary("#hashtag")


@given(entries_strategy)
def test_parse_render_round_trip(entries: list[Entry]) -> None:
    assert parse_entries(render_entries(entries)) == entries


@given(entries_strategy)
def test_render_is_deterministic_and_stable(entries: list[Entry]) -> None:
    rendered = render_entries(entries)
    assert render_entries(parse_entries(rendered)) == rendered
    assert not rendered.endswith("\n")


@given(st.text(max_size=200))
def test_render_parse_render_is_a_fixed_point_for_any_body(body: str) -> None:
    once = render_entries(parse_entries(body))
    assert render_entries(parse_entries(once)) == once


@given(st.text(max_size=200))
def test_parsed_entries_are_normalised(body: str) -> None:
    for entry in parse_entries(body):
        assert entry.summary and entry.summary == normalize_space(entry.summary)
        for detail in (entry.why, entry.how_to_apply):
            assert detail is None or (detail and detail == normalize_space(detail))
