"""plan_remember: one user memory through §7.6 filtering and §7.7 naming/merging."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from qmem_git.core.changes import ChangeSet
from qmem_git.errors import SecretDetected, UsageError
from qmem_git.ops.remember import MemoryRejected, plan_remember

NOW = datetime(2026, 4, 2, 9, 0, tzinfo=timezone.utc)
GITHUB_PAT = "ghp_" + "a1B2c3D4e5" * 3 + "abcdef"


def write(root: Path, cs: ChangeSet) -> None:
    for rel, text in cs.writes.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


def test_remember_with_type_and_details(tmp_path: Path) -> None:
    cs = plan_remember(
        str(tmp_path),
        "  - User prefers   terse responses.",
        kind="user",
        why="They asked.",
        how=" Short answers first. ",
        now=NOW,
    )
    assert cs.op == "remember"
    assert cs.subject == "add User prefers terse responses. (user)"
    assert cs.topics == ("user",) and cs.added == 1 and cs.removed == 0
    assert cs.writes == {
        "user/user-prefers-terse-responses.md": "---\nname: User prefers terse responses.\n"
        "description: User prefers terse responses.\ntype: user\n---\n\n"
        "User prefers terse responses.\n\nWhy: They asked.\n\nHow to apply: Short answers first.\n"
    }


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("The latency dashboard is https://grafana.internal/d/x", "reference"),
        ("Always run the linter before pushing", "feedback"),
        ("The billing service is owned by team Kite", "project"),
        ("Alice is a senior Go engineer", "user"),  # no rule matches: falls back to user
        ("We deploy with the blue-green script deploy/bg.sh", "project"),  # issue 23
        ("I'm the tech lead for payments", "user"),
        ("Questions about the API go to #checkout-dev", "reference"),
    ],
)
def test_type_is_classified_when_not_given(tmp_path: Path, text: str, kind: str) -> None:
    cs = plan_remember(str(tmp_path), text, now=NOW)
    assert cs.topics == (kind,)
    [rel] = cs.writes
    assert rel.startswith(kind + "/")


def test_same_memory_twice_is_an_empty_changeset(tmp_path: Path) -> None:
    first = plan_remember(str(tmp_path), "Use pnpm for installs", kind="project", now=NOW)
    write(tmp_path, first)
    again = plan_remember(str(tmp_path), " - Use pnpm  for installs", kind="project", now=NOW)
    assert again.is_empty
    assert again.op == "remember"
    assert again.added == 0
    recased = plan_remember(str(tmp_path), "use PNPM for installs", kind="project", now=NOW)
    assert list(recased.writes) == ["project/use-pnpm-for-installs.md"]  # incoming summary wins


def test_adding_a_why_updates_the_existing_file(tmp_path: Path) -> None:
    write(tmp_path, plan_remember(str(tmp_path), "Use pnpm for installs", kind="project", now=NOW))
    cs = plan_remember(
        str(tmp_path), "Use pnpm for installs", kind="project", why="Lockfile.", now=NOW
    )
    assert cs.subject == "update Use pnpm for installs (project)"
    assert cs.added == 0
    assert cs.writes["project/use-pnpm-for-installs.md"].endswith(
        "Use pnpm for installs\n\nWhy: Lockfile.\n"
    )


def test_same_text_under_another_type_is_a_new_file(tmp_path: Path) -> None:
    write(tmp_path, plan_remember(str(tmp_path), "Use pnpm for installs", kind="project", now=NOW))
    cs = plan_remember(str(tmp_path), "Use pnpm for installs", kind="feedback", now=NOW)
    assert list(cs.writes) == ["feedback/use-pnpm-for-installs.md"]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Too short", "too short"),
        ("- short one", "too short"),
        ("Should we use pnpm here?", "question"),
        ("Currently migrating the API", "temporary"),
        ("Skip the e2e tests for this task", "temporary"),
    ],
)
def test_filtered_text_is_refused_with_the_reason(tmp_path: Path, text: str, reason: str) -> None:
    with pytest.raises(MemoryRejected, match=reason) as info:
        plan_remember(str(tmp_path), text, now=NOW)
    assert info.value.exit_code == 1
    assert info.value.hint


def test_secret_is_refused_and_not_echoed(tmp_path: Path) -> None:
    with pytest.raises(SecretDetected) as info:
        plan_remember(
            str(tmp_path), "The deploy bot uses a token", why=f"it is {GITHUB_PAT}", now=NOW
        )
    assert "github-pat" in str(info.value)
    assert GITHUB_PAT not in str(info.value)
    assert not any(tmp_path.iterdir())


def test_unknown_type_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="misc"):
        plan_remember(str(tmp_path), "Use pnpm for installs", kind="misc", now=NOW)
