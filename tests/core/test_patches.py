"""Patch normalisation (spec §7.6) and planning (spec §7.7); checklist items 33-36, 39-43."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qmem_git.core.codec import parse_document, render_document
from qmem_git.core.entries import parse_entries
from qmem_git.core.model import MEMORY_TYPES, Document, Entry
from qmem_git.core.patches import (
    Patch,
    PatchPlan,
    drop_secret_patches,
    is_temporal,
    normalize_patches,
    plan_patches,
    rejection_reason,
    size_problem,
    slugify,
    title_for,
)

NOW_MS = 1_780_000_000_000
GITHUB_PAT = "ghp_" + "a1B2c3D4e5" * 3 + "abcdef"


def plan(
    docs: dict[str, str], patches: list[Patch], taken: frozenset[str] = frozenset()
) -> PatchPlan:
    """Plan over in-memory files: ``docs`` maps relative path -> text (scan order = dict order)."""
    parsed = [parse_document(text, rel, 1000.0 - i) for i, (rel, text) in enumerate(docs.items())]
    return plan_patches(
        [d for d in parsed if d is not None],
        patches,
        read_text=docs.__getitem__,
        path_taken=lambda rel: rel in taken or rel in docs,
        now_ms=NOW_MS,
    )


def memory_file(summary: str, kind: str = "user", body: str | None = None) -> str:
    return render_document(summary, summary, kind, body if body is not None else summary)  # type: ignore[arg-type]


# --- is_temporal -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "I am fixing this today",
        "Do it NOW please",
        "Currently migrating the API",
        "only for this task we skip lint",
        "in this session use bash",
        "a temporary workaround",
        "temporarily pinned",
        "stop right now",
        "For   this\ttask only",
    ],
)
def test_temporal_words_match(text: str) -> None:
    assert is_temporal(text)


@pytest.mark.parametrize(
    "text",
    ["The user never works nowhere near prod", "todays build", "knowledge base", "currentlyx", ""],
)
def test_temporal_needs_word_boundaries(text: str) -> None:
    assert not is_temporal(text)


# --- normalize_patches -------------------------------------------------------------------------


def test_bullet_marker_and_whitespace_are_normalised() -> None:  # checklist 33
    [patch] = normalize_patches([Patch("user", "- User prefers   terse responses.")])
    assert patch.summary == "User prefers terse responses."
    [star] = normalize_patches([Patch("user", "*  Star bullet summary here")])
    assert star.summary == "Star bullet summary here"


def test_short_question_and_temporal_summaries_are_dropped() -> None:  # checklist 34
    patches = [
        Patch("user", "Too short"),
        Patch("project", "Should we use pnpm here?"),
        Patch("project", "Currently migrating the API"),
    ]
    assert normalize_patches(patches) == []


def test_temporal_filter_uses_whole_words() -> None:  # checklist 35
    kept = normalize_patches(
        [
            Patch("user", "The user never works nowhere near prod"),
            Patch("user", "I am fixing this today"),
        ]
    )
    assert [p.summary for p in kept] == ["The user never works nowhere near prod"]


def test_dedupe_is_per_topic_and_case_insensitive() -> None:  # checklist 36
    kept = normalize_patches(
        [
            Patch("user", "Use pnpm for installs", why="first"),
            Patch("user", "USE PNPM FOR INSTALLS", why="second"),
            Patch("project", "Use pnpm for installs"),
        ]
    )
    assert [(p.topic, p.why) for p in kept] == [("user", "first"), ("project", None)]


def test_details_are_normalised_and_empty_details_dropped() -> None:
    [patch] = normalize_patches(
        [
            Patch(
                "feedback",
                "Prefer small pull requests",
                why="  Easier\n review ",
                how_to_apply="  ",
            )
        ]
    )
    assert patch.why == "Easier review"
    assert patch.how_to_apply is None


def test_control_characters_never_reach_a_memory() -> None:
    patch = Patch("user", "We use \x1b[31mred\x1b[0m builds\x00 and \ud83d tools", why="a\x07b")
    (cleaned,) = normalize_patches([patch])
    assert cleaned.summary == "We use red builds and \ufffd tools"  # escapes go whole
    assert cleaned.why == "ab"


@pytest.mark.parametrize(
    "summary",
    ["<<<<<<< HEAD we merge often", ">>>>>>> main branch wins here", "||||||| base of the merge"],
)
def test_a_summary_that_reads_as_a_conflict_marker_is_dropped(summary: str) -> None:
    assert rejection_reason(summary) == "it reads as a git conflict marker"
    assert normalize_patches([Patch("user", summary)]) == []
    assert normalize_patches([Patch("user", "- " + summary)]) == []  # bullets are stripped first


def test_a_fact_longer_than_16k_characters_is_dropped() -> None:
    fits = Patch("user", "We deploy with helm " + "x" * 16_000)
    too_long = Patch("project", "We deploy with helm", why="y" * 16_384)
    assert size_problem(fits) is None
    assert size_problem(too_long) == "too long (16,403 characters, at most 16,384)"
    assert normalize_patches([fits, too_long]) == [fits]


def test_a_merge_that_would_pass_256_kib_leaves_that_file_and_plans_the_rest() -> None:
    """One fact must not fail a whole extraction (and every Stop hook after it)."""
    filler = "".join(f"- Filler fact number {n} " + "x" * 180 + "\n" for n in range(1268))
    big = memory_file("Big store fact", body="Big store fact\n" + filler)
    assert 255 * 1024 < len(big.encode()) < 256 * 1024
    result = plan(
        {"user/big.md": big},
        [Patch("user", "Big store fact", why="w" * 2_000), Patch("user", "Another durable fact")],
    )
    assert list(result.writes) == ["user/another-durable-fact.md"]


def test_unknown_topic_is_dropped() -> None:
    assert normalize_patches([Patch("misc", "A perfectly durable fact")]) == []  # type: ignore[arg-type]


def test_source_offset_is_kept() -> None:
    [patch] = normalize_patches([Patch("user", "I prefer terse responses.", source_offset=7)])
    assert patch.source_offset == 7


_pieces = st.sampled_from([*"ab -*?\t\nxyz.", "now", "today", "- ", "* ", "\u00a0", "Ab"])
_summaries = st.lists(_pieces, max_size=30).map("".join) | st.text(max_size=30)
_patches = st.lists(
    st.builds(
        Patch,
        topic=st.sampled_from(MEMORY_TYPES),
        summary=_summaries,
        why=st.none() | st.text(max_size=20),
        how_to_apply=st.none() | st.text(max_size=20),
    ),
    max_size=8,
)


@given(_patches)
def test_normalize_patches_is_idempotent(patches: list[Patch]) -> None:
    once = normalize_patches(patches)
    assert normalize_patches(once) == once


# --- slug and title ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("summary", "slug"),
    [
        ("User prefers terse responses.", "user-prefers-terse-responses"),
        ("  --Hello, World!--  ", "hello-world"),
        ("日本語だけ", "memory"),
        ("", "memory"),
        ("Ünïcode café v2.0", "n-code-caf-v2-0"),
    ],
)
def test_slugify(summary: str, slug: str) -> None:
    assert slugify(summary) == slug


def test_slug_is_cut_at_80_and_may_keep_a_trailing_dash() -> None:
    summary = "a" * 79 + " b"
    assert slugify(summary) == "a" * 79 + "-"
    assert len(slugify("word " * 40)) == 80


def test_title_keeps_72_chars_and_shortens_longer() -> None:  # checklist 41
    assert title_for("x" * 72) == "x" * 72
    summary = "word " * 20  # 100 chars
    assert title_for(summary) == summary[:69].rstrip() + "..."
    assert title_for("a" * 68 + " " + "b" * 40) == "a" * 68 + "..."


# --- plan_patches ------------------------------------------------------------------------------


def test_new_memory_on_empty_store() -> None:  # checklist 39
    patch = Patch(
        "user",
        "User prefers terse responses.",
        why="They explicitly asked for concise replies.",
        how_to_apply="Lead with a short answer before details.",
    )
    result = plan({}, [patch])
    rel = "user/user-prefers-terse-responses.md"
    assert result.writes == {
        rel: "---\nname: User prefers terse responses.\n"
        "description: User prefers terse responses.\ntype: user\n---\n\n"
        "User prefers terse responses.\n\n"
        "Why: They explicitly asked for concise replies.\n\n"
        "How to apply: Lead with a short answer before details.\n"
    }
    assert result.touched_topics == ["user"]
    assert result.created == [rel]
    assert result.updated == []


def test_taken_slug_gets_numbered_suffix() -> None:  # checklist 40
    docs = {"user/use-pnpm-for-installs.md": memory_file("Something else entirely")}
    result = plan(docs, [Patch("user", "Use pnpm for installs")])
    assert result.created == ["user/use-pnpm-for-installs-2.md"]


def test_a_slug_taken_under_other_capitals_counts_as_taken() -> None:
    docs = {"user/Use-Pnpm-For-Installs.md": memory_file("Something else entirely")}
    result = plan(docs, [Patch("user", "Use pnpm for installs")])
    assert result.created == ["user/use-pnpm-for-installs-2.md"]


def test_path_taken_by_unscanned_file_counts() -> None:
    taken = frozenset({"user/use-pnpm-for-installs.md", "user/use-pnpm-for-installs-2.md"})
    result = plan({}, [Patch("user", "Use pnpm for installs")], taken)
    assert result.created == ["user/use-pnpm-for-installs-3.md"]


def test_names_unsafe_on_windows_are_skipped() -> None:
    result = plan({}, [Patch("user", "CON !!! ??? ... ,,,")])
    assert result.created == ["user/con-2.md"]


def test_after_100_suffixes_the_epoch_ms_is_used() -> None:
    # two different facts whose slugs agree in the first 80 characters
    head = "Use pnpm for installs in every package of the monorepo workspace and each service"
    slug = slugify(head)
    assert len(slug) >= 80
    taken = frozenset({f"user/{slug}.md"}) | {f"user/{slug}-{n}.md" for n in range(2, 101)}
    patches = [
        Patch("user", f"{head} folders because lockfiles differ between managers"),
        Patch("user", f"{head} except docs, which still builds with yarn and webpack"),
    ]
    result = plan({}, patches, taken)
    assert result.created == [f"user/{slug}-{NOW_MS}.md", f"user/{slug}-{NOW_MS + 1}.md"]


def test_long_summary_title() -> None:  # checklist 41
    summary = ("Remember the deployment checklist " * 4)[:100]
    [text] = plan({}, [Patch("project", summary)]).writes.values()
    assert f"name: {summary[:69].rstrip()}...\n" in text
    assert f"description: {summary}\n" in text


def test_same_patch_twice_in_one_plan_writes_once() -> None:  # checklist 42 (in-plan)
    patch = Patch("user", "User prefers terse responses.", why="Asked for it.")
    result = plan({}, [patch, patch])
    assert len(result.writes) == 1
    assert result.touched_topics == ["user"]


def test_applying_an_existing_memory_again_does_nothing() -> None:  # checklist 42
    patch = Patch("user", "User prefers terse responses.", why="Asked for it.")
    first = plan({}, [patch])
    second = plan(dict(first.writes), [patch])
    assert second == PatchPlan()


def test_merge_fills_a_missing_why() -> None:  # checklist 43
    rel = "user/terse.md"
    docs = {
        rel: memory_file("User prefers terse responses.", body="\nUser prefers terse responses.\n")
    }
    result = plan(docs, [Patch("user", "user prefers TERSE responses.", why="Asked twice.")])
    assert result.touched_topics == ["user"]
    assert result.updated == [rel]
    assert result.writes[rel] == (
        "---\nname: User prefers terse responses.\ndescription: User prefers terse responses.\n"
        "type: user\n---\n\n\nuser prefers TERSE responses.\n\nWhy: Asked twice.\n\n"
    )  # only the body changes; the whitespace around it is kept (spec §4.4)


def test_merge_never_overwrites_existing_details() -> None:
    rel = "feedback/pr.md"
    docs = {
        rel: memory_file(
            "Prefer small PRs please", "feedback", "Prefer small PRs please\n\nWhy: Old."
        )
    }
    result = plan(docs, [Patch("feedback", "Prefer small PRs please", why="New.")])
    assert result == PatchPlan()


def test_merge_keeps_other_entries_and_frontmatter() -> None:
    rel = "project.md"
    text = (
        "---\ntype: project\ntitle: Project Memory\nextra: kept\n---\n\n# Project Memory\n\n"
        "- Release freeze starts Friday\n- Deploys go through the release train\n"
    )
    result = plan(
        {rel: text}, [Patch("project", "Release freeze starts Friday", how_to_apply="No merges.")]
    )
    assert result.writes[rel] == (
        "---\ntype: project\ntitle: Project Memory\nextra: kept\n---\n\n"
        "Release freeze starts Friday\n\nHow to apply: No merges.\n\n"
        "Deploys go through the release train\n"
    )


def test_target_must_have_the_same_type_and_be_the_first_entry() -> None:
    docs = {
        "feedback/a.md": memory_file("Use pnpm for installs", "feedback"),
        "user/b.md": memory_file("Other", "user", "Other fact here\n\nUse pnpm for installs"),
    }
    result = plan(docs, [Patch("user", "Use pnpm for installs", why="Lockfile.")])
    assert result.created == ["user/use-pnpm-for-installs.md"]


def test_first_scanned_document_is_the_target() -> None:
    docs = {
        "user/newer.md": memory_file("Use pnpm for installs"),
        "user/older.md": memory_file("Use pnpm for installs"),
    }
    result = plan(docs, [Patch("user", "Use pnpm for installs", why="Lockfile.")])
    assert list(result.writes) == ["user/newer.md"]


def test_second_patch_merges_into_file_created_by_the_first() -> None:
    patches = [
        Patch("user", "Use pnpm for installs"),
        Patch("user", "use pnpm for installs", why="Lock."),
    ]
    result = plan({}, patches)
    [(rel, text)] = result.writes.items()
    assert result.created == [rel] and result.updated == []
    assert text.endswith("\n\nuse pnpm for installs\n\nWhy: Lock.\n")


def test_touched_topics_keep_first_touch_order() -> None:
    patches = [
        Patch("reference", "The dashboard is at grafana"),
        Patch("user", "I prefer terse responses."),
        Patch("reference", "The runbook lives in the wiki"),
    ]
    assert plan({}, patches).touched_topics == ["reference", "user"]


def test_unreadable_target_is_left_alone() -> None:
    docs = [Document("user", "user/x.md", "x", "", "Use pnpm for installs", 1.0)]
    result = plan_patches(
        docs,
        [Patch("user", "Use pnpm for installs", why="Lock.")],
        read_text=lambda rel: "",
        path_taken=lambda rel: False,
        now_ms=NOW_MS,
    )
    assert result == PatchPlan()


_words = st.sampled_from(
    ["use", "pnpm", "for", "installs", "Deploy", "always", "the", "API", "v2.0"]
)
_summary = st.lists(_words, min_size=3, max_size=8).map(" ".join)
_plain = st.builds(
    Patch,
    topic=st.sampled_from(MEMORY_TYPES),
    summary=_summary,
    why=st.none() | _summary,
    how_to_apply=st.none() | _summary,
)


@given(st.lists(_plain, min_size=1, max_size=6))
def test_replaying_a_plan_writes_nothing(patches: list[Patch]) -> None:
    patches = normalize_patches(patches)
    first = plan({}, patches)
    assert plan(dict(first.writes), patches) == PatchPlan()
    for text in first.writes.values():
        doc = parse_document(text, "x/y.md", 0.0)
        assert doc is not None and parse_entries(doc.body)


# --- secrets -----------------------------------------------------------------------------------


def test_patches_with_secrets_are_dropped_by_rule_id() -> None:
    patches = [
        Patch("reference", "Deploy token is " + GITHUB_PAT),
        Patch("reference", "Clean durable fact here", why="key AKIAIOSFODNN7EXAMPLE"),
        Patch("user", "I prefer terse responses."),
    ]
    kept, dropped = drop_secret_patches(patches)
    assert [p.summary for p in kept] == ["I prefer terse responses."]
    assert dropped == ["github-pat", "aws-access-token"]


# --- what we write is what validate accepts ---------------------------------------------------

_SUMMARY_CHARS = st.sampled_from("abcXYZ019 :-#&*!?|>%@`'\",.()[]{}/\\_~")


@settings(max_examples=400)
@given(st.text(_SUMMARY_CHARS, min_size=12, max_size=90))
def test_a_new_memory_file_never_has_validate_errors(text: str) -> None:
    """Summaries go into ``name:``/``description:`` verbatim (spec §7.7): YAML syntax problems
    may be warnings, but a tag, an anchor or a broken reader never makes the file an error."""
    from qmem_git.core.validate import check_memory_file, has_errors

    summaries = normalize_patches([Patch(topic="user", summary=text)])
    if not summaries:
        return  # filtered out (too short, temporal, ...)
    result = plan({}, summaries)
    for rel, written in result.writes.items():
        findings = check_memory_file(rel, written.encode())
        assert not has_errors(findings), (written, findings)


@pytest.mark.parametrize(
    ("stored", "incoming", "same"),
    [
        ("Bugs go in the PAY project in Jira.", "bugs go into the PAY project in Jira", True),
        ("I prefer short answers without a recap.", "I prefer short answers with no recap", True),
        ("We deploy with deploy/bg.sh.", "We deployed with deploy/bg.sh", True),
        ("The billing service listens on port 4027", "The billing service listens on 4036", False),
        ("Our staging cluster is called kiwi", "Our staging cluster is called mango", False),
        ("Every release needs sign-off 12", "Every release needs sign-off 23", False),
        ("The v1 API is frozen", "The v2 API is frozen", False),
        ("Use pnpm", "Use pnpm for scripts too", False),
    ],
)
def test_near_duplicates_have_the_same_content_words(
    stored: str, incoming: str, same: bool
) -> None:
    from qmem_git.core.patches import fact_terms, near_duplicate

    assert near_duplicate(fact_terms(Entry(incoming)), Entry(stored)) is same


def test_a_restated_memory_is_updated_not_duplicated() -> None:
    stored = Document(
        "reference", "reference/jira.md", "Bug tracker", "", "Bugs go in Jira PAY.", 0
    )
    text = "---\nname: Bug tracker\ntype: reference\n---\n\nBugs go in Jira PAY.\n"
    texts = {"reference/jira.md": text}
    result = plan_patches(
        [stored],
        [Patch("reference", "bugs go into jira PAY", why="Finance reads it.")],
        read_text=texts.__getitem__,
        path_taken=lambda rel: False,
        now_ms=NOW_MS,
    )
    assert result.created == [] and result.updated == ["reference/jira.md"]
    assert "Bugs go in Jira PAY.\n\nWhy: Finance reads it." in result.writes["reference/jira.md"]
