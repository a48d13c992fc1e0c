"""Whole-process `validate` on 1,000 memory files, against a bare interpreter start; then the
memory repo's git pre-commit hook (`validate --staged`, one staged edit) against the whole-folder
check on a 10,000-file repository.

Usage: python bench/bench_validate.py [--files N] [--hook-files N] [--runs R]
Prints markdown tables; the ratio column is what to compare across machines (goal: < 1 s).
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

VALIDATE = (
    "import sys\n"
    "from qmem_git.ops.validate import validate_tree\n"
    "report = validate_tree(sys.argv[1])\n"
    "sys.exit(report.exit_code)\n"
)
# Same work with the checks' heavy imports already paid: isolates the per-file cost.
IMPORTS_ONLY = "import qmem_git.ops.validate\n"


def make_tree(root: Path, count: int) -> None:
    """``count`` valid memory files spread over the four type folders, plus MEMORY.md."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from qmem_git.store.workdir import render_index

    kinds = ("user", "feedback", "project", "reference")
    for n in range(count):
        kind = kinds[n % 4]
        path = root / kind / f"memory-{n:05d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            f"---\nname: Memory number {n}\ndescription: What memory {n} is about.\n"
            f"type: {kind}\n---\n\nFact number {n} about the project and its tooling.\n\n"
            f"Why: It was surprising on day {n}.\n\nHow to apply: Check it before step {n}.\n",
            encoding="utf-8",
        )
        stamp = 1_700_000_000 + n
        os.utime(path, (stamp, stamp))
    (root / "MEMORY.md").write_text(render_index(str(root)).text, encoding="utf-8")


def timed(command: list[str], runs: int, expect: int = 0) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        code = subprocess.run(command, stdout=subprocess.DEVNULL).returncode
        samples.append(time.perf_counter() - started)
        if code != expect:
            raise SystemExit(f"{command[:3]} exited {code}")
    return statistics.median(samples)


def hook_table(count: int, runs: int) -> None:
    """A C git repository of ``count`` files with one edited file staged (its time kept, so
    MEMORY.md stays current): the hook's check against the whole folder's, same tree."""
    cli = os.path.join(os.path.dirname(sys.executable), "qmem-git")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "memory"
        make_tree(root, count)
        env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
        env.update(GIT_AUTHOR_NAME="B", GIT_AUTHOR_EMAIL="b@example.com")
        env.update(GIT_COMMITTER_NAME="B", GIT_COMMITTER_EMAIL="b@example.com")
        git = ["git", f"--git-dir={root}.git", f"--work-tree={root}"]  # beside it, as qmem-git
        for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "base"]):
            subprocess.run([*git, *args], check=True, env=env)
        edited = root / "user" / "memory-00000.md"
        stamp = edited.stat().st_mtime_ns
        edited.write_text(edited.read_text(encoding="utf-8") + "\nOne more line.\n")
        os.utime(edited, ns=(stamp, stamp))
        subprocess.run([*git, "add", "-A"], check=True, env=env)
        whole = timed([cli, "-q", "--memory-dir", str(root), "validate"], runs)
        staged = timed([cli, "-q", "--memory-dir", str(root), "validate", "--staged"], runs)
    title = f"git pre-commit hook, {count:,} files, one staged edit (median of {runs})"
    print(f"\n| {title} | seconds |")
    print("|---|---:|")
    print(f"| `qmem-git validate` (whole folder) | {whole:.3f} |")
    print(f"| `qmem-git validate --staged` (the hook) | {staged:.3f} |")
    print(f"\nthe hook takes {staged / whole:.2f}x the whole-folder check")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--hook-files", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    python = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "memory"
        make_tree(root, args.files)
        bare = timed([python, "-I", "-S", "-c", "pass"], args.runs)
        imports = timed([python, "-c", IMPORTS_ONLY], args.runs)
        full = timed([python, "-c", VALIDATE, str(root)], args.runs)
    rows = [
        ("`python -I -S -c pass`", bare),
        ("`import qmem_git.ops.validate`", imports),
        (f"validate_tree, {args.files} files + MEMORY.md", full),
    ]
    print(f"| command (median of {args.runs}) | seconds | ratio to bare python |")
    print("|---|---:|---:|")
    for label, seconds in rows:
        print(f"| {label} | {seconds:.3f} | {seconds / bare:.1f}x |")
    per_file_ms = (full - imports) / args.files * 1000
    verdict = "meets" if full < 1.0 else "misses"
    print(
        f"\nper file: {per_file_ms:.2f} ms; whole process {full:.3f} s ({verdict} the < 1 s goal)"
    )
    hook_table(args.hook_files, max(3, args.runs // 2))


if __name__ == "__main__":
    main()
