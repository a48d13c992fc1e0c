"""Whole-process `dream` on 1,000 memories and `extract` on a 2,000-message transcript.

Each row is a fresh `python -m qmem_git` process on a real memory repository, against
`python -I -S -c pass` measured in the same run. Run: `.venv/bin/python bench/bench_lifecycle.py`.
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

TYPES = ("user", "feedback", "project", "reference")


def qmem(root: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "qmem_git", "--memory-dir", str(root), *args]


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - start) * 1000


def populate(root: Path, count: int, duplicates: int) -> None:
    """``count`` memories, ``duplicates`` of which repeat an earlier summary (dream work)."""
    distinct = count - duplicates
    for i in range(count):
        kind = TYPES[(i % distinct) % 4]  # a repeat shares type and summary with its original
        folder = root / kind / f"g{i // 100:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        summary = f"Fact number {i % distinct} about the {kind} side of things"
        (folder / f"m{i:05d}.md").write_text(
            f"---\nname: Fact {i}\ndescription: {summary}\ntype: {kind}\n---\n\n{summary}\n"
        )


def transcript(path: Path, messages: int) -> None:
    """Qwen Code JSONL: user facts every 10th turn, plain chatter otherwise."""
    with path.open("w") as handle:
        for i in range(messages):
            role = "user" if i % 2 == 0 else "assistant"
            text = (
                f"Please remember that service {i} is owned by team {i % 7}"
                if i % 20 == 0
                else f"message {i} about the code we are reading right now"
            )
            record = {
                "uuid": f"m{i}",
                "sessionId": "bench-session",
                "type": role,
                "message": {
                    "role": "user" if role == "user" else "model",
                    "parts": [{"text": text}],
                },
            }
            handle.write(json.dumps(record) + "\n")


def fresh_store(base: Path, name: str, env: dict[str, str], count: int, dups: int) -> Path:
    root = base / name / "memory"
    populate(root, count, dups)
    subprocess.run(qmem(root, "-q", "init"), check=True, env=env)
    return root


def median_of(make: list[str], runs: int, env: dict[str, str], reset: object = None) -> float:
    samples = []
    for _ in range(runs):
        if callable(reset):
            make = reset()
        samples.append(timed(make, env))
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=2000)
    options = parser.parse_args(argv)
    env = {**os.environ, "QMEM_TELEMETRY": "0"}
    base = Path(tempfile.mkdtemp(prefix="qmem-bench-life-"))
    try:
        bare = median_of([sys.executable, "-I", "-S", "-c", "pass"], options.runs, env)
        counter = iter(range(10_000))

        def dream_run() -> list[str]:
            root = fresh_store(base, f"d{next(counter)}", env, options.memories, 50)
            return qmem(root, "dream", "--force")

        dream = median_of([], options.runs, env, dream_run)
        chat = base / "session.jsonl"
        transcript(chat, options.messages)

        def extract_run() -> list[str]:
            root = fresh_store(base, f"e{next(counter)}", env, 100, 0)
            return qmem(root, "extract", "--transcript", str(chat))

        extract = median_of([], options.runs, env, extract_run)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"whole-process lifecycle commands, medians of {options.runs} runs\n")
    print("| command | ms | ratio to bare python |")
    print("|---|---:|---:|")
    print(f"| `python -I -S -c pass` | {bare:.1f} | 1.0x |")
    rows = [
        (f"`dream --force`, {options.memories:,} memories, 50 duplicates", dream),
        (f"`extract`, {options.messages:,}-message transcript", extract),
    ]
    for label, value in rows:
        print(f"| {label} | {value:.1f} | {value / bare:.1f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
