"""Progress of a clone on a terminal (bytes received and rate, commits checked), redrawn in
place; nothing of it when stderr is not a terminal. Real processes, a real ``git daemon``."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from clihelpers import qmem, qmem_on_tty
from conftest import require_tool
from helpers_git import git_argv
from servers import GitDaemon

require_tool(shutil.which("git") is not None, "C git")
COMMITS = 3000


def _history(repo: Path) -> None:
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(repo)], check=True)
    lines: list[bytes] = []
    for n in range(COMMITS):
        body = f"---\nname: m{n % 50}\ndescription: progress {n}\ntype: user\n---\n\nFact {n}.\n"
        data, message = body.encode(), f"edit {n}\n".encode()
        lines += [
            b"commit refs/heads/main",
            f"committer t <t@x> {1_700_000_000 + n} +0000".encode(),
        ]
        lines += [f"data {len(message)}".encode(), message]
        lines += [f"M 100644 inline user/m{n % 50}.md".encode(), f"data {len(data)}".encode(), data]
    subprocess.run(
        [*git_argv(str(repo)), "fast-import", "--quiet"],
        input=b"\n".join(lines) + b"\n",
        check=True,
    )


def test_clone_shows_progress_on_a_terminal_only(tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    _history(served / "memory.git")
    daemon = GitDaemon(served).start()
    try:
        shown = qmem_on_tty(tmp_path / "tty" / "memory", "clone", daemon.url("memory.git"))
        piped = qmem(tmp_path / "piped" / "memory", "clone", daemon.url("memory.git"))
    finally:
        daemon.stop()
    assert shown.code == 0, shown.out
    assert "\rqmem-git: checking: " in shown.out and " commits" in shown.out
    assert "checking: " in shown.out and ", done" in shown.out
    # the meter line ends before the summary: it starts a line of its own
    assert any(line.startswith("Cloned origin") for line in shown.out.split("\n")), shown.out
    assert piped.code == 0, piped.err
    assert piped.err == ""
    assert "Cloned origin" in piped.out
