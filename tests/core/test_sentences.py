"""Sentence kinds, types and clauses for model-free extraction (core.sentences)."""

from __future__ import annotations

import pytest

from qmem_git.core.sentences import (
    memory_type,
    sentences,
    short_name,
    split_reason,
    strip_lead_in,
    talk_kind,
)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("what does the docs folder contain", "question"),
        ("Do we always need to run migrations first?", "question"),
        ("这个函数是做什么的？", "question"),
        ("Pourquoi ce test échoue-t-il ?", "question"),
        ("please add a README section about installation", "request"),
        ("Just rename it to fetch_orders.", "request"),
        ("I need you to update the changelog.", "request"),
        ("このファイルを削除してください。", "request"),
        ("이 함수 이름을 바꿔 주세요.", "request"),
        ("Thanks, that works!", "thanks"),
        ("谢谢，没问题了。", "thanks"),
        ("For now, skip the integration tests.", "temporary"),
        ("Pour l'instant, désactive le cache.", "temporary"),
        ("I think the bug is in the parser.", "chatter"),
        ("The test passes on my machine but fails in CI.", "chatter"),
        ("Never force-push to main.", None),
        ("Please always answer in English.", None),  # a rule, not a request
        ("テストは必ず pytest で実行してください。", None),
        ("When you deploy, always tag the release.", None),  # a conditional rule
        ("We deploy with deploy/bg.sh.", None),
    ],
)
def test_talk_kind(text: str, kind: str | None) -> None:
    assert talk_kind(text) == kind


def test_explicit_lead_in_is_not_a_request() -> None:
    fact, explicit = strip_lead_in("Please remember that the sandbox resets on Sundays")
    assert (fact, explicit) == ("the sandbox resets on Sundays", True)
    assert talk_kind(fact, explicit) is None
    assert strip_lead_in("remember to close the file") == ("remember to close the file", False)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Runbooks are in the wiki under Ops/Runbooks.", "reference"),
        ("Check the on-call calendar before deploys.", None),  # a place without a name
        ("We never deploy on Fridays.", "feedback"),
        ("Le tableau de bord est sur https://sentry.acme.io.", "reference"),
        ("Je préfère des réponses courtes.", "user"),
        ("정기 배포는 매주 목요일 오전에 진행합니다.", "project"),
        ("The sky is blue.", None),
    ],
)
def test_memory_type(text: str, kind: str | None) -> None:
    assert memory_type(text) == kind


def test_sentences_split_at_full_stops_but_not_inside_versions_or_paths() -> None:
    assert sentences("We use Python 3.11. Deploys use bg.sh! Why? 好的。再见") == [
        "We use Python 3.11.",
        "Deploys use bg.sh!",
        "Why?",
        "好的。",
        "再见",
    ]


def test_split_reason_and_short_name() -> None:
    assert split_reason("Avoid ORMs here because the queries are too complex.") == (
        "Avoid ORMs here.",
        "The queries are too complex.",
    )
    assert split_reason("Use pnpm since 2024") == ("Use pnpm since 2024", None)  # too short
    assert short_name("Our staging cluster is kiwi, production is mango.") == (
        "Our staging cluster is kiwi"
    )
    assert (
        short_name("Latency: see https://grafana.io/d/x") == "Latency: see https://grafana.io/d/x"
    )
