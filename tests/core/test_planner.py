"""Heuristic planner (spec §7.5); checklist items 37-38."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qmem_git.core.extract import Message
from qmem_git.core.patches import Patch, rejection_reason
from qmem_git.core.planner import classify_topic, heuristic_summary, plan_heuristic
from qmem_git.core.text import normalize_space


def users(*texts: str) -> list[Message]:
    return [Message(i, "user", text) for i, text in enumerate(texts)]


def test_preference_and_dashboard_url() -> None:  # checklist 37
    patches = plan_heuristic(
        users(
            "I prefer terse responses.",
            "The latency dashboard is https://grafana.internal/d/api-latency",
        )
    )
    assert [p.topic for p in patches] == ["user", "reference"]
    assert [p.source_offset for p in patches] == [0, 1]
    assert patches[0].summary == "I prefer terse responses."


def test_explicit_remember_request() -> None:  # checklist 38
    [patch] = plan_heuristic(users("Please remember that the release freeze starts 2026-03-05"))
    assert patch == Patch("project", "the release freeze starts 2026-03-05", source_offset=0)


@pytest.mark.parametrize(
    ("text", "summary"),
    [
        ("remember : always run make lint", "always run make lint"),
        ("remember: always run make lint", "remember: always run make lint"),  # no space: step 3
        ("Save that - we never deploy on Fridays", "we never deploy on Fridays"),
        ("NOTE   the service runs on port 8080", "the service runs on port 8080"),
        ("please   note that  the wiki is outdated", "the wiki is outdated"),
    ],
)
def test_request_forms(text: str, summary: str) -> None:
    assert heuristic_summary(text) == summary


@pytest.mark.parametrize(
    "text",
    [
        "What is the build command?",
        "short one",
        "I prefer terse responses today",
        "Let us look at the failing test output",
        "Note: nothing follows the keyword here",  # `note` must be followed by whitespace
    ],
)
def test_rejected_messages(text: str) -> None:
    assert plan_heuristic(users(text)) == []


@given(st.text(alphabet="ab? \nlatertodaytomorrowrightnowremember", max_size=60))
def test_the_planner_rejects_exactly_what_remember_rejects(text: str) -> None:
    """Steps 1-3 use the §7.6 rejection rules of ``remember`` (core.patches.rejection_reason)."""
    if rejection_reason(normalize_space(text)) is not None:
        assert heuristic_summary(text) is None


def test_only_user_messages_are_planned_and_duplicates_skipped() -> None:
    messages = [
        Message(0, "model", "I prefer to always answer in French."),
        Message(1, "user", "I prefer terse responses."),
        Message(2, "user", "i prefer TERSE responses."),
        Message(3, "user", "Please avoid emojis in commit messages"),
    ]
    patches = plan_heuristic(messages)
    assert [(p.topic, p.source_offset) for p in patches] == [("user", 1), ("feedback", 3)]
    assert plan_heuristic([*messages, Message(4, "user", "I prefer terse responses.")]) == patches


@pytest.mark.parametrize(
    ("summary", "topic"),
    [
        ("See https://example.com for the spec", "reference"),
        ("The oncall runbook is in Notion", "reference"),
        ("We want small commits", "user"),
        ("My favorite editor is Helix", "user"),
        ("Always respond in English", "feedback"),
        ("Keep a concise style in reviews", "feedback"),
        ("The staging environment uses Postgres 16", "project"),
        ("Our incident review happens weekly", "project"),
        ("The sky is blue and the grass is green", None),
        ("The documentation is in the docstring", None),  # whole words only
    ],
)
def test_classify_topic(summary: str, topic: str | None) -> None:
    assert classify_topic(summary) == topic


def test_classification_order_prefers_reference_then_user() -> None:
    assert classify_topic("I prefer the grafana dashboard") == "reference"
    assert classify_topic("I prefer to always squash") == "user"
    assert classify_topic("Always tag the release") == "feedback"
