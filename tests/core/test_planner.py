"""Heuristic planner (spec §7.5, refined by issue 23); checklist items 37-38.

The labelled sets in tests/fixtures/eval drive the quality targets
(tests/core/test_quality_eval.py); these tests pin the individual rules.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qmem_git.core.extract import Message
from qmem_git.core.patches import Patch, rejection_reason
from qmem_git.core.planner import (
    classify_topic,
    heuristic_summary,
    infer_type,
    plan_heuristic,
)
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
        ("remember: always run make lint", "always run make lint"),  # the lead-in goes (#23)
        ("Save that - we never deploy on Fridays", "we never deploy on Fridays"),
        ("NOTE   the service runs on port 8080", "the service runs on port 8080"),
        ("please   note that  the wiki is outdated", "the wiki is outdated"),
        ("FYI: our staging cluster is called kiwi", "our staging cluster is called kiwi"),
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
        "please add a README section about installation",  # a request (#23)
        "run the linter again",
        "what does the docs folder contain",  # a question without its question mark
        "Please remember to close the file handle in that loop.",  # a task, not a fact
        "Save the file and rerun the tests",  # the bare lead-in does not make a fact
        "Thanks, the deploy script works now",
        "For now, skip the integration tests",
        "I think the bug is in the date parser",
    ],
)
def test_rejected_messages(text: str) -> None:
    assert plan_heuristic(users(text)) == []


@given(st.text(alphabet="ab? \nlatertodaytomorrowrightnowremember", max_size=60))
def test_the_planner_rejects_exactly_what_remember_rejects(text: str) -> None:
    """Steps 1-3 use the §7.6 rejection rules of ``remember`` (core.patches.rejection_reason)."""
    if rejection_reason(normalize_space(text)) is not None:
        assert heuristic_summary(text) is None


def test_reason_becomes_why_and_name_is_the_first_clause() -> None:
    [patch] = plan_heuristic(users("Never force-push to main because CI deploys from it."))
    assert patch.topic == "feedback"
    assert patch.summary == "Never force-push to main."
    assert patch.why == "CI deploys from it."
    assert patch.name is None  # the summary is short enough to be the name
    assert patch.description == "Never force-push to main because CI deploys from it."
    [long] = plan_heuristic(users("Our staging cluster is called kiwi, production is mango."))
    assert long.name == "Our staging cluster is called kiwi"
    assert long.description is None  # the summary is the description


def test_an_imperative_after_so_becomes_how_to_apply() -> None:
    [patch] = plan_heuristic(users("I'm new to Kubernetes, so explain kubectl commands you use."))
    assert (patch.topic, patch.summary) == ("user", "I'm new to Kubernetes.")
    assert patch.how_to_apply == "Explain kubectl commands you use."
    assert patch.description == "I'm new to Kubernetes, so explain kubectl commands you use."
    [fact] = plan_heuristic(users("The API runs on Python 3.11, so 3.12 syntax breaks it."))
    assert fact.how_to_apply is None  # a consequence, not an instruction
    assert fact.summary == "The API runs on Python 3.11, so 3.12 syntax breaks it."


def test_a_pasted_wall_of_text_is_not_a_fact() -> None:
    assert plan_heuristic(users("We use " + "x-" * 300)) == []  # longer than 500 characters
    assert plan_heuristic(users("We use deploy/bg.sh. Log: " + "a-" * 5_000)) != []


def test_each_sentence_of_a_message_is_read() -> None:
    text = "Thanks, that fixed it. We deploy with deploy/bg.sh. Can you also bump the version?"
    patches = plan_heuristic(users(text))
    assert [(p.topic, p.summary) for p in patches] == [("project", "We deploy with deploy/bg.sh.")]


@pytest.mark.parametrize(
    ("text", "topic"),
    [
        ("I'm the tech lead for the payments backend.", "user"),
        ("My timezone is Europe/Lisbon.", "user"),
        ("We deploy with the blue-green script deploy/bg.sh.", "project"),
        ("The on-call rotation is at https://acme.pagerduty.com/x", "reference"),
        ("Questions about the API go to #checkout-dev.", "reference"),
        ("Never log card numbers.", "feedback"),
        ("Use pnpm instead of npm.", "feedback"),
        ("remember: I always run the formatter, so don't reformat files.", "feedback"),
    ],
)
def test_infer_type_follows_qwen_definitions(text: str, topic: str) -> None:
    assert infer_type(text) == topic


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


@given(st.text(max_size=300))
def test_any_message_yields_clean_patches(text: str) -> None:
    for patch in plan_heuristic(users(text)):
        assert rejection_reason(patch.summary) is None
        assert patch.topic in ("user", "feedback", "project", "reference")
        assert not patch.summary.lower().startswith(("remember:", "note:"))
