"""Forget candidates, selection and planning (spec §11; checklist 74-77)."""

from __future__ import annotations

import pytest

from qmem_git.core.codec import parse_document
from qmem_git.core.entries import parse_entries
from qmem_git.core.forget import (
    Candidate,
    ForgetPlan,
    UnknownMemoryId,
    closest_ids,
    forget_message,
    list_candidates,
    plan_forget,
    select_by_ids,
    select_heuristic,
)
from qmem_git.core.model import Document, Entry
from qmem_git.errors import NothingToDo

FRONTMATTER = "name: Preferences\ndescription: How to reply\ntype: user"


def memory(kind: str, body: str) -> str:
    return f"---\nname: M\ndescription: d\ntype: {kind}\n---\n\n{body}\n"


def scan(files: dict[str, str]) -> list[Document]:
    docs = [parse_document(text, rel, 1000.0 - i) for i, (rel, text) in enumerate(files.items())]
    return [doc for doc in docs if doc is not None]


def forget(files: dict[str, str], matches: list[Candidate]) -> ForgetPlan:
    return plan_forget(scan(files), matches, files.get)


STORE = {
    "feedback/no-summary.md": memory("feedback", "Never add a summary paragraph"),
    "user/prefs.md": (
        f"---\n{FRONTMATTER}\n---\n\nAlpha rule\n\nBeta rule\n\nWhy: keep it terse\n\nGamma rule\n"
    ),
}


# --- checklist 74: ids ------------------------------------------------------------------------


def test_single_entry_file_id_is_its_path_multi_entry_ids_are_indexed() -> None:
    ids = [c.id for c in list_candidates(scan(STORE))]
    assert ids == [
        "feedback/no-summary.md",
        "user/prefs.md:0",
        "user/prefs.md:1",
        "user/prefs.md:2",
    ]


def test_candidate_carries_type_entry_and_index() -> None:
    beta = list_candidates(scan(STORE))[2]
    assert (beta.type, beta.relative_path, beta.index) == ("user", "user/prefs.md", 1)
    assert beta.entry == Entry("Beta rule", "keep it terse")
    assert beta.summary == "Beta rule"


# --- checklist 75: heuristic selection --------------------------------------------------------


def test_query_matches_the_why_case_insensitively() -> None:
    matches = select_heuristic(list_candidates(scan(STORE)), "Terse")
    assert [m.id for m in matches] == ["user/prefs.md:1"]


def test_query_whitespace_is_normalised_and_limit_applies() -> None:
    candidates = list_candidates(scan(STORE))
    assert [m.id for m in select_heuristic(candidates, "  keep   it  ")] == ["user/prefs.md:1"]
    assert len(select_heuristic(candidates, "rule")) == 3
    assert len(select_heuristic(candidates, "rule", limit=2)) == 2
    assert len(select_heuristic(candidates, "rule", limit=None)) == 3
    assert select_heuristic(candidates, "rule", limit=0) == []
    assert select_heuristic(candidates, "   ") == []


# --- explicit ids -----------------------------------------------------------------------------


def test_select_by_ids_keeps_candidate_order_and_drops_repeats() -> None:
    candidates = list_candidates(scan(STORE))
    chosen = select_by_ids(
        candidates, ["user/prefs.md:2", "feedback/no-summary.md", "user/prefs.md:2"]
    )
    assert [c.id for c in chosen] == ["feedback/no-summary.md", "user/prefs.md:2"]


def test_unknown_id_names_the_closest_known_ids() -> None:
    candidates = list_candidates(scan(STORE))
    with pytest.raises(UnknownMemoryId) as caught:
        select_by_ids(candidates, ["feedback/no-sumary.md"])
    assert isinstance(caught.value, NothingToDo)
    assert "feedback/no-sumary.md" in caught.value.message
    assert "feedback/no-summary.md" in caught.value.hint


def test_bare_path_of_a_multi_entry_file_suggests_its_entries() -> None:
    known = [c.id for c in list_candidates(scan(STORE))]
    assert closest_ids("user/prefs.md", known) == [
        "user/prefs.md:0",
        "user/prefs.md:1",
        "user/prefs.md:2",
    ]


def test_unknown_id_without_look_alikes_points_to_the_listing() -> None:
    with pytest.raises(UnknownMemoryId) as caught:
        select_by_ids([], ["zzz"])
    assert "--dry-run" in caught.value.hint


# --- checklist 76: applying -------------------------------------------------------------------


def test_forgetting_the_only_entry_deletes_the_file() -> None:
    matches = list_candidates(scan(STORE))[:1]
    result = forget(STORE, matches)
    assert result.deletes == ["feedback/no-summary.md"]
    assert result.writes == {}
    assert result.touched_topics == ["feedback"]


def test_forgetting_one_of_three_keeps_the_frontmatter_text() -> None:
    matches = [c for c in list_candidates(scan(STORE)) if c.id == "user/prefs.md:1"]
    result = forget(STORE, matches)
    assert result.writes == {
        "user/prefs.md": f"---\n{FRONTMATTER}\n---\n\nAlpha rule\n\nGamma rule\n",
    }
    assert result.deletes == []
    assert result.removed == matches


def test_same_summary_siblings_go_too() -> None:
    files = {"user/x.md": memory("user", "Alpha\n\nBeta\n\nalpha")}
    candidates = list_candidates(scan(files))
    result = forget(files, candidates[:1])
    assert parse_entries(result.writes["user/x.md"].split("---\n\n", 1)[1]) == [Entry("Beta")]
    assert result.entries_removed == 2
    assert result.removed_count == 1


def test_file_without_frontmatter_is_deleted() -> None:
    docs = scan({"user/x.md": memory("user", "A\n\nB")})
    matches = list_candidates(docs)
    result = plan_forget(docs, matches, lambda rel: "no frontmatter any more")
    assert result.deletes == ["user/x.md"]
    assert result.removed_count == 2


def test_file_already_gone_is_ignored() -> None:
    docs = scan(STORE)
    result = plan_forget(docs, list_candidates(docs), lambda rel: None)
    assert result.is_empty
    assert result.removed_count == 0
    assert result.system_message is None


def test_stale_match_that_no_longer_exists_changes_nothing() -> None:
    docs = scan(STORE)
    matches = list_candidates(docs)[:1]
    result = plan_forget(docs, matches, lambda rel: memory("feedback", "Something else"))
    assert result.is_empty


# --- checklist 77: message --------------------------------------------------------------------


def test_message_counts_entries_and_lists_folders() -> None:
    matches = select_heuristic(list_candidates(scan(STORE)), "rule", limit=2)
    result = forget(STORE, matches)
    assert [m.id for m in matches] == ["user/prefs.md:0", "user/prefs.md:1"]
    assert result.system_message == "Managed auto-memory forgot 2 entries from: user/"
    assert forget_message(1, ["user"]) == "Managed auto-memory forgot 1 entry from: user/"
    assert forget_message(3, ["user", "project"]) == (
        "Managed auto-memory forgot 3 entries from: user/, project/"
    )
    assert forget_message(0, []) is None
