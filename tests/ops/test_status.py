"""``qmem-git status``: uncommitted files, files held back and why, ahead/behind a remote."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from clihelpers import Run, head, qmem

KEY = "token ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def memory_file(name: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: {name}\ntype: user\n---\n\n{body}\n"


def test_status_names_what_waits_and_what_is_held_back_and_changes_nothing(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "memory"
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    memory.mkdir()
    assert qmem(memory, "remember", "The build uses gradle eight").code == 0
    assert qmem(memory, "init", "--remote", str(bare)).code == 0
    assert qmem(memory, "remember", "The deploy runs on fridays").code == 0
    (memory / "notes").mkdir()
    (memory / "notes" / "new.md").write_text(memory_file("New", "A new note"))
    (memory / "user" / "key.md").write_text(memory_file("Key", KEY))
    (memory / "logs.txt").write_text("not versioned\n")
    before = head(memory)
    result = qmem(memory, "--json", "status")
    assert result.code == 0, result.err
    found = result.json()
    assert found["uncommitted"] == {"notes/new.md": "A"}
    assert list(found["held"]) == ["user/key.md"]
    assert found["held"]["user/key.md"].startswith("secret: possible secret: GitHub PAT")
    assert found["tracking"] == [{"remote": "origin", "ahead": 1, "behind": 0}]
    assert found["index_stale"] is True  # the new files are not listed in MEMORY.md yet
    text = qmem(memory, "status")
    assert "A notes/new.md" in text.out and "user/key.md: secret:" in text.out
    assert "main is 1 ahead, 0 behind origin/main" in text.out
    assert head(memory) == before and (memory / "user" / "key.md").exists()
    busy = qmem(memory, "--json", "status", env={"QMEM_QUIET_SECONDS": "600"})
    assert busy.json()["held"]["notes/new.md"].startswith("busy:")
    assert qmem(memory, "sync").code == 0
    synced = qmem(memory, "--json", "status").json()
    assert synced["tracking"] == [{"remote": "origin", "ahead": 0, "behind": 0}]
    assert synced["uncommitted"] == {} and list(synced["held"]) == ["user/key.md"]
    validated = qmem(memory, "validate", "--format", "gcc")
    assert validated.code == 1 and "user/key.md:" in validated.out and "[secret]" in validated.out


def run_in(project: Path, *args: str) -> Run:
    """``python -m qmem_git ARGS`` in ``project``: no ``--memory-dir``, the stores are found."""
    proc = subprocess.run(
        [sys.executable, "-m", "qmem_git", *args],
        capture_output=True,
        text=True,
        cwd=project,
        timeout=120,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def tree(*roots: Path) -> dict[str, int]:
    """Every path under ``roots`` with its mtime: what listing must leave as it was."""
    return {
        str(path): path.lstat().st_mtime_ns for root in roots for path in sorted(root.rglob("*"))
    }


def test_status_lists_every_store_of_the_project_and_creates_none(tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    project = tmp_path / "proj"
    team = project / ".qwen" / "team-memory"
    team.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(project)], check=True)
    (team / "old.md").write_text(memory_file("Old", "Committed by the team"))
    subprocess.run(["git", "-C", str(project), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(project), "commit", "-qm", "team"], check=True)
    (team / "old.md").write_text(memory_file("Old", "Changed since"))
    (team / "new.md").write_text(memory_file("New", "Not added yet"))
    (team / "key.md").write_text(memory_file("Key", KEY))
    bare = tmp_path / "user-remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    assert run_in(project, "init").code == 0
    assert run_in(project, "remember", "The build uses gradle eight").code == 0
    assert run_in(project, "--tier", "user", "init", "--remote", str(bare)).code == 0
    user_root = home / ".qwen" / "memories"
    (user_root / "feedback").mkdir(parents=True, exist_ok=True)
    (user_root / "feedback" / "tea.md").write_text(memory_file("Tea", "Green tea, always"))
    before = tree(home, project)

    listed = run_in(project, "--json", "status")
    assert listed.code == 0, listed.err
    stores = {store["store"]: store for store in listed.json()}
    assert [store["store"] for store in listed.json()] == ["project", "user", "team", "claude"]
    keys = {"store", "memory_root", "repository", "exists", "initialized", "uncommitted"}
    keys |= {"held", "index_stale", "tracking", "hub", "note", "error"}
    assert all(set(store) == keys for store in stores.values())
    assert all(store["hub"] is None for store in stores.values())  # no hub sync yet
    assert stores["project"]["initialized"] and stores["project"]["uncommitted"] == {}
    assert stores["user"]["memory_root"] == str(user_root)
    assert stores["user"]["repository"] == str(home / ".qwen" / "memories.git")
    assert stores["user"]["uncommitted"] == {"feedback/tea.md": "A"}
    assert [t["remote"] for t in stores["user"]["tracking"]] == ["origin"]
    assert stores["team"]["repository"] == str(project / ".git")
    assert stores["team"]["uncommitted"] == {"new.md": "A", "old.md": "M"}
    assert list(stores["team"]["held"]) == ["key.md"]
    assert stores["team"]["held"]["key.md"].startswith("secret:")
    claude = stores["claude"]
    assert (claude["exists"], claude["initialized"], claude["uncommitted"]) == (False, False, {})
    assert not Path(claude["memory_root"]).exists()

    text = run_in(project, "status")
    assert text.code == 0, text.err
    assert f"user: {user_root}\n" in text.out and "A feedback/tea.md" in text.out
    assert "key.md: secret:" in text.out and "claude: " in text.out
    assert "Uncommitted (git add and commit them in the project):\n   A new.md" in text.out
    assert "not set up (no folder; no repository at" in text.out
    assert tree(home, project) == before  # listing made, moved and rewrote nothing

    one = run_in(project, "--tier", "user", "--json", "status")
    assert one.code == 0 and one.json()["uncommitted"] == {"feedback/tea.md": "A"}
    named = run_in(project, "--json", "status", "--tier", "project").json()
    assert isinstance(named, dict) and named["uncommitted"] == {}  # that store only
    absent = run_in(project, "status", "--agent", "claude")
    assert absent.code == 2 and "not a memory repository" in absent.err
