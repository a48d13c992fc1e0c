"""MEMORY.md generation (spec §6, checklist 25-29) and scan order (spec §5)."""

from __future__ import annotations

import pytest
from docorder import order_documents
from hypothesis import given
from hypothesis import strategies as st

from qmem_git.core.index import (
    MAX_BYTES,
    MAX_LINE_CHARS,
    MAX_LINES,
    WARNING,
    IndexResult,
    build_index,
    index_is_current,
    index_line,
    sanitize_field,
    scan_order_key,
)
from qmem_git.core.model import Document, MemoryType

SPEC_WARNING = (
    "> WARNING: MEMORY.md is too large; only part of it was written. "
    "Keep index entries concise and move detail into topic files."
)


def doc(
    path: str,
    title: str = "T",
    description: str = "",
    kind: MemoryType = "user",
    mtime_ms: float = 0.0,
) -> Document:
    return Document(kind, path, title, description, "body", mtime_ms)


def test_constants_match_spec() -> None:
    assert (MAX_LINE_CHARS, MAX_LINES, MAX_BYTES) == (150, 200, 25_000)
    assert WARNING == SPEC_WARNING


def test_25_single_document_exact_text() -> None:
    result = build_index([doc("user/terse.md", "User Memory", "User profile")])
    assert result == IndexResult("- [User Memory](user/terse.md) — User profile", ())


def test_spec_6_example_two_documents() -> None:
    docs = [
        doc(
            "project/release-freeze.md",
            "Release freeze",
            "Merge freeze begins 2026-03-05 for mobile release",
            "project",
        ),
        doc("reference/latency-dashboard.md", "Latency Dashboard", "", "reference"),
    ]
    assert build_index(docs).text == (
        "- [Release freeze](project/release-freeze.md) — "
        "Merge freeze begins 2026-03-05 for mobile release\n"
        "- [Latency Dashboard](reference/latency-dashboard.md) — reference"
    )


def test_26_empty_description_ends_with_type() -> None:
    assert index_line(doc("feedback/x.md", "X", "", "feedback")).endswith(" — feedback")


def test_separator_is_space_em_dash_space() -> None:
    assert "\u2014" in index_line(doc("a.md", "A", "d"))
    assert index_line(doc("a.md", "A", "d")) == "- [A](a.md) \u2014 d"


def test_zero_documents_give_empty_file() -> None:
    assert build_index([]) == IndexResult("", ())


def test_27_long_line_truncated_to_150_with_ellipsis() -> None:
    # each field is cut to 120 first (sanitizeIndexField); a long title and description
    # together still make a line over 150, which is then cut as before
    line = index_line(doc("user/long.md", "L" * 60, "x" * 400))
    full = "- [" + "L" * 60 + "](user/long.md) — " + "x" * 119 + "…"
    assert len(full) > 150
    assert len(line) <= 150
    assert line == full[:149].rstrip() + "…"
    assert line.endswith("x…") and len(line) == 150


def test_truncation_right_trims_before_ellipsis() -> None:
    prefix = "- [" + "T" * 40 + "](a.md) — "
    ys = 149 - len(prefix) - 1
    description = "y" * ys + "   " + "z" * 50  # the run is one space; char 149 falls on it
    line = index_line(doc("a.md", "T" * 40, description))
    assert line == prefix + "y" * ys + "…"
    assert len(line) < 150


def test_line_of_exactly_150_chars_is_kept() -> None:
    prefix = "- [" + "T" * 30 + "](a.md) — "
    exact = index_line(doc("a.md", "T" * 30, "d" * (150 - len(prefix))))
    assert len(exact) == 150 and not exact.endswith("…")
    over = index_line(doc("a.md", "T" * 30, "d" * (151 - len(prefix))))
    assert len(over) == 150 and over.endswith("…")


def test_truncation_counts_characters_not_bytes() -> None:
    line = index_line(doc("a.md", "T" * 30, "é" * 140))
    assert len(line) == 150 and len(line.encode()) > 150


