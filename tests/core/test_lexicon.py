"""Search terms shared by recall and the near-duplicate check (core.lexicon)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qmem_git.core.lexicon import (
    GENERIC_WEIGHT,
    compound_terms,
    field_index,
    fold,
    recall_terms,
    stem,
    term_weight,
    terms,
)


@pytest.mark.parametrize(
    ("words", "same"),
    [
        (["deploy", "deploys", "deployed", "deploying", "deployment"], True),
        (["release", "releases", "released"], True),
        (["dependency", "dependencies"], True),
        (["commit", "committed", "committing"], True),
        (["owner", "ownership"], False),
        (["test", "latest"], False),
    ],
)
def test_stem_joins_word_forms(words: list[str], same: bool) -> None:
    assert (len({stem(w) for w in words}) == 1) is same


def test_short_and_non_alphabetic_words_are_kept_as_is() -> None:
    assert stem("pas") == "pas"
    assert stem("v1.2") == "v1.2"
    assert stem("p99s") == "p99s"


def test_fold_removes_accents_only() -> None:
    assert fold("déployer") == "deployer"
    assert fold("après-midi") == "apres-midi"
    assert fold("straße") == "straße"


def test_terms_drop_stop_words_in_several_languages() -> None:
    assert terms("What should we do with the other branch?") == ["branch"]
    assert terms("Peux-tu le faire pour moi ?") == []
    assert terms("Ne jamais déployer le vendredi") == ["jamais", "deployer", "vendredi"]


def test_cjk_particle_bigrams_are_stop_words() -> None:
    assert "くだ" not in terms("ファイルを削除してください")
    assert "一下" not in terms("请解释一下")
    assert "주세" not in terms("추가해 주세요")
    assert "削除" in terms("ファイルを削除してください")


def test_generic_words_weigh_less() -> None:
    assert term_weight(stem("tests")) == GENERIC_WEIGHT
    assert term_weight(stem("error")) == GENERIC_WEIGHT
    assert term_weight(stem("grafana")) == 1.0


def test_field_index_weighs_title_over_description_over_body() -> None:
    counts, length = field_index(("canary", "canary rollout", "canary rollout steps"))
    assert counts["canary"] == 2.0 + 1.5 + 1.0
    assert counts["step"] == 1.0
    assert length == 2.0 + 2 * 1.5 + 3 * 1.0


def test_a_hyphenated_compound_is_a_term_with_marked_parts() -> None:
    assert recall_terms("Blue-green deploys") == ["blue-green", "~blue", "~green", "deploy"]
    force_push = [f"{stem('force')}-push", f"~{stem('force')}", "~push"]
    assert recall_terms("never force-pushed, only force-push") == force_push + force_push
    assert recall_terms("two-space indent") == ["two-spac", "~spac", "indent"]
    assert recall_terms("the on-call rotation") == ["on-call", "~call", "rotation"]


def test_compound_parts_fold_and_stem_like_words() -> None:
    assert (
        compound_terms("après-midi")
        == compound_terms("apres-midi")
        == [
            "apre-midi",
            "~apre",
            "~midi",
        ]
    )
    assert recall_terms("Blue‐green") == recall_terms("blue-green")  # U+2010 HYPHEN


@pytest.mark.parametrize(
    ("text", "plain"),
    [
        ("sprint 2026-03-05", ["sprint", "2026"]),  # a date is not a compound
        ("pytest --lf -x", ["pytest"]),  # options, not compounds
        ("logs payments-*", ["log", "payment"]),
        ("部署-流程 ok", ["部署", "流程"]),  # CJK pieces
        ("a - b and c-", []),
    ],
)
def test_other_hyphens_give_plain_terms(text: str, plain: list[str]) -> None:
    assert recall_terms(text) == terms(text) == plain


def test_a_compound_of_function_words_gives_nothing() -> None:
    assert recall_terms("Peux-tu le faire pour moi ?") == []
    assert recall_terms("Explique-moi Redis") == ["expliqu-moi", "~expliqu", "redis"]


def test_terms_keep_compound_parts_as_words_for_the_duplicate_check() -> None:
    assert terms("We deploy with the blue-green script") == terms("deploy blue green script")


def test_field_index_counts_compounds_but_not_in_the_length() -> None:
    counts, length = field_index(("Blue-green", "", "blue-green deploys"))
    assert counts["blue-green"] == 2.0 + 1.0
    assert counts["~green"] == 2.0 + 1.0
    assert "green" not in counts
    assert counts["~"] == 2.0 + 1.0  # how many compounds the memory has
    assert "~" not in field_index(("Green", "", "green deploys"))[0]
    assert length == 2 * 2.0 + 3 * 1.0


@given(st.text(max_size=200))
def test_recall_terms_are_terms_without_hyphens(text: str) -> None:
    found = recall_terms(text)
    assert all(found)
    if "-" not in text and "\u2010" not in text:
        assert found == terms(text)


@given(st.text(max_size=200))
def test_terms_never_fail_and_are_stable(text: str) -> None:
    found = terms(text)
    assert all(found)
    assert terms(text) == found
