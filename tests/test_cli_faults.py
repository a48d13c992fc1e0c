"""Faults found by attacking the landed code (issue 21), each through the real CLI and checked
with C git: nothing lost, nothing leaked, one documented error line per failure."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from clihelpers import assert_clean_repo, git, qmem, qwen_transcript


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    root = tmp_path / "state" / "memory"
    assert qmem(root, "init").code == 0
    assert qmem(root, "remember", "I prefer green tea in the morning").code == 0
    return root


# --------------------------------------------------------------------------- MEMORY.md


@pytest.mark.parametrize(
    "content",
    [b"x" * 300_000, b"\xff\xfe\x00" * 100 + b"\n<<<<<<< ours\n"],
    ids=["over-256-KiB", "binary"],
)
@pytest.mark.parametrize("extra", [(), ("--why", "it keeps me awake")], ids=["fast", "click"])
def test_an_oversized_or_malformed_index_is_just_regenerated(
    memory: Path, content: bytes, extra: tuple[str, ...]
) -> None:
    (memory / "MEMORY.md").write_bytes(content)
    result = qmem(memory, "remember", "I prefer black coffee in the afternoon", *extra)
    assert result.code == 0, result.err
    assert "Traceback" not in result.err
    index = (memory / "MEMORY.md").read_text(encoding="utf-8")
    assert index.startswith("- [I prefer black coffee in the afternoon](user/")
    assert "I prefer green tea in the morning" in index
    assert git(memory, "show", "HEAD:MEMORY.md") == index
    assert_clean_repo(memory)


# --------------------------------------------------------------------------- extraction queue

ROUNDS = 3
FACTS = [
    "I prefer tabs over spaces in Makefiles",
    "The on-call rota is https://wiki.internal/oncall",
    "I prefer short commit messages in the imperative mood",
    "I prefer pytest fixtures over unittest setUp methods",
    "The latency dashboard is https://grafana.internal/d/latency",
    "Never force-push to the shared release branches",
    "I prefer British spelling in user-facing documentation",
    "The mobile release freeze starts on the first Monday of March",
    "Our incident runbooks are kept in the ops-handbook wiki space",
    "I prefer rebasing feature branches instead of merge commits",
    "The design documents are at https://docs.internal/design",
    "Integration tests must never call the production payment gateway",
]


def _extract_all(memory: Path, tmp_path: Path, round_number: int) -> list[subprocess.Popen[str]]:
    procs = []
    for number, fact in enumerate(FACTS):
        session = f"round{round_number}-session{number:02d}"
        text = f"{fact} (round {round_number})" if round_number else fact
        path = qwen_transcript(tmp_path / f"{session}.jsonl", session, [text])
        args = ["--memory-dir", str(memory), "--json", "extract", "--transcript", str(path)]
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "qmem_git", *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    return procs


def test_concurrent_extractions_of_different_sessions_all_land(
    memory: Path, tmp_path: Path
) -> None:
    """Issue 21: 12 extract processes of 12 sessions at once, three times; every session's facts are
    committed (before, the latest queued request won across sessions and most were lost)."""
    statuses = []
    for round_number in range(ROUNDS):
        for proc in _extract_all(memory, tmp_path, round_number):
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err
            statuses.append(json.loads(out)["status"])
    assert "queued" in statuses  # they did run at the same time
    log = qmem(memory, "--json", "log", "-n", "1000", "--op", "extract").json()
    sessions = {entry["session"] for entry in log}
    expected = {f"round{r}-session{n:02d}" for r in range(ROUNDS) for n in range(len(FACTS))}
    assert sessions == expected
    tree = git(memory, "grep", "-h", "-i", "-e", "round 1", "HEAD", "--", ":!MEMORY.md")
    assert tree.count("(round 1)") >= len(FACTS)
    assert list((memory.parent / "extract-queue").iterdir()) == []
    assert_clean_repo(memory)


# --------------------------------------------------------------------------- hostile text


def test_terminal_escapes_are_not_stored_and_links_in_titles_are_not_live(memory: Path) -> None:
    text = "\x1b[31mThe wiki](http://evil.example) says `make` builds\x1b[0m the docs"
    result = qmem(memory, "remember", "--why", "\x1b]0;pwned\x07it is fast", text)
    assert result.code == 0, result.err
    stored = git(memory, "grep", "-h", "-e", "wiki", "-e", "fast", "HEAD", "--", ":!MEMORY.md")
    assert "The wiki](http://evil.example) says `make` builds the docs" in stored
    assert "\x1b" not in stored and "[31m" not in stored and "[0m" not in stored
    assert "it is fast" in stored and "pwned" not in stored
    index = (memory / "MEMORY.md").read_text(encoding="utf-8")
    (line,) = [line for line in index.splitlines() if "wiki" in line]
    assert line.count("](") == 1  # only the entry's own link to its file
    assert "] (http://evil.example)" in line and "'make'" in line
    assert_clean_repo(memory)