@pytest.mark.parametrize(
    ("field", "shown"),
    [
        ("See [docs](http://evil.example/x) first", "See [docs] (http://evil.example/x) first"),
        ("Run `rm -rf` ```fence```", "Run 'rm -rf' '''fence'''"),
        ("tab\tnew\nline\r\x1b[31mred\x85c1\x7fdel", "tab new line [31mred c1 del"),
        ("zero\u200bwidth\u200d \ufeffbom", "zerowidth bom"),
        ("bidi \u202eevil\u202c \u2066isolate\u2069 \u200frtl", "bidi evil isolate rtl"),
        ("  many   spaces\u00a0and\u2003em  ", "many spaces and em"),
        ("half \ud83d emoji", "half \ufffd emoji"),  # Node writes a lone surrogate as U+FFFD
        ("x" * 120, "x" * 120),
        ("x" * 121, "x" * 119 + "…"),
        ("word " * 30, ("word " * 24)[:119].rstrip() + "…"),
        ("\U0001f600" * 60, "\U0001f600" * 60),  # 120 UTF-16 code units: fits
        # cut at 119 code units: the 60th emoji loses its low half, which Node writes as U+FFFD
        ("\U0001f600" * 61, "\U0001f600" * 59 + "\ufffd…"),
        ("\u200b\u202e \t", ""),
    ],
)
def test_fields_are_sanitised_as_qwen_does(field: str, shown: str) -> None:
    assert sanitize_field(field) == shown


def test_a_field_left_empty_shows_the_type() -> None:
    line = index_line(doc("user/x.md", "\u200b", " \u202e ", "feedback"))
    assert line == "- [feedback](user/x.md) — feedback"


def test_a_link_in_a_title_is_not_a_live_link() -> None:
    line = index_line(doc("user/x.md", "Docs](http://evil.example) [x", "d"))
    assert line == "- [Docs] (http://evil.example) [x](user/x.md) — d"
    assert line.count("](") == 1


def test_29_250_records_give_exactly_200_lines_then_warning() -> None:
    docs = [doc(f"user/m{i:03d}.md", f"M{i}", "short") for i in range(250)]
    result = build_index(docs)
    head, sep, warning = result.text.rpartition("\n\n")
    assert sep and warning == SPEC_WARNING
    lines = head.split("\n")
    assert len(lines) == 200
    assert lines == [index_line(d) for d in docs[:200]]
    assert result.dropped == tuple(f"user/m{i:03d}.md" for i in range(200, 250))


def test_200_records_fit_without_warning() -> None:
    docs = [doc(f"user/m{i:03d}.md", f"M{i}", "short") for i in range(200)]
    result = build_index(docs)
    assert WARNING not in result.text
    assert result.text.count("\n") == 199
    assert result.dropped == ()


def _wide_docs(count: int, char: str = "w") -> list[Document]:
    return [doc(f"user/w{i:03d}.md", f"W{i}", char * 200) for i in range(count)]


def test_28_over_25000_bytes_cut_at_line_boundary_with_warning() -> None:
    docs = _wide_docs(190, "é")  # each line 150 UTF-16 code units (the limit counts those)
    lines = [index_line(d) for d in docs]
    assert len("\n".join(lines)) > MAX_BYTES
    result = build_index(docs)
    assert result.text.endswith("\n\n" + SPEC_WARNING)
    kept_text = result.text[: -len("\n\n" + SPEC_WARNING)]
    kept = kept_text.split("\n")
    assert kept == lines[: len(kept)]  # every kept line is complete and in order
    assert len(kept_text) <= MAX_BYTES
    # greedy: one more line would not have fit
    assert len("\n".join(lines[: len(kept) + 1])) > MAX_BYTES
    assert result.dropped == tuple(d.relative_path for d in docs[len(kept) :])


