"""Recall scoring, selection and the injected block (spec §10.3-10.5, checklist 60-72)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qmem_git.core.age import DAY_MS, age_days, age_text, freshness_text, saved_line
from qmem_git.core.model import MEMORY_TYPES, Document, MemoryType
from qmem_git.core.recall import (
    INSTRUCTION,
    RecallResult,
    query_terms,
    render_block,
    resolve_recall,
    score_documents,
    select_heuristic,
    shown_description,
)

NOW = 1_800_000_000_000


def doc(
    title: str,
    kind: MemoryType = "project",
    description: str = "",
    body: str = "Some body.",
    path: str | None = None,
    age_ms: float = 0,
) -> Document:
    rel = path or f"{kind}/{title.lower().replace(' ', '-')}.md"
    return Document(kind, rel, title, description, body, NOW - age_ms)


def titles(docs: Sequence[Document]) -> list[str]:
    return [d.title for d in docs]


# --- checklist 60: empty and token-less queries ---------------------------------------------


def test_blank_query_is_none() -> None:
    result = resolve_recall([doc("Deploy")], "   ", NOW)
    assert result == RecallResult("", [], "none", 1)


@pytest.mark.parametrize("query", ["go", "部", "배"])
def test_tokenless_queries_select_nothing(query: str) -> None:
    docs = [doc("go deploy 部署 배포", body="go 部 배")]
    assert select_heuristic(docs, query, 5) == []
    assert resolve_recall(docs, query, NOW).strategy == "none"


def test_no_docs_or_zero_limit_is_none() -> None:
    assert resolve_recall([], "deploy", NOW) == RecallResult("", [], "none", 0)
    assert resolve_recall([doc("Deploy")], "deploy", NOW, limit=0).strategy == "none"


# --- checklist 61-63: CJK, NFKC, mixed ----------------------------------------------------


def test_chinese_bigrams_select_the_title_doc_first() -> None:
    docs = [doc("其他"), doc("生产部署流程", path="project/deploy.md"), doc("部署")]
    assert titles(select_heuristic(docs, "生产部署", 5))[0] == "生产部署流程"


def test_fullwidth_query_matches_halfwidth_title_and_back() -> None:
    api = doc("Qwen API 限流", kind="reference")
    assert select_heuristic([api], "ＱＷＥＮ ＡＰＩ", 5) == [api]
    wide = doc("ＡＰＩ", kind="reference")
    assert select_heuristic([wide], "API", 5) == [wide]


def test_latin_then_han_selects_both() -> None:
    abc, han = doc("abc", path="project/abc.md"), doc("漢字", path="project/kanji.md")
    assert set(titles(select_heuristic([abc, han], "abc漢字", 5))) == {"abc", "漢字"}


# --- checklist 64-66: the lexical gate and type keywords ------------------------------------


def test_type_keyword_alone_is_not_a_hit() -> None:
    user = doc("Terse replies", kind="user", description="Keep it short", body="Short answers.")
    assert score_documents([user], "preference") == [0.0]
    assert select_heuristic([user], "preference", 5) == []


def test_type_keyword_breaks_a_tie() -> None:
    project = doc("Cadence summary", kind="project", path="project/cadence.md")
    user = doc("Cadence summary", kind="user", path="user/cadence.md")
    assert select_heuristic([project, user], "cadence preference", 5) == [user, project]


def test_unrelated_words_select_nothing() -> None:
    docs = [doc(f"Release {i}", body="Deploy notes") for i in range(5)]
    assert resolve_recall(docs, "weather forecast tomorrow", NOW) == RecallResult("", [], "none", 5)


def test_words_match_whole_not_inside_other_words() -> None:
    # the seed's substring rule let "own" hit "ownership" and "the" hit "other"
    owner = doc("Team ownership", body="Escalate storage issues to the platform team.")
    other = doc("Other notes", body="Nothing here.")
    assert score_documents([owner, other], "own the") == [0.0, 0.0]
    assert score_documents([owner], "ownership")[0] > 0


def test_word_forms_and_accents_match() -> None:
    d = doc("Deployments", body="Ne jamais déployer le vendredi.")
    docs = [d, doc("Other", body="Nothing to see.")]
    assert select_heuristic(docs, "deploying", 5) == [d]
    assert select_heuristic(docs, "deployer vendredi", 5) == [d]


def test_stop_words_and_generic_words_alone_select_nothing() -> None:
    docs = [doc("Use pnpm", body="Use pnpm instead of npm to add packages.")]
    assert select_heuristic(docs, "what should we do with this one?", 5) == []
    assert select_heuristic(docs, "use a dataclass instead", 5) == []  # generic words only
    assert select_heuristic(docs, "add pnpm", 5) == docs


BLUE_GREEN = doc(
    "Blue-green deploys",
    description="We deploy with the blue-green script deploy/bg.sh",
    body="We deploy with the blue-green script deploy/bg.sh.",
)
FORCE_PUSH = doc("Never force-push to main", kind="feedback", body="CI deploys from main.")
SPACE = doc("Decision records", kind="reference", body="ADRs live in the Notion space 'ADR'.")
COMPOUND_DOCS = [BLUE_GREEN, FORCE_PUSH, SPACE]


@pytest.mark.parametrize(
    "query",
    ["the tests are green now, thanks!", "make the button green", "move it to the blue column"],
)
def test_a_word_does_not_find_a_compound_that_contains_it(query: str) -> None:
    assert select_heuristic(COMPOUND_DOCS, query, 5) == []


@pytest.mark.parametrize(
    "query",
    [
        "blue-green deploys",
        "how do blue-green deployments work here?",
        "is the blue green switch done?",  # an open compound finds the hyphenated one
        "Blue\u2010green",
    ],
)
def test_a_compound_finds_its_memory_hyphenated_or_not(query: str) -> None:
    assert select_heuristic(COMPOUND_DOCS, query, 5) == [BLUE_GREEN]


@pytest.mark.parametrize(
    "query", ["let's squash and force-push", "can I force push?", "I force-pushed by mistake"]
)
def test_force_push_in_any_spelling_finds_the_rule(query: str) -> None:
    assert select_heuristic(COMPOUND_DOCS, query, 5) == [FORCE_PUSH]


def test_a_part_of_a_query_compound_does_not_find_the_lone_word() -> None:
    assert select_heuristic(COMPOUND_DOCS, "format the JSON with two-space indentation", 5) == []
    assert select_heuristic(COMPOUND_DOCS, "which Notion space has the ADRs?", 5) == [SPACE]


def test_a_hyphenated_query_finds_the_compound_written_open() -> None:
    stack = doc("Local stack in Docker Compose", body="make up starts postgres and redis.")
    docker = doc("Docker images", body="Images are built in CI.", path="project/images.md")
    docs = [stack, docker, *COMPOUND_DOCS]
    assert select_heuristic(docs, "docker-compose up fails", 5)[0] is stack
    assert select_heuristic(docs, "compose-docker", 5) == [stack]  # both parts, any order
    assert select_heuristic(docs, "the push-button is broken", 5) == []  # one part is not enough


def test_a_long_query_keeps_a_bounded_number_of_compounds() -> None:
    query = " ".join(f"alpha{i}-beta{i} gamma{i}" for i in range(2_000))
    wanted = query_terms(query)
    assert len([key for key in wanted if "-" in key]) == 64
    assert len(wanted) <= 3 * 64


def test_a_compound_part_still_adds_to_a_topical_match() -> None:
    deploy_only = doc("Deploy notes", body="We deploy on Tuesdays.", path="project/n.md")
    scores = score_documents([BLUE_GREEN, deploy_only, SPACE], "deploy the green build")
    assert scores[0] > scores[1] > 0 == scores[2]


def test_title_outranks_body_and_rarer_words_weigh_more() -> None:
    title = doc("Canary rollout", path="project/a.md", body="Steps.")
    body = doc("Steps", path="project/b.md", body="The canary rollout steps.")
    assert select_heuristic([body, title], "canary rollout", 5)[0] is title
    common = [doc(f"Deploy {i}", path=f"project/d{i}.md", body="deploy") for i in range(6)]
    rare = doc("Rollback", path="project/r.md", body="rollback deploy")
    assert select_heuristic([*common, rare], "deploy rollback", 5)[0] is rare


def test_placeholder_body_is_not_searched() -> None:
    empty = doc("Release", body="_No entries yet._")
    assert score_documents([empty], "entries") == [0.0]
    assert score_documents([empty], "release")[0] > 0


def test_weak_matches_next_to_a_strong_one_are_left_out() -> None:
    strong = doc("Grafana latency dashboard", path="reference/g.md", body="Checkout p99 latency.")
    weak = doc("Checkout", path="project/c.md", body="Checkout service notes.")
    assert select_heuristic([weak, strong], "grafana latency dashboard checkout", 5) == [strong]


def test_only_the_first_1200_body_chars_are_scored() -> None:
    d = doc("Notes", body="x" * 1_200 + " needle")
    assert score_documents([d], "needle") == [0.0]
    assert score_documents([doc("Notes", body="x" * 1_150 + " needle")], "needle")[0] > 0


# --- checklist 67-68: limit and ordering ---------------------------------------------------


def test_at_most_five_of_eight_matches() -> None:
    docs = [doc(f"Deploy {i}", path=f"project/d{i}.md") for i in range(8)]
    result = resolve_recall(docs, "deploy", NOW)
    assert len(result.selected) == 5
    assert result.selected == docs[:5]  # equal scores and types keep scan order


def test_ties_break_by_type_name_then_scan_order() -> None:
    p1 = doc("Deploy", kind="project", path="project/a.md")
    f1 = doc("Deploy", kind="feedback", path="feedback/b.md")
    p2 = doc("Deploy", kind="project", path="project/c.md")
    r1 = doc("Deploy", kind="reference", path="reference/d.md")
    assert select_heuristic([p1, r1, f1, p2], "deploy", 5) == [f1, p1, p2, r1]


def test_higher_score_wins_over_type_and_order() -> None:
    weak = doc("Deploy", kind="feedback", path="feedback/a.md")
    strong = doc("Deploy checklist", kind="user", path="user/b.md")
    assert select_heuristic([weak, strong], "deploy checklist", 5) == [strong, weak]


# --- checklist 69-70: block format, truncation, age -----------------------------------------


def test_block_matches_the_spec_example() -> None:
    d = Document(
        "reference",
        "reference/latency-dashboard.md",
        "Latency Dashboard",
        "Oncall latency board",
        "grafana.internal/d/api-latency",
        NOW - 3 * DAY_MS,
    )
    assert render_block([d], NOW) == (
        "## Relevant memory\n"
        "\n"
        f"{INSTRUCTION}\n"
        "\n"
        "### Latency Dashboard (reference/latency-dashboard.md)\n"
        "Saved 3 days ago.\n"
        "Oncall latency board\n"
        "\n"
        "grafana.internal/d/api-latency\n"
        "\n"
        "> NOTE: This memory is 3 days old. Memories are point-in-time observations, not live "
        "state — claims about code behavior or file:line citations may be outdated. Verify "
        "against current code before asserting as fact.\n"
    )
    assert INSTRUCTION == (
        "Use the following memories only when they are directly relevant to the current "
        "request. Verify file/function claims before relying on them."
    )


def test_block_with_two_docs_empty_description_and_body() -> None:
    a = doc("Alpha", description="", body="", path="project/alpha.md")
    b = doc("Beta", description="Second", body="_No entries yet._", path="user/beta.md")
    assert render_block([a, b], NOW) == (
        f"## Relevant memory\n\n{INSTRUCTION}\n\n"
        "### Alpha (project/alpha.md)\nSaved today.\n\n\n_No detailed entries yet._\n\n"
        "### Beta (user/beta.md)\nSaved today.\nSecond\n\n_No detailed entries yet._\n"
    )


def test_long_body_is_cut_at_1200_chars() -> None:
    body = "a" * 1_199 + " " + "b" * 300
    block = render_block([doc("Long", body=body)], NOW)
    expected = "a" * 1_199 + "\n\n> NOTE: Relevant memory truncated for prompt budget.\n"
    assert block.endswith(expected)
    exact = render_block([doc("Long", body="c" * 1_500)], NOW)
    assert ("c" * 1_200 + "\n\n> NOTE: Relevant memory truncated") in exact
    assert "c" * 1_201 not in exact
    assert "> NOTE: Relevant memory truncated" not in render_block(
        [doc("Ok", body="d" * 1_200)], NOW
    )


@pytest.mark.parametrize(
    ("age_ms", "saved", "note"),
    [
        (0, "Saved today.", False),
        (DAY_MS - 1, "Saved today.", False),
        (DAY_MS, "Saved yesterday.", False),
        (2 * DAY_MS - 1, "Saved yesterday.", False),
        (2 * DAY_MS, "Saved 2 days ago.", True),
        (3 * DAY_MS + 5, "Saved 3 days ago.", True),
        (-5 * DAY_MS, "Saved today.", False),  # a future mtime reads as today
    ],
)
def test_age_lines(age_ms: int, saved: str, note: bool) -> None:
    block = render_block([doc("Aged", age_ms=age_ms)], NOW)
    assert f"\n{saved}\n" in block
    assert ("\n\n> NOTE: This memory is " in block) is note


def test_age_helpers() -> None:
    assert age_days(NOW - 3 * DAY_MS, NOW) == 3
    assert age_days(NOW + 10, NOW) == 0
    assert [age_text(n) for n in (0, 1, 2, 40)] == [
        "today",
        "yesterday",
        "2 days ago",
        "40 days ago",
    ]
    assert saved_line(NOW - DAY_MS, NOW) == "Saved yesterday."
    assert freshness_text(1) == ""
    assert freshness_text(3).startswith("This memory is 3 days old. Memories are point-in-time")


def test_a_short_memory_is_not_printed_three_times() -> None:
    short = doc("Bugs go in Jira", description="Bugs go in Jira.", body="Bugs go in Jira.")
    block = render_block([short], NOW)
    assert block.count("Bugs go in Jira") == 2  # the heading and the body
    lines = block.splitlines()
    assert lines[lines.index("Saved today.") + 1] == ""  # the description line stays, empty


FORCE = "No force-push to main because CI deploys from it"


@pytest.mark.parametrize(
    ("title", "description", "body", "shown"),
    [
        ("Deploys", "We deploy with bg.sh", "We deploy with bg.sh.\n\nWhy: health checks.", ""),
        ("Deploys", "deploys.", "Other text.", ""),
        ("No force-push", FORCE, "Why: CI.", FORCE),
        ("No force-push", FORCE, "No force-push to main.\n\nWhy: CI deploys from it.", ""),
        ("Deploys", "Blue-green via bg.sh", "We deploy with bg.sh.", "Blue-green via bg.sh"),
        ("Deploys", "", "Body.", ""),
        ("Deploys", "the", "Body.", ""),
    ],
)  # fmt: skip
def test_shown_description(title: str, description: str, body: str, shown: str) -> None:
    assert shown_description(title, description, body) == shown


def test_render_block_of_nothing_is_empty() -> None:
    assert render_block([], NOW) == ""


# --- checklist 71: selector -----------------------------------------------------------------


def test_selector_docs_win_in_answer_order_and_are_cut_to_limit() -> None:
    docs = [doc(f"Deploy {i}", path=f"project/d{i}.md") for i in range(8)]
    result = resolve_recall(docs, "deploy", NOW, limit=3, selector=lambda ds, q, n: ds[::-1])
    assert result.strategy == "model"
    assert result.selected == docs[::-1][:3]
    assert result.prompt == render_block(docs[::-1][:3], NOW)


def test_selector_returning_nothing_means_none_without_fallback() -> None:
    result = resolve_recall([doc("Deploy")], "deploy", NOW, selector=lambda ds, q, n: [])
    assert result == RecallResult("", [], "none", 1)


def test_selector_raising_falls_back_to_heuristic() -> None:
    def broken(docs: list[Document], query: str, limit: int) -> list[Document]:
        raise TimeoutError("model timed out")

    d = doc("Deploy")
    result = resolve_recall([d], "deploy", NOW, selector=broken)
    assert result.strategy == "heuristic"
    assert result.selected == [d]


def test_selector_sees_candidates_after_exclusion() -> None:
    seen: list[list[str]] = []

    def spy(docs: list[Document], query: str, limit: int) -> list[Document]:
        seen.append([d.relative_path for d in docs])
        return docs[:1]

    docs = [doc("A", path="project/a.md"), doc("B", path="project/b.md")]
    resolve_recall(docs, "anything", NOW, excluded=["project/a.md"], selector=spy)
    assert seen == [["project/b.md"]]


# --- checklist 72: exclusions ---------------------------------------------------------------


def test_excluded_paths_are_never_selected_nor_counted() -> None:
    docs = [doc(f"Deploy {i}", path=f"project/d{i}.md") for i in range(3)]
    result = resolve_recall(docs, "deploy", NOW, excluded=["project/d0.md"])
    assert result.docs_scanned == 2
    assert [d.relative_path for d in result.selected] == ["project/d1.md", "project/d2.md"]


# --- result object ---------------------------------------------------------------------------


def test_result_equality_and_repr() -> None:
    d = doc("Deploy")
    result = resolve_recall([d], "deploy", NOW)
    assert result == RecallResult(render_block([d], NOW), [d], "heuristic", 1)
    assert result != RecallResult("", [], "none", 1)
    assert result != "heuristic"
    assert "project/deploy.md" in repr(result)


# --- properties -------------------------------------------------------------------------------

words = st.sampled_from(
    ["deploy", "release", "grafana", "部署", "生产", "배포", "リリース", "style", "user", "owner"]
)
docs_strategy = st.lists(
    st.builds(
        lambda title, kind, body, i: doc(title, kind=kind, body=body, path=f"{kind}/{i}.md"),
        st.lists(words, min_size=1, max_size=3).map(" ".join),
        st.sampled_from(MEMORY_TYPES),
        st.lists(words, max_size=4).map(" ".join),
        st.integers(0, 10_000),
    ),
    max_size=12,
    unique_by=lambda d: d.relative_path,
)


@given(docs_strategy, st.lists(words, max_size=4).map(" ".join), st.integers(0, 7))
def test_selection_properties(docs: list[Document], query: str, limit: int) -> None:
    result = resolve_recall(docs, query, NOW, limit=limit)
    assert len(result.selected) <= max(limit, 0)
    assert len(result.selected) <= 5 or limit > 5
    assert result.strategy == ("heuristic" if result.selected else "none")
    scores = dict(zip((d.relative_path for d in docs), score_documents(docs, query), strict=True))
    for chosen in result.selected:
        assert scores[chosen.relative_path] > 0
    if result.prompt:
        assert result.prompt.endswith("\n") and not result.prompt.endswith("\n\n")
        assert result.prompt.count("\n### ") == len(result.selected)
    else:
        assert result.selected == []


@given(docs_strategy, st.text(max_size=40))
def test_arbitrary_queries_never_exceed_the_limit(docs: list[Document], query: str) -> None:
    assert len(resolve_recall(docs, query, NOW).selected) <= 5
