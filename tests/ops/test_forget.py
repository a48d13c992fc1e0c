"""Forget over real files: selection by query or id, the ChangeSet and its subject (§11)."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

import pytest

from qmem_git.core.forget import ForgetPlan, UnknownMemoryId
from qmem_git.errors import UsageError
from qmem_git.ops.forget import forget_changeset, list_forget_candidates, plan_forget_op

NOW = datetime(2026, 4, 3, 10, 0, tzinfo=timezone.utc)
PREFS_FM = "name: Preferences\ndescription: How the user likes replies\ntype: user"


def put(root: Path, rel: str, text: str, mtime_s: float) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (mtime_s, mtime_s))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    memory = tmp_path / "memory"
    put(
        memory,
        "user/prefs.md",
        f"---\n{PREFS_FM}\n---\n\nTerse replies\n\nWhy: asked twice\n\nUse tabs\n\nDark theme\n",
        3000,
    )
    put(
        memory,
        "project/freeze.md",
        "---\nname: Freeze\ndescription: d\ntype: project\n---\n\nRelease freeze Friday\n",
        2000,
    )
    put(
        memory,
        "feedback/no-summary.md",
        "---\nname: F\ndescription: d\ntype: feedback\n---\n\nKeep answers terse\n",
        1000,
    )
    return memory


def test_candidates_list_every_entry_with_its_id(root: Path) -> None:
    ids = [c.id for c in list_forget_candidates(str(root))]
    assert ids == [
        "user/prefs.md:0",
        "user/prefs.md:1",
        "user/prefs.md:2",
        "project/freeze.md",
        "feedback/no-summary.md",
    ]


def test_query_forgets_every_match_in_one_changeset(root: Path) -> None:  # checklist 75-77
    plan = plan_forget_op(str(root), query="  TERSE ", ids=(), now=NOW)
    assert [m.id for m in plan.matches] == ["user/prefs.md:0", "feedback/no-summary.md"]
    cs = plan.changeset
    assert cs is not None
    assert cs.op == "forget"
    assert cs.subject == 'forgot 2 entries matching "TERSE"'
    assert cs.writes == {
        "user/prefs.md": f"---\n{PREFS_FM}\n---\n\nUse tabs\n\nDark theme\n",
    }
    assert cs.deletes == ("feedback/no-summary.md",)
    assert (cs.topics, cs.removed) == (("user", "feedback"), 2)
    assert plan.removed_count == 2
    assert plan.system_message == "Managed auto-memory forgot 2 entries from: user/, feedback/"
    assert plan.meta_updates == {"updatedAt": "2026-04-03T10:00:00.000Z"}


def test_limit_caps_the_query_selection(root: Path) -> None:
    plan = plan_forget_op(str(root), query="terse", ids=(), now=NOW, limit=1)
    assert plan.removed_count == 1
    assert plan.system_message == "Managed auto-memory forgot 1 entry from: user/"


def test_ids_select_exact_entries(root: Path) -> None:
    plan = plan_forget_op(
        str(root), query=None, ids=["project/freeze.md"], now=NOW, session_id="s-1"
    )
    cs = plan.changeset
    assert cs is not None
    assert cs.subject == "forgot 1 entry by id"
    assert cs.deletes == ("project/freeze.md",)
    assert cs.session == "s-1"


def test_unknown_id_is_a_clear_error(root: Path) -> None:
    with pytest.raises(UnknownMemoryId) as caught:
        plan_forget_op(str(root), query=None, ids=["user/prefs.md"], now=NOW)
    assert "user/prefs.md:0" in caught.value.hint


def test_query_and_ids_together_are_a_usage_error(root: Path) -> None:
    with pytest.raises(UsageError):
        plan_forget_op(str(root), query="terse", ids=["project/freeze.md"], now=NOW)


@pytest.mark.parametrize("query", [None, "", "   ", "nothing like this"])
def test_no_match_plans_nothing(root: Path, query: str | None) -> None:
    plan = plan_forget_op(str(root), query=query, ids=(), now=NOW)
    assert plan.changeset is None
    assert plan.matches == ()
    assert plan.system_message is None
    assert plan.meta_updates == {}


def test_long_query_is_shortened_in_the_subject(tmp_path: Path) -> None:
    secretish = "x" * 200
    put(tmp_path, "user/a.md", f"---\ntype: user\n---\n\nToken {secretish}\n", 1000)
    plan = plan_forget_op(str(tmp_path), query=secretish, ids=(), now=NOW)
    assert plan.changeset is not None
    subject = plan.changeset.subject
    assert secretish not in subject
    assert subject.endswith('…"')
    assert len(subject) < 100


def test_files_on_disk_are_untouched_by_planning(root: Path) -> None:
    before = {p: p.read_text() for p in root.rglob("*.md")}
    plan_forget_op(str(root), query="terse", ids=(), now=NOW)
    assert {p: p.read_text() for p in root.rglob("*.md")} == before


def test_a_plan_that_changes_nothing_has_no_changeset() -> None:
    empty = ForgetPlan({}, [], 0, [], None, [])
    assert forget_changeset(empty, "forgot 0 entries", None) is None


def test_an_id_reaches_a_file_older_than_the_newest_200(tmp_path: Path) -> None:
    """The scan reads the newest 200 files (spec §5); --id names a file, wherever it is."""
    memory = tmp_path / "memory"
    for number in range(205):
        text = f"---\nname: m{number}\ndescription: d\ntype: user\n---\n\nFact number {number}\n"
        put(memory, f"user/m{number:03d}.md", text, 1_700_000_000 + number)
    assert "user/m000.md" not in {c.id for c in list_forget_candidates(str(memory))}
    plan = plan_forget_op(str(memory), query=None, ids=["user/m000.md"], now=NOW)
    assert plan.changeset is not None and plan.changeset.deletes == ("user/m000.md",)
    with pytest.raises(UnknownMemoryId):
        plan_forget_op(str(memory), query=None, ids=["user/../user/m000.md"], now=NOW)
    with pytest.raises(UnknownMemoryId):
        plan_forget_op(str(memory), query=None, ids=["user/none.md"], now=NOW)