def _docs_joined_to(count: int, total_bytes: int) -> list[Document]:
    """``count`` ASCII-description docs whose index lines joined by "\\n" are ``total_bytes``."""
    prefix_bytes = len("- [T](p000.md) — ")  # UTF-16 code units, as Qwen counts
    per_line, extra = divmod(total_bytes - (count - 1), count)
    docs = [
        doc(f"p{i:03d}.md", "T", "d" * (per_line + (i < extra) - prefix_bytes))
        for i in range(count)
    ]
    joined = "\n".join(index_line(d) for d in docs)
    assert len(joined) == total_bytes
    assert all(len(index_line(d)) <= MAX_LINE_CHARS for d in docs)
    return docs


def test_byte_limit_exactly_25000_keeps_everything() -> None:
    docs = _docs_joined_to(198, MAX_BYTES)
    assert build_index(docs) == IndexResult("\n".join(index_line(d) for d in docs), ())


def test_line_ending_exactly_at_byte_boundary_is_kept() -> None:
    # The first 198 lines end exactly at byte 25,000; byte 25,001 is the "\n" before line 199.
    docs = [*_docs_joined_to(198, MAX_BYTES), doc("z.md", "Z", "tail")]
    result = build_index(docs)
    assert result.text == "\n".join(index_line(d) for d in docs[:198]) + "\n\n" + SPEC_WARNING
    assert result.dropped == ("z.md",)


def test_one_byte_over_drops_the_partial_line() -> None:
    docs = _docs_joined_to(198, MAX_BYTES + 1)
    result = build_index(docs)
    assert result.text == "\n".join(index_line(d) for d in docs[:197]) + "\n\n" + SPEC_WARNING
    assert result.dropped == (docs[197].relative_path,)


def test_line_limit_and_byte_limit_together() -> None:
    docs = _wide_docs(260, "é")
    result = build_index(docs)
    kept = result.text.split("\n\n")[0].split("\n")
    assert len(kept) < 200
    assert len(result.dropped) == 260 - len(kept)
    assert result.text.endswith(SPEC_WARNING)


@given(
    st.lists(
        st.tuples(
            st.text(min_size=1, max_size=80).filter(lambda t: "\n" not in t), st.integers(0, 3)
        ),
        max_size=260,
    )
)
def test_index_limits_property(items: list[tuple[str, int]]) -> None:
    kinds: list[MemoryType] = ["user", "feedback", "project", "reference"]
    docs = [doc(f"d/{i}.md", title, title * 3, kinds[k]) for i, (title, k) in enumerate(items)]
    result = build_index(docs)
    if result.dropped:
        body, _, warning = result.text.rpartition("\n\n")
        assert warning == SPEC_WARNING
    else:
        body = result.text
        assert WARNING not in body or not docs
    lines = body.split("\n") if body else []
    assert len(lines) <= MAX_LINES
    assert len(body.encode()) <= MAX_BYTES
    assert all(len(line) <= MAX_LINE_CHARS for line in lines)
    assert lines == [index_line(d) for d in docs[: len(lines)]]
    assert result.dropped == tuple(d.relative_path for d in docs[len(lines) :])


# --- scan order ------------------------------------------------------------------------------


def test_14_newest_first_then_basename_then_path() -> None:
    docs = [
        doc("user/old.md", mtime_ms=1000),
        doc("user/b.md", mtime_ms=2000),
        doc("reference/a.md", mtime_ms=2000),
        doc("project/a.md", mtime_ms=2000),
    ]
    ordered = order_documents(docs)
    assert [d.relative_path for d in ordered] == [
        "project/a.md",
        "reference/a.md",
        "user/b.md",
        "user/old.md",
    ]
    assert scan_order_key(docs[0]) == (-1000, "old.md", "user/old.md")


def test_order_documents_keeps_newest_limit() -> None:
    docs = [doc(f"user/{i:03d}.md", mtime_ms=i) for i in range(250)]
    ordered = order_documents(docs)
    assert len(ordered) == 200
    assert ordered[0].mtime_ms == 249 and ordered[-1].mtime_ms == 50
    assert len(order_documents(docs, limit=3)) == 3


