"""Whole-process recall latency against a bare interpreter start (ARCHITECTURE §6).

Each measurement is a fresh ``python -I -S`` process that imports ``qmem_git.ops.recall`` and
prints the block, the way the per-prompt hook runs it; the reference is ``python -I -S -c pass``
timed in the same run. Stores of 100, 1,000 and 10,000 memories are spread over the four type
folders in subfolders of at most 100 files. "cold" deletes the parse cache before every run,
"warm" reuses it. Prints a markdown table (medians of ``--runs`` interleaved runs).

    python bench/bench_recall.py [--runs 9] [--sizes 100,1000,10000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TYPES = ("user", "feedback", "project", "reference")
# fmt: off
WORDS = (
    "deploy", "release", "rollback", "canary", "grafana", "latency", "oncall", "schema",
    "migration", "postgres", "vitest", "suite", "style", "terse", "summary", "owner", "approval",
    "feature", "flag", "budget", "incident", "dashboard", "ticket", "token", "credential",
    "vault", "cache", "index", "commit", "branch", "review", "lint", "format", "coverage",
    "部署", "生产", "発表", "배포", "設定",
)
# fmt: on
QUERY = "how do we roll back a canary deploy when grafana latency alerts fire?"
NOW_S = 1_800_000_000
TARGET_WARM_1000_RATIO = 3.0
TARGET_WARM_10000_MS = 300.0

RECALL_CODE = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from qmem_git.ops.recall import recall; "
    "sys.stdout.write(recall(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])).prompt)"
)


def build_store(base: Path, count: int) -> tuple[Path, Path]:
    """``count`` memories under ``base/state/memory``; mtimes spread over ~a year."""
    state = base / f"state-{count}"
    root = state / "memory"
    for i in range(count):
        kind = TYPES[i % 4]
        folder = root / kind / f"g{i // 400:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"note-{i:05d}.md"
        words = [WORDS[(i * 7 + k * 13) % len(WORDS)] for k in range(60)]
        path.write_text(
            f"---\nname: Note {i} {words[0]} {words[1]}\n"
            f"description: {' '.join(words[2:8])}\ntype: {kind}\n---\n\n"
            f"{' '.join(words[8:])}\n\nWhy: {' '.join(words[:10])}\n",
            encoding="utf-8",
        )
        stamp = NOW_S - (i * 3137) % (365 * 86_400)
        os.utime(path, (stamp, stamp))
    return root, state


def timed(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - start) * 1000


def recall_args(root: Path, state: Path) -> list[str]:
    now_ms = str(NOW_S * 1000)
    code = [sys.executable, "-I", "-S", "-c", RECALL_CODE]
    return [*code, str(REPO), str(root), str(state), QUERY, now_ms]


def cli_args(root: Path) -> list[str]:
    """The real command the hooks run: ``python -m qmem_git recall`` (site and venv included)."""
    return [sys.executable, "-m", "qmem_git", "--memory-dir", str(root), "recall", QUERY]


def measure(root: Path, state: Path, runs: int) -> Row:
    """Bare, cold, warm and CLI runs interleaved, so load from other processes hits all."""
    cache = state / "cache" / "recall-docs.marshal"
    bare_args = [sys.executable, "-I", "-S", "-c", "pass"]
    args = recall_args(root, state)
    cli = cli_args(root)
    timed(bare_args)
    timed(args)  # warm-up: OS caches and bytecode
    timed(cli)
    bare, cold, warm, real = [], [], [], []
    for _ in range(runs):
        bare.append(timed(bare_args))
        cache.unlink(missing_ok=True)
        cold.append(timed(args))
        warm.append(timed(args))
        real.append(timed(cli))
    return (
        statistics.median(bare),
        statistics.median(cold),
        statistics.median(warm),
        statistics.median(real),
    )


Row = tuple[float, float, float, float]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--sizes", default="100,1000,10000")
    options = parser.parse_args(argv)
    sizes = [int(size) for size in options.sizes.split(",")]
    base = Path(tempfile.mkdtemp(prefix="qmem-bench-recall-"))
    try:
        rows = {size: measure(*build_store(base, size), options.runs) for size in sizes}
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print_table(rows, options.runs)
    return 0 if meets_targets(rows) else 1


def print_table(rows: dict[int, Row], runs: int) -> None:
    print(f"whole-process recall, `python -I -S`; medians of {runs} interleaved runs")
    print()
    print(
        "| memories | bare ms | cold ms | cold / bare | warm ms | warm / bare "
        "| `qmem-git recall` ms | CLI / bare |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size, (bare, cold, warm, real) in rows.items():
        cells = [f"{size:,}", f"{bare:.1f}", f"{cold:.1f}", f"{cold / bare:.2f}x"]
        cells += [f"{warm:.1f}", f"{warm / bare:.2f}x", f"{real:.1f}", f"{real / bare:.2f}x"]
        print("| " + " | ".join(cells) + " |")
    print()
    print(
        f"targets: 1,000 warm <= {TARGET_WARM_1000_RATIO:.0f}x bare; "
        f"10,000 warm <= {TARGET_WARM_10000_MS:.0f} ms"
    )


def meets_targets(rows: dict[int, Row]) -> bool:
    ok = True
    if 1_000 in rows:
        bare, _, warm, _ = rows[1_000]
        ok = warm <= TARGET_WARM_1000_RATIO * bare
    if 10_000 in rows:
        ok = ok and rows[10_000][2] <= TARGET_WARM_10000_MS
    return ok


if __name__ == "__main__":
    raise SystemExit(main())
