"""Claude Code's folder of a project follows the project through the hub (its own branch).


Two machines, the project cloned at different paths: what Claude wrote on one appears on the
other after `sync`, MEMORY.md merged by lines, never rebuilt.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from servers import fsck_strict
from test_hub_e2e import hub_branches, two_machines, upstream  # noqa: F401

CLAUDE_MEMORY = """---
name: build-tool
description: The shop builds with pnpm
metadata:
  type: project
---

The shop builds with pnpm, never npm.
"""


def write_old(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    past = time.time() - 30
    os.utime(path, (past, past))


def test_claudes_folder_follows_the_project_through_the_hub(
    tmp_path: Path,
    upstream: Path,  # noqa: F811
) -> None:
    hub, (a, shop_a), (b, shop_b) = two_machines(tmp_path, upstream)
    folder_a = a.memory_root(shop_a, "--agent", "claude")
    write_old(folder_a / "build-tool.md", CLAUDE_MEMORY)
    write_old(folder_a / "MEMORY.md", "- [Build tool](build-tool.md) — pnpm, never npm\n")
    a.ok(shop_a, "--agent", "claude", "init")
    found = a.ok(shop_a, "--json", "sync").json()
    claude = next(entry for entry in found if entry["store"] == "claude")
    assert claude["status"] == "synced", claude["summary"]
    assert claude["branch"] == "claude/github.com/alice/shop"
    assert "claude/github.com/alice/shop" in hub_branches(hub)
    b.ok(shop_b, "--agent", "claude", "init")  # versioned (empty) on machine b
    b.ok(shop_b, "sync")
    folder_b = b.memory_root(shop_b, "--agent", "claude")
    assert (folder_b / "build-tool.md").read_text(encoding="utf-8") == CLAUDE_MEMORY
    assert "pnpm" in (folder_b / "MEMORY.md").read_text(encoding="utf-8")
    subprocess.run(["git", "--git-dir", f"{folder_b}.git", "fsck", "--strict"], check=True)
    fsck_strict(hub)


def test_both_machines_edit_claudes_index_and_converge(
    tmp_path: Path,
    upstream: Path,  # noqa: F811
) -> None:
    hub, (a, shop_a), (b, shop_b) = two_machines(tmp_path, upstream)
    folder_a = a.memory_root(shop_a, "--agent", "claude")
    first = "- [Build tool](build-tool.md) — pnpm, never npm\n"
    write_old(folder_a / "build-tool.md", CLAUDE_MEMORY)
    write_old(folder_a / "MEMORY.md", first)
    a.ok(shop_a, "--agent", "claude", "init")
    a.ok(shop_a, "sync")
    b.ok(shop_b, "--agent", "claude", "init")
    b.ok(shop_b, "sync")
    folder_b = b.memory_root(shop_b, "--agent", "claude")
    on_a = "- [Tests](tests.md) — vitest\n"
    on_b = "- [Deploy](deploy.md) — fly.io\n"
    write_old(folder_a / "tests.md", CLAUDE_MEMORY.replace("pnpm", "vitest"))
    write_old(folder_a / "MEMORY.md", first + on_a)
    write_old(folder_b / "deploy.md", CLAUDE_MEMORY.replace("pnpm", "fly.io"))
    write_old(folder_b / "MEMORY.md", first + on_b)
    a.ok(shop_a, "sync")
    b.ok(shop_b, "sync")  # merges a's lines with b's
    a.ok(shop_a, "sync")  # fast-forwards to the merge
    merged = first + on_b + on_a  # ours (b's) first, then the lines a added
    for folder in (folder_a, folder_b):
        assert (folder / "MEMORY.md").read_text(encoding="utf-8") == merged
        assert {p.name for p in folder.glob("*.md")} == {
            "MEMORY.md",
            "build-tool.md",
            "tests.md",
            "deploy.md",
        }
        subprocess.run(["git", "--git-dir", f"{folder}.git", "fsck", "--strict"], check=True)
    # Qwen's project store on the hub was not touched by Claude's files
    assert not any(branch.startswith("projects/") for branch in hub_branches(hub))
    fsck_strict(hub)
