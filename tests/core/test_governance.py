"""Spec §12 governance review, checklist item 80."""

from __future__ import annotations

from qmem_git.core.codec import parse_document
from qmem_git.core.entries import parse_entries
from qmem_git.core.governance import MAX_SUGGESTIONS, review_entries
from qmem_git.core.model import Entry

LEGACY_PROJECT = """---
type: project
title: Project Memory
description: Project facts
---

# Project Memory

- Dashboard: https://grafana.internal/d/api
- Dashboard: https://grafana.internal/d/api
- This is only temporary for this task.
"""


def test_item_80_duplicate_migrate_and_forget() -> None:
    doc = parse_document(LEGACY_PROJECT, "project.md", 0)
    assert doc is not None
    review = review_entries((doc.type, entry) for entry in parse_entries(doc.body))
    kinds = [s.kind for s in review.suggestions]
    assert kinds[0] == "duplicate"
    assert {"duplicate", "migrate", "forget"} <= set(kinds)
    migrate = next(s for s in review.suggestions if s.kind == "migrate")
    assert migrate.entry_id == "project:Dashboard: https://grafana.internal/d/api"
    assert "reference" in migrate.reason
    forget = next(s for s in review.suggestions if s.kind == "forget")
    assert forget.entry_id == "project:This is only temporary for this task."
    assert review.strategy == "heuristic"


def test_outdated_promote_and_conflicts() -> None:
    entries = [
        ("feedback", Entry("Always squash commits before merging", "history", "git merge")),
        ("feedback", Entry("Never squash commits before merging", "bisect", "keep them")),
        ("user", Entry("User likes terse answers", "said so", "be brief")),
        ("user", Entry("User wants detailed answers", "said so", "explain")),
        ("project", Entry("The legacy billing service is frozen")),
    ]
    review = review_entries(entries)
    kinds = [(s.kind, s.entry_id) for s in review.suggestions]
    assert ("conflict", "feedback:Never squash commits before merging") in kinds
    assert ("conflict", "user:User wants detailed answers") in kinds
    assert ("outdated", "project:The legacy billing service is frozen") in kinds
    assert ("promote", "project:The legacy billing service is frozen") in kinds
    assert ("promote", "feedback:Always squash commits before merging") not in kinds


def test_word_boundaries_and_clean_store() -> None:
    clean = [("user", Entry("User holds bold opinions about fonts", "taste", "ask first"))]
    assert review_entries(clean).suggestions == ()
    assert review_entries(clean).strategy == "none"


def test_at_most_twenty_suggestions() -> None:
    many = [("project", Entry(f"Temporary item number {i}")) for i in range(30)]
    assert len(review_entries(many).suggestions) == MAX_SUGGESTIONS