def test_limits_count_utf16_code_units_not_bytes() -> None:
    """199 CJK memories: Qwen lists all 199 (each line is short in code units, long in bytes)."""
    docs = [doc(f"p{i:03d}.md", "记忆" * 20, "描述" * 30) for i in range(199)]
    result = build_index(docs)
    assert result.dropped == ()
    assert result.text.count("\n") == 198
    assert len(result.text.encode()) > MAX_BYTES


def test_index_is_current_tolerates_exactly_one_trailing_newline() -> None:
    expected = build_index([doc("user/a.md", "A")])
    assert index_is_current(expected.text, expected)
    assert index_is_current(expected.text + "\n", expected)  # editors, end-of-file fixers
    assert not index_is_current(expected.text + "\n\n", expected)
    assert not index_is_current(None, expected)
    assert not index_is_current("stale", expected)
    empty = build_index([])
    assert index_is_current("", empty) and index_is_current("\n", empty)


def test_drop_index_lines_removes_links_and_credentials_only() -> None:
    from qmem_git.core.index import drop_index_lines

    token = "ghp_" + "Z9y8" * 9
    text = "\n".join(
        [
            "- [Keep](user/keep.md) — kept",
            "- [Gone](reference/gone.md) — removed file",
            f"- [Leak](user/leak.md) — token {token}",
        ]
    )
    assert drop_index_lines(text, ["reference/gone.md"]) == "\n".join(
        [text.split("\n")[0], text.split("\n")[2]]
    )
    assert drop_index_lines(text, [], secrets=True) == "\n".join(text.split("\n")[:2])
    assert drop_index_lines(text, ["user/keep"]) == text  # a prefix is not a link


def test_link_targets_are_percent_encoded_as_qwen_does() -> None:
    from qmem_git.core.index import encode_target

    assert encode_target("user/a-b_c.d~e.md") == "user/a-b_c.d~e.md"
    assert encode_target("project/x y(1)#.md") == "project/x%20y%281%29%23.md"
    assert encode_target("reference/Ärger😀.md") == "reference/%C3%84rger%F0%9F%98%80.md"
    assert encode_target("a" * 130 + ".md") == "a" * 120  # Qwen keeps 120 characters


def test_ties_order_by_locale_compare_then_utf16_path() -> None:
    docs = [
        doc("user/B.md", "B", mtime_ms=5.0),
        doc("feedback/a.md", "a2", mtime_ms=5.0),
        doc("user/a.md", "a1", mtime_ms=5.0),
        doc("user/é.md", "e", mtime_ms=5.0),
        doc("user/new.md", "new", mtime_ms=9.0),
    ]
    ordered = [d.relative_path for d in order_documents(docs)]
    assert ordered == ["user/new.md", "feedback/a.md", "user/a.md", "user/B.md", "user/é.md"]


_FIELD_CHARS = st.sampled_from([" ", "  ", "`", "](", "a", "Z", "~", "\t", "\x7f", "é", "\u200b"])


@given(st.lists(_FIELD_CHARS, max_size=70).map("".join))
def test_a_field_the_cleaner_leaves_alone_skips_it(value: str) -> None:
    """The fast path (no regex) is taken only for fields the regexes would not change."""
    from qmem_git.core.index import _clean_js, _plain

    if _plain(value):
        assert _clean_js(value) == value
    assert _plain("plain words, (and) [brackets] ~ ok") and not _plain(" lead")


@given(st.text(alphabet=st.sampled_from("aZ09._~-/ %é😀"), max_size=140))
def test_a_safe_path_is_its_own_target(path: str) -> None:
    from qmem_git.core.index import encode_target

    expected = "".join(
        char
        if char.isascii() and (char.isalnum() or char in "._~-/")
        else "".join(f"%{byte:02X}" for byte in char.encode("utf-8", "replace"))
        for char in path[:120]
    )
    assert encode_target(path) == expected
