"""pinned/ (top level, any letter case) holds hand-curated memories: listed and recalled, never
written, moved or deleted by extraction, dream or a query forget; ``forget --id`` may remove one
(issue 18, Qwen Code 0.24's rule for its own agents)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from clihelpers import git, qmem

FACT = "The release branch deploys to production every Friday afternoon"


def memory_file(name: str, kind: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: {name}\ntype: {kind}\n---\n\n{body}\n"


def put(root: Path, rel: str, text: str, age_s: float) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    when = os.path.getmtime(path) - age_s
    os.utime(path, (when, when))


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A pinned memory and an unpinned duplicate of it, committed."""
    root = tmp_path / "memory"
    assert qmem(root, "init").code == 0
    put(root, "PiNNed/deploy.md", memory_file("Deploy day", "project", FACT), 300)
    put(root, "project/deploy.md", memory_file("Deploy copy", "project", FACT), 200)
    assert qmem(root, "snapshot").code == 0
    return root


def tracked(root: Path) -> list[str]:
    return git(root, "ls-tree", "-r", "--name-only", "HEAD").split()


def test_pinned_memories_are_listed_and_recalled(store: Path) -> None:
    assert "(PiNNed/deploy.md)" in (store / "MEMORY.md").read_text(encoding="utf-8")
    found = qmem(store, "--json", "recall", "release branch deploys Friday")
    assert found.code == 0 and "PiNNed/deploy.md" in found.out


def test_a_query_forget_never_removes_a_pinned_memory(store: Path) -> None:
    pinned = (store / "PiNNed" / "deploy.md").read_bytes()
    result = qmem(store, "forget", "Friday afternoon")
    assert result.code == 0, result.err
    assert (store / "PiNNed" / "deploy.md").read_bytes() == pinned
    assert "PiNNed/deploy.md" in tracked(store) and "project/deploy.md" not in tracked(store)
    again = qmem(store, "forget", "Friday afternoon")
    assert again.code == 1  # only the pinned one matches: nothing to forget


def test_forget_by_id_may_remove_a_pinned_memory(store: Path) -> None:
    result = qmem(store, "forget", "--id", "PiNNed/deploy.md")
    assert result.code == 0, result.err
    assert not (store / "PiNNed" / "deploy.md").exists()
    assert "PiNNed/deploy.md" not in tracked(store)


def test_dream_and_remember_never_touch_pinned(store: Path) -> None:
    pinned = (store / "PiNNed" / "deploy.md").read_bytes()
    dreamed = qmem(store, "dream", "--force")
    assert dreamed.code == 0, dreamed.err
    remembered = qmem(store, "remember", "--type", "project", FACT)
    assert remembered.code == 0, remembered.err
    assert (store / "PiNNed" / "deploy.md").read_bytes() == pinned
    assert (
        git(store, "log", "--format=%H", "--", "PiNNed").split()
        == git(store, "log", "--format=%H", "--diff-filter=A", "--", "PiNNed").split()
    )  # the only commit that touched pinned/ is the one that added it
