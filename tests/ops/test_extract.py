"""plan_extract over real files (spec §7.2-§7.9); checklist items 39, 42, 44-47 end to end."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from qmem_git.core.codec import parse_document
from qmem_git.core.extract import Message, messages_from_history
from qmem_git.core.patches import Patch
from qmem_git.core.statefile import update_fields
from qmem_git.integrations.transcripts import Transcript, read_transcript
from qmem_git.ops.extract import ExtractPlan, plan_extract

NOW = datetime(2026, 4, 2, 9, 0, tzinfo=timezone.utc)
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "transcripts"
GITHUB_PAT = "ghp_" + "a1B2c3D4e5" * 3 + "abcdef"


def transcript(*texts: str, session: str | None = "session-1") -> Transcript:
    roles = ["user", "model"]
    return Transcript([Message(i, roles[i % 2], t) for i, t in enumerate(texts)], session)  # type: ignore[arg-type]


def apply(root: Path, result: ExtractPlan) -> None:
    """What the store does with the ChangeSet (minus git and MEMORY.md)."""
    assert result.changeset is not None
    for rel, text in result.changeset.writes.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


def test_extraction_creates_memories_in_one_changeset(tmp_path: Path) -> None:  # checklist 37, 39
    history = transcript(
        "I prefer terse responses.",
        "Sure.",
        "The latency dashboard is https://grafana.internal/d/api-latency",
    )
    result = plan_extract(str(tmp_path), history, "abc123", {}, NOW)
    cs = result.changeset
    assert cs is not None
    assert cs.op == "extract"
    assert cs.session == "abc123"
    assert cs.topics == ("user", "reference")
    assert (cs.added, cs.removed) == (2, 0)
    assert cs.subject == "2 memories from session abc123 (user, reference)"
    assert sorted(cs.writes) == [
        "reference/the-latency-dashboard-is-https-grafana-internal-d-api-latency.md",
        "user/i-prefer-terse-responses.md",
    ]
    assert [p.source_offset for p in result.patches] == [0, 2]
    assert result.touched_topics == ["user", "reference"]
    assert result.skipped_reason is None
    assert result.system_message == "Managed auto-memory updated: user.md, reference.md"
    assert result.cursor == {
        "sessionId": "abc123",
        "processedOffset": 3,
        "updatedAt": "2026-04-02T09:00:00.000Z",
    }
    assert result.meta_updates["lastExtractionStatus"] == "updated"
    assert result.meta_updates["lastExtractionSessionId"] == "abc123"
    assert result.meta_updates["lastExtractionTouchedTopics"] == ["user", "reference"]
    assert not (tmp_path / "user").exists()  # planning writes nothing


def test_second_run_with_the_same_history_is_a_noop(tmp_path: Path) -> None:  # checklist 44
    history = transcript("I prefer terse responses.", "Noted.")
    first = plan_extract(str(tmp_path), history, "s", {}, NOW)
    apply(tmp_path, first)
    second = plan_extract(str(tmp_path), history, "s", first.cursor, NOW)
    assert second.patches == []
    assert second.touched_topics == []
    assert second.changeset is None
    assert second.cursor["processedOffset"] == 2
    assert second.meta_updates["lastExtractionStatus"] == "noop"
    assert second.system_message is None


def test_new_session_replays_history_without_writing(tmp_path: Path) -> None:  # checklist 42
    history = transcript("I prefer terse responses.")
    apply(tmp_path, plan_extract(str(tmp_path), history, "s1", {}, NOW))
    again = plan_extract(
        str(tmp_path), history, "s2", {"sessionId": "s1", "processedOffset": 1}, NOW
    )
    assert len(again.patches) == 1
    assert again.changeset is None and again.touched_topics == []


def test_existing_memory_gets_the_missing_detail(tmp_path: Path) -> None:  # checklist 43
    history = transcript("I prefer terse responses.")
    apply(tmp_path, plan_extract(str(tmp_path), history, "s", {}, NOW))

    def planner(messages: list[Message]) -> list[Patch]:
        return [Patch("user", "i prefer terse responses.", why="They said so twice.")]

    result = plan_extract(str(tmp_path), history, "s2", {}, NOW, planner=planner)
    assert result.changeset is not None
    assert result.changeset.added == 0
    assert result.changeset.subject == "1 memory from session s2 (user)"
    text = result.changeset.writes["user/i-prefer-terse-responses.md"]
    assert text.endswith("\n\ni prefer terse responses.\n\nWhy: They said so twice.\n")
    assert "name: I prefer terse responses.\n" in text


def test_memory_tool_turns_skip_the_run(tmp_path: Path) -> None:  # checklist 46
    history = [
        {"role": "user", "parts": [{"text": "I prefer terse responses."}]},
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "save_memory", "response": {"output": "ok"}}}],
        },
    ]
    result = plan_extract(str(tmp_path), Transcript(messages_from_history(history)), "s", {}, NOW)
    assert result.skipped_reason == "memory_tool"
    assert result.changeset is None and result.patches == []
    assert result.meta_updates == {}
    assert result.cursor == {"sessionId": "s", "updatedAt": "2026-04-02T09:00:00.000Z"}


def test_write_file_into_the_memory_root(tmp_path: Path) -> None:  # checklist 47
    def history(path: str) -> Transcript:
        call = {"functionCall": {"name": "write_file", "args": {"file_path": path}}}
        items: list[dict[str, Any]] = [
            {"role": "user", "parts": [{"text": "I prefer terse responses."}]},
            {"role": "model", "parts": [call]},
        ]
        return Transcript(messages_from_history(items, [str(tmp_path)]))

    inside = plan_extract(str(tmp_path), history(str(tmp_path / "user" / "x.md")), "s", {}, NOW)
    assert inside.skipped_reason == "memory_tool"
    outside = plan_extract(str(tmp_path), history("/elsewhere/x.md"), "s", {}, NOW)
    assert outside.skipped_reason is None and outside.touched_topics == ["user"]


def test_only_turns_without_memory_writes_are_extracted(tmp_path: Path) -> None:
    path = FIXTURES / "qwen-session.jsonl"
    t = read_transcript(str(path), ["/home/u/.qwen/projects/-home-u-proj/memory"])
    result = plan_extract(str(tmp_path), t, None, {}, NOW)
    assert result.bad_lines == 2
    assert result.skipped_reason is None
    assert [(p.topic, p.summary) for p in result.patches] == [
        ("user", "I prefer terse responses."),
        ("project", "the release freeze starts 2026-03-05"),
    ]
    assert result.cursor["sessionId"] == "qwen-sess-1"
    assert result.cursor["processedOffset"] == 10


def test_claude_fixture_end_to_end(tmp_path: Path) -> None:
    t = read_transcript(str(FIXTURES / "claude-session.jsonl"), [str(tmp_path)])
    result = plan_extract(
        str(tmp_path), t, "claude-sess-1", {"sessionId": "claude-sess-1", "processedOffset": 2}, NOW
    )
    assert [p.source_offset for p in result.patches] == [3, 6]
    assert result.touched_topics == ["user", "project"]


def test_secrets_are_never_written(tmp_path: Path) -> None:
    history = transcript(
        f"Please remember that the deploy ticket token is {GITHUB_PAT}",
        "ok",
        "I prefer terse responses.",
    )
    result = plan_extract(str(tmp_path), history, "s", {}, NOW)
    assert result.dropped_secrets == ["github-pat"]
    assert result.changeset is not None
    assert all(GITHUB_PAT not in text for text in result.changeset.writes.values())
    assert result.touched_topics == ["user"]


def test_slug_collision_with_unscanned_file(tmp_path: Path) -> None:  # checklist 40
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "i-prefer-terse-responses.md").write_text("not a memory document\n")
    result = plan_extract(str(tmp_path), transcript("I prefer terse responses."), "s", {}, NOW)
    assert result.changeset is not None
    assert list(result.changeset.writes) == ["user/i-prefer-terse-responses-2.md"]


def test_written_file_round_trips_and_meta_merges(tmp_path: Path) -> None:  # checklist 39, 45
    result = plan_extract(
        str(tmp_path), transcript("I prefer terse responses.", session=None), None, {}, NOW
    )
    assert result.changeset is not None and result.changeset.session is None
    assert result.changeset.subject == "1 memory from transcript (user)"
    [(rel, text)] = result.changeset.writes.items()
    doc = parse_document(text, rel, 0.0)
    assert doc is not None and doc.type == "user" and doc.title == "I prefer terse responses."
    meta = update_fields({"version": 1, "createdAt": "x", "updatedAt": "x"}, result.meta_updates)
    assert json.loads(json.dumps(meta))["lastExtractionTouchedTopics"] == ["user"]
    assert "sessionId" not in result.cursor


def test_empty_slice_is_a_noop_run(tmp_path: Path) -> None:
    result = plan_extract(str(tmp_path), Transcript(), "s", {}, NOW)
    assert result.skipped_reason is None
    assert result.cursor["processedOffset"] == 0
    assert result.meta_updates["lastExtractionStatus"] == "noop"
