"""``qmem-git status``: uncommitted files, files held back and why, ahead/behind a remote."""

from __future__ import annotations

import subprocess
from pathlib import Path

from clihelpers import head, qmem

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
