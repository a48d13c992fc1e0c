"""The UserPromptSubmit hook as a whole process, against a bare interpreter start (ARCH §6).

The hook runs as the agents start it after ``install-hooks``: the ``qmem-git`` console script
next to the interpreter (``qmem-git --memory-dir ROOT hook --agent qwen prompt``), and, for
comparison, ``python -m qmem_git``. The payload carries ``submitted_prompt``, so every run is a
user turn that recalls and prints the context. The reference is ``python -I -S -c pass`` timed
in the same run, interleaved. Stores are built as in bench_recall.py; the parse cache is warm.

    python bench/bench_hook.py [--runs 9] [--sizes 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_recall import QUERY, build_store

TARGET_RATIO = 3.0
SCRIPT = Path(sys.executable).parent / "qmem-git"


def payload(project: Path) -> bytes:
    data = {
        "session_id": "bench",
        "transcript_path": "",
        "cwd": str(project),
        "hook_event_name": "UserPromptSubmit",
        "prompt": QUERY,
        "submitted_prompt": QUERY,
    }
    return json.dumps(data).encode()


def timed(args: list[str], stdin: bytes, env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(args, input=stdin, capture_output=True, env=env, check=True)
    elapsed = (time.perf_counter() - start) * 1000
    if stdin and b"additionalContext" not in done.stdout:
        raise SystemExit(f"the hook printed no context: {done.stdout!r} {done.stderr!r}")
    return elapsed


Row = tuple[float, float, float]


def measure(root: Path, base: Path, runs: int) -> Row:
    env = {**os.environ, "HOME": str(base / "home"), "QMEM_TELEMETRY": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # installs have bytecode; the warm-up writes it
    hook = ["--memory-dir", str(root), "hook", "--agent", "qwen", "prompt"]
    script = [str(SCRIPT), *hook]
    module = [sys.executable, "-m", "qmem_git", *hook]
    bare = [sys.executable, "-I", "-S", "-c", "pass"]
    stdin = payload(base)
    timed(script, stdin, env)  # warm-up: bytecode, parse cache, OS caches
    timed(module, stdin, env)
    bare_ms, script_ms, module_ms = [], [], []
    for _ in range(runs):
        bare_ms.append(timed(bare, b"", env))
        script_ms.append(timed(script, stdin, env))
        module_ms.append(timed(module, stdin, env))
    return statistics.median(bare_ms), statistics.median(script_ms), statistics.median(module_ms)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--sizes", default="1000")
    options = parser.parse_args(argv)
    if not SCRIPT.exists():
        raise SystemExit(f"{SCRIPT} is missing: install the package (make test does)")
    sizes = [int(size) for size in options.sizes.split(",")]
    base = Path(tempfile.mkdtemp(prefix="qmem-bench-hook-"))
    try:
        rows = {}
        for size in sizes:
            root, _ = build_store(base, size)
            rows[size] = measure(root, base, options.runs)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print_table(rows, options.runs)
    bare, script, _ = rows.get(1_000, (1.0, 0.0, 0.0))
    return 0 if script <= TARGET_RATIO * bare else 1


def print_table(rows: dict[int, Row], runs: int) -> None:
    print(f"UserPromptSubmit hook, whole process, warm cache; medians of {runs} interleaved runs")
    print()
    print("| memories | bare ms | `qmem-git hook` ms | / bare | `-m qmem_git hook` ms | / bare |")
    print("|---:|---:|---:|---:|---:|---:|")
    for size, (bare, script, module) in rows.items():
        cells = [f"{size:,}", f"{bare:.1f}", f"{script:.1f}", f"{script / bare:.2f}x"]
        cells += [f"{module:.1f}", f"{module / bare:.2f}x"]
        print("| " + " | ".join(cells) + " |")
    print()
    print(f"target: 1,000 memories, `qmem-git hook` <= {TARGET_RATIO:.0f}x `python -I -S -c pass`")


if __name__ == "__main__":
    raise SystemExit(main())
