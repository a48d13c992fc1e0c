"""Whole-process MEMORY.md rebuild over 10,000 memory files, against a bare interpreter start.

Run: ``.venv/bin/python bench/bench_index.py [--files N] [--runs N]``.  Prints a markdown
table; the key figure is the ratio to ``python -I -S -c pass`` measured in the same run, so it
means something on a noisy machine.  Goal: the rebuild stays under 2 s.
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

REPO = Path(__file__).resolve().parent.parent
TYPES = ("user", "feedback", "project", "reference")
GOAL_MS = 2000.0
BASE_NS = 1_700_000_000_000_000_000

# The rebuild itself, in a fresh process (the CLI's `index` also commits, so it needs a repo).
LIBRARY_REBUILD = (
    "import sys\n"
    "from qmem_git.store.workdir import atomic_write, index_path, render_index\n"
    "root = sys.argv[1]\n"
    "atomic_write(index_path(root), render_index(root).text.encode('utf-8'))\n"
)


def populate(root: Path, count: int) -> None:
    """``count`` valid memory files spread over the four type folders, distinct mtimes."""
    for kind in TYPES:
        (root / kind).mkdir(parents=True, exist_ok=True)
    for i in range(count):
        kind = TYPES[i % len(TYPES)]
        path = root / kind / f"memory-{i:05d}.md"
        path.write_text(
            f"---\nname: Memory number {i}\ndescription: Benchmark memory {i} about topic "
            f"{i % 97}\ntype: {kind}\n---\n\nFact {i} for the index benchmark.\n\n"
            f"Why: measuring.\n\nHow to apply: ignore.\n",
            encoding="utf-8",
        )
        stamp = BASE_NS + i * 1_000_000_000
        os.utime(path, ns=(stamp, stamp))


def time_command(argv: list[str], runs: int, env: dict[str, str]) -> list[float]:
    """Wall-clock milliseconds of ``runs`` runs after one warm-up; fails loudly on error."""
    samples: list[float] = []
    for attempt in range(runs + 1):
        start = time.perf_counter()
        subprocess.run(argv, check=True, env=env, cwd=REPO, stdout=subprocess.DEVNULL)
        elapsed = (time.perf_counter() - start) * 1000
        if attempt:
            samples.append(elapsed)
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args(argv)
    runs = max(args.runs, 5)
    env = {**os.environ, "PYTHONPATH": str(REPO), "QMEM_TELEMETRY": "0"}
    with tempfile.TemporaryDirectory(prefix="qmem-bench-") as tmp:
        root = Path(tmp) / "memory"
        populate(root, args.files)
        rebuild = [sys.executable, "-c", LIBRARY_REBUILD, str(root)]
        # the CLI's read-only check scans and renders the same index in a whole `qmem-git` run
        check = [sys.executable, "-m", "qmem_git", "--memory-dir", str(root), "index", "--check"]
        bare = time_command([sys.executable, "-I", "-S", "-c", "pass"], runs, env)
        index = time_command(rebuild, runs, env)
        text = (root / "MEMORY.md").read_text(encoding="utf-8")
        cli = time_command(check, runs, env)
    lines = text.split("\n\n")[0].count("\n") + 1 if text else 0
    bare_ms, index_ms = statistics.median(bare), statistics.median(index)
    cli_ms = statistics.median(cli)
    print(f"Index rebuild over {args.files:,} memory files (median of {runs} runs)\n")
    print("| case | median ms | min ms | ratio to bare python |")
    print("|---|---:|---:|---:|")
    print(f"| `python -I -S -c pass` | {bare_ms:.1f} | {min(bare):.1f} | 1.0x |")
    ratio = index_ms / bare_ms
    print(f"| render_index + atomic_write | {index_ms:.1f} | {min(index):.1f} | {ratio:.1f}x |")
    print(f"| `qmem-git index --check` | {cli_ms:.1f} | {min(cli):.1f} | {cli_ms / bare_ms:.1f}x |")
    index_ms = max(index_ms, cli_ms)
    verdict = "OK" if index_ms < GOAL_MS else "OVER GOAL"
    print(f"\nMEMORY.md lines: {lines}; goal < {GOAL_MS:.0f} ms: {verdict}")
    return 0 if index_ms < GOAL_MS else 1


if __name__ == "__main__":
    sys.exit(main())
