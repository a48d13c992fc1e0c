"""Dream's mechanical pass as pure planning (spec §8.4; checklist 57-59)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from qmem_git.core.codec import parse_document, replace_body
from qmem_git.core.dedupe import (
    DreamPlan,
    dedupe_entries,
    dream_message,
    plan_dream,
    render_faithfully,
)
from qmem_git.core.entries import parse_entries, render_entries
from qmem_git.core.model import Document, Entry


def memory(kind: str, body: str, name: str = "Memory", description: str = "d") -> str:
    return f"---\nname: {name}\ndescription: {description}\ntype: {kind}\n---\n\n{body}\n"


def scan(files: dict[str, tuple[str, float]]) -> list[Document]:
    docs = [parse_document(text, rel, mtime) for rel, (text, mtime) in files.items()]
    return [doc for doc in docs if doc is not None]


def plan(files: dict[str, tuple[str, float]]) -> DreamPlan:
    return plan_dream(scan(files), lambda rel: files[rel][0] if rel in files else None)


def apply(files: dict[str, tuple[str, float]], result: DreamPlan, now: float) -> None:
    for rel, text in result.writes.items():
        files[rel] = (text, now)
    for rel in result.deletes:
        del files[rel]


# --- checklist 57: in-file dedupe -------------------------------------------------------------


def test_in_file_duplicates_fold_and_sort_case_insensitively() -> None:
    files = {"user/prefs.md": (memory("user", "B\n\na\n\nb"), 1000.0)}
    result = plan(files)
    assert result.deduped_entries == 1
    assert result.touched_topics == ["user"]
    body = parse_document(result.writes["user/prefs.md"], "user/prefs.md", 0)
    assert body is not None
    assert body.body == "a\n\nb"


def test_latest_duplicate_spelling_wins_and_earliest_details_are_kept() -> None:
    entries = [
        Entry("Use pnpm", why="first why"),
        Entry("use PNPM", why="second why", how_to_apply="how"),
    ]
    assert dedupe_entries(entries) == [Entry("use PNPM", "first why", "how")]


def test_sort_is_casefold_then_raw() -> None:
    entries = [Entry("b"), Entry("B"), Entry("a")]
    # "b" and "B" are one group (summary.lower()), the later spelling wins
    assert [e.summary for e in dedupe_entries(entries)] == ["a", "B"]
    assert [e.summary for e in dedupe_entries([Entry("Zed"), Entry("alpha")])] == ["alpha", "Zed"]


# --- checklist 58: cross-file dedupe ----------------------------------------------------------


def test_same_single_summary_in_two_files_deletes_the_older() -> None:
    body = "User prefers terse responses."
    files = {
        "user/terse.md": (memory("user", body), 2000.0),
        "user/terse-duplicate.md": (memory("user", body), 1000.0),
    }
    result = plan(files)
    assert result.deletes == ["user/terse-duplicate.md"]
    assert result.writes == {}
    assert result.deduped_entries == 1
    assert result.touched_topics == ["user"]
    assert result.system_message == "Managed auto-memory dream updated: user.md"


def test_newest_file_survives_and_gains_the_older_details() -> None:
    files = {
        "user/old.md": (memory("user", "Prefers tabs\n\nWhy: Accessibility."), 1000.0),
        "user/new.md": (memory("user", "prefers tabs"), 3000.0),
    }
    result = plan(files)
    assert result.deletes == ["user/old.md"]
    new = parse_document(result.writes["user/new.md"], "user/new.md", 0)
    assert new is not None
    # the later (older) file is the incoming side: its spelling wins, missing why is filled
    assert parse_entries(new.body) == [Entry("Prefers tabs", "Accessibility.")]


def test_same_summary_in_different_types_is_not_a_duplicate() -> None:
    files = {
        "user/a.md": (memory("user", "Same summary text"), 2000.0),
        "project/a.md": (memory("project", "Same summary text"), 1000.0),
    }
    assert plan(files).is_empty


def test_three_copies_accumulate_details_into_the_canonical() -> None:
    files = {
        "user/a.md": (memory("user", "Fact here"), 3000.0),
        "user/b.md": (memory("user", "Fact here\n\nWhy: w"), 2000.0),
        "user/c.md": (memory("user", "Fact here\n\nHow to apply: h"), 1000.0),
    }
    result = plan(files)
    assert result.deletes == ["user/b.md", "user/c.md"]
    assert result.deduped_entries == 2
    doc = parse_document(result.writes["user/a.md"], "user/a.md", 0)
    assert doc is not None
    assert parse_entries(doc.body) == [Entry("Fact here", "w", "h")]


def test_multi_entry_duplicate_keeps_every_entry() -> None:
    files = {
        "user/new.md": (memory("user", "Alpha"), 2000.0),
        "user.md": (memory("user", "# User Memory\n\n- Alpha\n- Beta"), 1000.0),
    }
    result = plan(files)
    assert result.deletes == ["user.md"]
    doc = parse_document(result.writes["user/new.md"], "user/new.md", 0)
    assert doc is not None
    assert parse_entries(doc.body) == [Entry("Alpha"), Entry("Beta")]


def test_rewritten_later_file_is_deleted_not_written() -> None:
    files = {
        "user/new.md": (memory("user", "Alpha"), 2000.0),
        "user/old.md": (memory("user", "Alpha\n\nalpha"), 1000.0),
    }
    result = plan(files)
    assert "user/old.md" not in result.writes
    assert result.deletes == ["user/old.md"]
    assert result.deduped_entries == 2


# --- checklist 59 and legacy conversion -------------------------------------------------------


def test_clean_store_plans_nothing() -> None:
    files = {
        "user/a.md": (memory("user", "Alpha fact\n\nWhy: w"), 2000.0),
        "project/b.md": (memory("project", "Beta fact"), 1000.0),
    }
    result = plan(files)
    assert result.is_empty
    assert result.touched_topics == []
    assert result.deduped_entries == 0
    assert result.system_message is None


def test_legacy_g1_body_is_converted_and_counts_as_a_change() -> None:
    legacy = "# Feedback Memory\n\n- Use short responses\n  - Why: Brevity.\n- Always strict mode"
    files = {"feedback.md": (memory("feedback", legacy), 1000.0)}
    result = plan(files)
    assert result.touched_topics == ["feedback"]
    assert result.deduped_entries == 0
    assert result.writes["feedback.md"].endswith(
        "\n\nAlways strict mode\n\nUse short responses\n\nWhy: Brevity.\n"
    )


def test_frontmatter_is_preserved_even_when_the_description_equals_the_body() -> None:
    text = memory("user", "Same text\n\nsame text", description="Same text")
    files = {"user/x.md": (text, 1000.0)}
    result = plan(files)
    assert result.writes["user/x.md"] == memory("user", "same text", description="Same text")


def test_crlf_file_is_rewritten_with_lf() -> None:
    files = {"user/x.md": (memory("user", "B\n\nA").replace("\n", "\r\n"), 1000.0)}
    assert plan(files).writes["user/x.md"] == memory("user", "A\n\nB")


def test_unreadable_file_is_skipped() -> None:
    docs = scan({"user/x.md": (memory("user", "B\n\nA"), 1000.0)})
    assert plan_dream(docs, lambda rel: None).is_empty


def test_body_that_would_not_round_trip_is_left_alone() -> None:
    # "- Why: x" parses as an entry whose summary looks like a detail line once rendered
    files = {"user/x.md": (memory("user", "- Why: x\n- Also this"), 1000.0)}
    assert render_faithfully([Entry("Why: x")]) is None
    assert plan(files).is_empty


def test_empty_body_becomes_the_placeholder_once() -> None:
    files = {"user/x.md": ("---\ntype: user\n---\n", 1000.0)}
    result = plan(files)
    assert result.writes["user/x.md"] == "---\ntype: user\n---\n\n_No entries yet._\n"
    apply(files, result, 2000.0)
    assert plan(files).is_empty


def test_body_replacement_never_touches_the_frontmatter() -> None:
    # the summary repeats in name/description; only the body copy may change
    text = memory("user", "Same words here")
    text = text.replace(
        "type: user", "name: Same words here\ndescription: Same words here\ntype: user"
    )
    assert replace_body(text, "Same words here", "New words") == text.replace(
        "\n\nSame words here\n", "\n\nNew words\n"
    )


def test_dream_message_lists_topics_in_touch_order() -> None:
    assert dream_message(["user", "project"]) == (
        "Managed auto-memory dream updated: user.md, project.md"
    )
    assert dream_message([]) is None


# --- property: planning is idempotent ---------------------------------------------------------

_WORD = st.sampled_from(["alpha", "Alpha", "beta", "BETA", "gamma", "delta", "terse", "pnpm"])
_SUMMARY = st.lists(_WORD, min_size=1, max_size=3).map(" ".join)
_DETAIL = st.none() | _SUMMARY
_ENTRY = st.builds(Entry, _SUMMARY, _DETAIL, _DETAIL)


def _body(entries: list[Entry], legacy: bool) -> str:
    if not legacy:
        return render_entries(entries)
    lines = ["# Memory", ""]
    for entry in entries:
        lines.append(f"- {entry.summary}")
        if entry.why:
            lines.append(f"  - Why: {entry.why}")
        if entry.how_to_apply:
            lines.append(f"  - How to apply: {entry.how_to_apply}")
    return "\n".join(lines)


_FILE = st.tuples(
    st.sampled_from(["user", "feedback", "project"]),
    st.lists(_ENTRY, min_size=0, max_size=4),
    st.booleans(),
    st.integers(min_value=0, max_value=5),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_FILE, min_size=1, max_size=6))
def test_planning_again_after_applying_plans_nothing(
    specs: list[tuple[str, list[Entry], bool, int]],
) -> None:
    files = {
        f"{kind}/m{i}.md": (memory(kind, _body(entries, legacy)), float(mtime))
        for i, (kind, entries, legacy, mtime) in enumerate(specs)
    }
    first = plan(files)
    apply(files, first, 10.0)
    second = plan(files)
    assert second.is_empty, second
    assert second.deduped_entries == 0
