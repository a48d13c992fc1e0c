"""Benchmark: listing the last 50 operations of a 1,000-commit memory repo, against C git.

Builds the repo with ``git fast-import`` (messages rendered by ``render_commit_message``, so
``log`` reads paths from the message), plus a twin whose commits have no trailers (``log``
falls back to tree diffs there) to show what reading messages saves. Each row is a whole
process start, median of RUNS runs; ratios are against ``git log -50 --name-status`` measured
in the same run.

Usage: .venv/bin/python bench/bench_log.py [--commits N] [--runs R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from qmem_git.core.changes import ChangeSet, FileChange, render_commit_message  # noqa: E402

TYPES = ("user", "feedback", "project", "reference")
START = 1_700_000_000


def memory(kind: str, n: int, revision: int) -> str:
    lines = [f"Fact number {n} revision {r} about the project." for r in range(revision + 1)]
    body = "\n\n".join(lines)
    return f"---\nname: fact {n}\ndescription: fact {n}\ntype: {kind}\n---\n\n{body}\n"


def fast_import_stream(commits: int, trailers: bool) -> bytes:
    """Each commit adds one file and rewrites one older file (and MEMORY.md)."""
    out: list[bytes] = []
    revisions: dict[int, int] = {}
    for i in range(commits):
        files: dict[str, str] = {}
        changes = [FileChange("A", f"{TYPES[i % 4]}/fact-{i}.md")]
        files[changes[0].path] = memory(TYPES[i % 4], i, 0)
        if i:
            old = (i * 37 + 11) % i
            revisions[old] = revisions.get(old, 0) + 1
            path = f"{TYPES[old % 4]}/fact-{old}.md"
            files[path] = memory(TYPES[old % 4], old, revisions[old])
            changes.append(FileChange("M", path))
        files["MEMORY.md"] = f"- index after commit {i}\n"
        cs = ChangeSet("extract", f"{len(changes)} memories", topics=(TYPES[i % 4],), added=1)
        message = render_commit_message(cs, "bench", changes) if trailers else f"commit {i}\n"
        out.append(_commit(i, message, files))
    return b"".join(out)


def _commit(i: int, message: str, files: dict[str, str]) -> bytes:
    msg = message.encode()
    parts = [
        b"commit refs/heads/main\n",
        b"mark :%d\n" % (i + 1),
        b"committer Bench <bench@example.com> %d +0000\n" % (START + 60 * i),
        b"data %d\n%s\n" % (len(msg), msg),
    ]
    if i:
        parts.append(b"from :%d\n" % i)
    for path, text in files.items():
        data = text.encode()
        parts.append(b"M 100644 inline %s\ndata %d\n%s\n" % (path.encode(), len(data), data))
    return b"".join(parts)


def c_git(directory: Path) -> list[str]:
    """C git on the repository of memory root ``directory``, beside it as qmem-git keeps it."""
    return ["git", f"--git-dir={directory}.git", f"--work-tree={directory}"]


def build_repo(directory: Path, commits: int, trailers: bool) -> None:
    directory.mkdir(parents=True)
    subprocess.run([*c_git(directory), "init", "-q", "-b", "main"], check=True)
    subprocess.run(
        [*c_git(directory), "fast-import", "--quiet"],
        cwd=directory,
        input=fast_import_stream(commits, trailers),
        check=True,
    )
    subprocess.run([*c_git(directory), "checkout", "-q", "-f", "main"], cwd=directory, check=True)


def median_ms(cmd: list[str], runs: int, cwd: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(cmd, cwd=cwd, env=env, check=True, capture_output=True)  # warm the cache
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, env=env, check=True, capture_output=True)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def read_log_cmd(root: Path) -> list[str]:
    code = (
        "from qmem_git.store.history import read_log; "
        f"entries = read_log({str(root)!r}, limit=50); assert len(entries) == 50"
    )
    return [sys.executable, "-c", code]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        qmem = Path(tmp) / "qmem"
        plain = Path(tmp) / "plain"
        build_repo(qmem, args.commits, trailers=True)
        build_repo(plain, args.commits, trailers=False)
        rows = [
            ("python -c pass (interpreter start)", [sys.executable, "-c", "pass"], qmem),
            ("git log -50 --name-status", [*c_git(qmem), "log", "-50", "--name-status"], qmem),
            ("read_log(limit=50), paths from messages", read_log_cmd(qmem), ROOT),
            ("read_log(limit=50), no trailers (tree diffs)", read_log_cmd(plain), ROOT),
        ]
        results = [(name, median_ms(cmd, args.runs, cwd)) for name, cmd, cwd in rows]
    start_ms, git_ms = results[0][1], results[1][1]
    print(f"log of the last 50 of {args.commits} commits; median of {args.runs} process runs\n")
    print("| command | median ms | ratio vs git log | ratio vs python start |")
    print("|---|---:|---:|---:|")
    for name, ms in results:
        print(f"| {name} | {ms:.1f} | {ms / git_ms:.2f}x | {ms / start_ms:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
