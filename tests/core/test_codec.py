"""Memory documents: frontmatter parse/render (spec §4.1, §4.2, §4.4; checklist 9-12, 16)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qmem_git.core.codec import (
    frontmatter_field,
    frontmatter_value,
    parse_document,
    render_document,
    render_with_frontmatter,
    replace_body,
    split_frontmatter,
)
from qmem_git.core.model import MEMORY_TYPES, Document

SPEC_FILE = """---
name: Terse responses
description: User prefers terse responses.
type: user
---

User prefers terse responses.

Why: They explicitly asked for concise replies.

How to apply: Lead with a short answer before details.
"""


def test_spec_4_1_example() -> None:
    doc = parse_document(SPEC_FILE, "user/terse-responses.md", 1234.5)
    assert doc == Document(
        type="user",
        relative_path="user/terse-responses.md",
        title="Terse responses",
        description="User prefers terse responses.",
        body=(
            "User prefers terse responses.\n\n"
            "Why: They explicitly asked for concise replies.\n\n"
            "How to apply: Lead with a short answer before details."
        ),
        mtime_ms=1234.5,
        frontmatter="name: Terse responses\ndescription: User prefers terse responses.\ntype: user",
    )
    assert doc.filename == "terse-responses.md"


def test_render_document_matches_spec_example() -> None:
    body = (
        "User prefers terse responses.\n\n"
        "Why: They explicitly asked for concise replies.\n\n"
        "How to apply: Lead with a short answer before details."
    )
    rendered = render_document("Terse responses", "User prefers terse responses.", "user", body)
    assert rendered == SPEC_FILE


def test_09_title_field_and_heading_body() -> None:
    text = (
        "---\ntype: project\ntitle: Project Memory\n---\n"
        "\n# Project Memory\n\n- Release freeze starts Friday."
    )
    doc = parse_document(text, "project.md", 0)
    assert doc is not None
    assert doc.title == "Project Memory"
    assert doc.body == "# Project Memory\n\n- Release freeze starts Friday."


@pytest.mark.parametrize(
    ("fields", "title"),
    [
        ("name: A\ntitle: B\n", "A"),
        ("title: B\nname: A\n", "A"),
        ("title: B\n", "B"),
        ("", "feedback"),
        ("name:\ntitle:   \n", "feedback"),
        ("name:   \ntitle: B\n", "feedback"),  # Qwen: name is " " -> "", not absent
        ("name:\nname: A\ntitle: B\n", "A"),  # a bare "name:" line is skipped
    ],
)
def test_10_title_precedence(fields: str, title: str) -> None:
    doc = parse_document(f"---\n{fields}type: feedback\n---\nbody", "f.md", 0)
    assert doc is not None
    assert doc.title == title


@pytest.mark.parametrize(
    "type_line",
    [
        "type: Project",
        "type: misc",
        "type: USER",
        'type: "user"',
        "type:",
        "Type: user",
        " type: user",
    ],
)
def test_11_bad_type_is_not_a_document(type_line: str) -> None:
    assert parse_document(f"---\nname: x\n{type_line}\n---\nbody", "x.md", 0) is None


@pytest.mark.parametrize(
    "text",
    [
        "name: x\ntype: user\n---\nbody",
        "\n---\ntype: user\n---\nbody",
        " ---\ntype: user\n---\nbody",
        "--- \ntype: user\n---\nbody",
        "",
        "# Just markdown",
    ],
)
def test_12_no_leading_fence_is_not_a_document(text: str) -> None:
    assert parse_document(text, "x.md", 0) is None


def test_16_crlf_parses_like_lf_twin() -> None:
    crlf = SPEC_FILE.replace("\n", "\r\n")
    lf_doc = parse_document(SPEC_FILE, "user/a.md", 7)
    crlf_doc = parse_document(crlf, "user/a.md", 7)
    assert crlf_doc == lf_doc
    assert crlf_doc is not None and "\r" not in crlf_doc.body


# --- tricky frontmatter ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "---\n---\nbody",  # empty frontmatter
        "---\n---\n",
        "---\n\n---\nbody",  # blank frontmatter
        "---\ntype: user\nbody without a closing fence\n",  # no closing fence
        "---\ntype: user",
        "---\n",
    ],
)
def test_unparseable_frontmatter(text: str) -> None:
    assert parse_document(text, "x.md", 0) is None


def test_closing_fence_is_searched_after_the_opening_one() -> None:
    # Qwen's /^---\n([\s\S]*?)\n---\n?/: the frontmatter here is "---\ntype: user"
    split = split_frontmatter("---\n---\ntype: user\n---\nbody")
    assert split is not None
    assert split.frontmatter == "---\ntype: user"
    assert split_frontmatter("---\n\n---\nbody") is None  # empty: no document


def test_quoted_values_keep_their_quotes() -> None:
    text = "---\nname: \"Quoted name\"\ndescription: 'single'\ntype: user\n---\nb"
    doc = parse_document(text, "u.md", 0)
    assert doc is not None
    assert doc.title == '"Quoted name"'
    assert doc.description == "'single'"


def test_description_missing_or_empty_is_empty_string() -> None:
    missing = parse_document("---\ntype: user\n---\nb", "u.md", 0)
    empty = parse_document("---\ndescription:\ntype: user\n---\nb", "u.md", 0)
    assert missing is not None and missing.description == ""
    assert empty is not None and empty.description == ""


def test_empty_value_does_not_spill_onto_next_line() -> None:
    doc = parse_document("---\nname:\ndescription: D\ntype: user\n---\nb", "u.md", 0)
    assert doc is not None
    assert doc.title == "user"
    assert doc.description == "D"


def test_first_matching_line_wins_and_key_is_column_zero_case_sensitive() -> None:
    fm = "  name: indented\nName: cap\nname:  first  \nname: second\nnamex: no"
    assert frontmatter_field(fm, "name") == "first"
    assert frontmatter_field(fm, "missing") is None
    assert frontmatter_field("namex: no", "name") is None


def test_value_with_colons_kept_whole() -> None:
    assert frontmatter_field("description: see: https://x.example/a:b", "description") == (
        "see: https://x.example/a:b"
    )


def test_delimiter_is_first_newline_dashes_and_optional_newline() -> None:
    # The first "\n---" closes the frontmatter even when more dashes follow it.
    split = split_frontmatter("---\ntype: user\n----\nbody\n---\nmore")
    assert split is not None
    assert split.frontmatter == "type: user"
    assert split.body == "-\nbody\n---\nmore"
    no_newline = split_frontmatter("---\ntype: user\n---body")
    assert no_newline is not None and no_newline.body == "body"


def test_split_reports_body_start_line() -> None:
    split = split_frontmatter("---\na: 1\nb: 2\n---\n\nbody")
    assert split is not None
    assert split.body == "\nbody"
    assert split.body_start_line == 5


def test_body_is_trimmed() -> None:
    doc = parse_document("---\ntype: user\n---\n\n\n  body  \n\n\n", "u.md", 0)
    assert doc is not None and doc.body == "body"


def test_empty_body_parses() -> None:
    doc = parse_document("---\ntype: reference\n---\n", "r.md", 0)
    assert doc is not None and doc.body == "" and doc.title == "reference"


# --- rewriting -------------------------------------------------------------------------------


def test_render_with_frontmatter_keeps_frontmatter_verbatim() -> None:
    fm = "name: X\ntype: user\nextra:   kept  "
    assert render_with_frontmatter(fm, "B") == f"---\n{fm}\n---\n\nB\n"


def test_replace_body_replaces_first_literal_occurrence_only() -> None:
    text = "---\ntype: user\n---\n\nA $1 \\1 (x)\n\nA $1 \\1 (x)\n"
    assert replace_body(text, "  A $1 \\1 (x)  ", "NEW") == (
        "---\ntype: user\n---\n\nNEW\n\nA $1 \\1 (x)\n"
    )


def test_replace_body_absent_old_body_leaves_text_unchanged() -> None:
    text = "---\ntype: user\n---\n\nbody\n"
    assert replace_body(text, "other", "new") == text


def test_replace_body_with_empty_old_body_rewrites_after_frontmatter() -> None:
    text = "---\ntype: user\n---\n"
    assert replace_body(text, "", "new body") == "---\ntype: user\n---\n\nnew body\n"
    assert replace_body("no frontmatter", "  ", "x") == "no frontmatter"


def test_replace_body_on_crlf_file_finds_parsed_body() -> None:
    text = "---\r\ntype: user\r\n---\r\n\r\nline one\r\nline two\r\n"
    doc = parse_document(text, "u.md", 0)
    assert doc is not None
    assert replace_body(text, doc.body, "x") == "---\ntype: user\n---\n\nx\n"


# --- round trips -----------------------------------------------------------------------------
#
# A frontmatter value survives render -> parse as frontmatter_value() writes it (one line, no
# leading YAML indicator) when it is non-empty (an empty name reads back as the type; an empty
# description reads back as ""), and it cannot contain "\n---".  The body survives when it is
# already trimmed (parse trims it).

_line_chars = st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"))
values = st.text(_line_chars, min_size=1, max_size=60).map(str.strip).filter(bool)
bodies = (
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r"), max_size=200)
    .map(str.strip)
    .filter(lambda b: "\n---" not in b)
)
types = st.sampled_from(MEMORY_TYPES)


@given(values, values | st.just(""), types, bodies)
def test_document_round_trip(name: str, description: str, kind: str, body: str) -> None:
    text = render_document(name, description, kind, body)  # type: ignore[arg-type]
    doc = parse_document(text, f"{kind}/x.md", 5.0)
    assert doc is not None
    expected = (frontmatter_value(name), frontmatter_value(description), kind, body)
    assert (doc.title, doc.description, doc.type, doc.body) == expected
    again = render_document(doc.title, doc.description, doc.type, doc.body)
    assert again == text
    assert render_with_frontmatter(doc.frontmatter, doc.body) == text


@given(st.text(max_size=300))
def test_parse_never_raises_and_body_has_no_cr(text: str) -> None:
    doc = parse_document(text, "x.md", 0)
    if doc is not None:
        assert doc.type in MEMORY_TYPES
        assert "\r\n" not in doc.body
        assert doc.body == doc.body.strip()


def test_replace_body_never_touches_the_frontmatter() -> None:
    # Deliberate deviation from spec §4.4 (Qwen Code searches the whole file): the summary
    # usually repeats in name/description, so the search starts below the closing fence.
    text = "---\nname: Use pnpm\ndescription: Use pnpm\ntype: user\n---\n\nUse pnpm\n"
    assert replace_body(text, "Use pnpm", "Use pnpm\n\nWhy: lockfile") == (
        "---\nname: Use pnpm\ndescription: Use pnpm\ntype: user\n---\n\nUse pnpm\n\nWhy: lockfile\n"
    )


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ("Deploy rule: always use ArgoCD", "Deploy rule: always use ArgoCD"),  # spec: verbatim
        ("*Always* run the tests", "*Always* run the tests"),
        ("`make check` must pass", "`make check` must pass"),
        ('"Ship it" means merge', '"Ship it" means merge'),
        ("[backend] migrations run first", "[backend] migrations run first"),
        ("> quoted reply", "> quoted reply"),
        ("!!python/object/apply:os.system", "python/object/apply:os.system"),  # a tag
        ("&anchor then text", "anchor then text"),  # an anchor
        ("# heading words", "heading words"),  # a comment: empty value
        (">#0000000000", "0000000000"),  # an empty block scalar
        ("[a, b]", "a, b]"),  # a list
        ("~ #not a comment", "~ not a comment"),  # null
        ("two\nlines", "two lines"),
    ],
)
def test_frontmatter_value_drops_only_what_yaml_would_misread(value: str, written: str) -> None:
    assert frontmatter_value(value) == written
