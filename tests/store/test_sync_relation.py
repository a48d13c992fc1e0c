"""relation: one tip among the other's last NEAR_COMMITS commits is found without a merge-base
search; further back, the merge base decides, with the same answers."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from dulwich.object_store import DiskObjectStore

from qmem_git.store.sync import NEAR_COMMITS, Objects, relation


def _history(path: Path, commits: int) -> list[str]:
    """``commits`` commits on main, then a side branch of two off the fifth; their ids."""
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    lines: list[bytes] = []
    for n in range(commits):
        lines += [
            b"commit refs/heads/main",
            f"mark :{n + 1}".encode(),
            f"committer t <t@x> {1_700_000_000 + n} +0000".encode(),
        ]
        lines += [b"data 2", f"{n % 10}\n".encode(), b"M 100644 inline f.md", b"data 2", b"x\n"]
    for n in range(2):
        lines += [
            b"commit refs/heads/side",
            f"committer t <t@x> {1_800_000_000 + n} +0000".encode(),
        ]
        lines += [b"data 2", b"s\n"]
        if n == 0:
            lines += [b"from :5"]
    subprocess.run(
        ["git", "-C", str(path), "fast-import", "--quiet"],
        input=b"\n".join(lines) + b"\n",
        check=True,
    )
    log = subprocess.run(
        ["git", "-C", str(path), "rev-list", "--reverse", "main"],
        capture_output=True,
        text=True,
        check=True,
    )
    side = subprocess.run(
        ["git", "-C", str(path), "rev-parse", "side"], capture_output=True, text=True, check=True
    )
    return [*log.stdout.split(), side.stdout.strip()]


@pytest.mark.parametrize("back", [1, NEAR_COMMITS - 1, NEAR_COMMITS + 10])
def test_ahead_behind_and_diverged_near_and_far(tmp_path: Path, back: int) -> None:
    ids = _history(tmp_path / "repo", NEAR_COMMITS + 20)
    *main, side = ids
    tip, older = main[-1], main[-1 - back]
    store = DiskObjectStore(str(tmp_path / "repo" / ".git" / "objects"))
    try:
        objects = Objects(store)
        assert relation(objects, tip, older) == ("ahead", older)
        assert relation(objects, older, tip) == ("behind", older)
        assert relation(objects, tip, tip) == ("same", tip)
        assert relation(objects, side, tip) == ("diverged", main[4])
    finally:
        store.close()
