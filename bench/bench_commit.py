"""Time one memory commit, whole process, on repos of 100 / 1,000 / 10,000 memory files.

Compares (same run, interleaved, median of N) a fresh Python process that applies one new memory
through ``qmem_git.store.repo.run_writer`` (lock + recovery scan + commit), C git
``git add -A && git commit -q``, and dulwich porcelain ``add`` + ``commit``; prints a markdown
table with ratios (ARCHITECTURE §6 target: qmem <= 2x git and <= 0.5x dulwich porcelain).

    .venv/bin/python bench/bench_commit.py [--sizes 100,1000,10000] [--runs 5]
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

TYPES = ("user", "project", "feedback", "reference")
PER_FOLDER = 100

QMEM_DRIVER = """
import sys
from datetime import datetime, timezone
from qmem_git.core.changes import ChangeSet
from qmem_git.core.paths import Layout
from qmem_git.store.repo import Identity, run_writer
root, rel, text = sys.argv[1], sys.argv[2], sys.argv[3]
layout = Layout(root, root.rsplit("/", 1)[0], "explicit", "")
run_writer(layout, lambda: ChangeSet(op="remember", subject="add " + rel, writes={rel: text}),
           identity=Identity("Bench", "bench@example.com"), host="bench",
           now=datetime.now(timezone.utc))
"""

DULWICH_DRIVER = """
import sys
from dulwich import porcelain
root, rel, text = sys.argv[1], sys.argv[2], sys.argv[3]
with open(root + "/" + rel, "w") as handle:
    handle.write(text)
porcelain.add(root, paths=[root + "/" + rel])
porcelain.commit(root, message=b"add " + rel.encode(), author=b"Bench <bench@example.com>",
                 committer=b"Bench <bench@example.com>")
"""


def memory_text(name: str, kind: str) -> str:
    return f"---\nname: {name}\ndescription: bench memory {name}\ntype: {kind}\n---\n\n{name}.\n"


def build_base(root: str, count: int, env: dict[str, str]) -> None:
    """``count`` memory files, ``PER_FOLDER`` per folder, committed with C git."""
    os.makedirs(root)
    for number in range(count):
        kind = TYPES[number % len(TYPES)]
        folder = f"{kind}/batch-{number // (PER_FOLDER * len(TYPES)):03d}"
        os.makedirs(os.path.join(root, folder), exist_ok=True)
        name = f"m{number:05d}"
        with open(os.path.join(root, folder, name + ".md"), "w", encoding="utf-8") as handle:
            handle.write(memory_text(name, kind))
    git = ["git", "-C", root]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True, env=env)
    # no background `gc --auto` (it would pack while we copy); qmem repos use gc.auto=0 too
    subprocess.run([*git, "config", "gc.auto", "0"], check=True, env=env)
    subprocess.run([*git, "add", "-A"], check=True, env=env)
    subprocess.run([*git, "commit", "-q", "-m", "base"], check=True, env=env)


def prepare_qmem(root: str, env: dict[str, str], python: str) -> None:
    """init_repo, then one warm-up commit so the index is ours (steady state)."""
    code = (
        "import sys; from qmem_git.core.paths import Layout; "
        "from qmem_git.store.repo import Identity, init_repo; "
        "init_repo(Layout(sys.argv[1], sys.argv[1].rsplit('/', 1)[0], 'explicit', ''), "
        "Identity('Bench', 'bench@example.com'), 'true')"
    )
    subprocess.run([python, "-c", code, root], check=True, env=env)
    run_qmem(root, "user/warmup.md", env, python)


def run_qmem(root: str, rel: str, env: dict[str, str], python: str) -> float:
    args = [python, "-c", QMEM_DRIVER, root, rel, memory_text(rel, "user")]
    return timed(args, env)


def run_git(root: str, rel: str, env: dict[str, str]) -> float:
    path = os.path.join(root, rel)
    script = f'printf "%s" "$1" > "{path}" && git add -A && git commit -q -m "add {rel}"'
    return timed(["sh", "-c", script, "sh", memory_text(rel, "user")], env, cwd=root)


def run_dulwich(root: str, rel: str, env: dict[str, str], python: str) -> float:
    return timed([python, "-c", DULWICH_DRIVER, root, rel, memory_text(rel, "user")], env)


def timed(args: list[str], env: dict[str, str], cwd: str | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(args, check=True, env=env, cwd=cwd, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - start) * 1000


def bench_size(
    work: str, count: int, runs: int, env: dict[str, str], python: str
) -> dict[str, float]:
    base = os.path.join(work, f"base-{count}", "memory")
    build_base(base, count, env)
    roots = {}
    for variant in ("qmem", "git", "dulwich"):
        roots[variant] = os.path.join(work, f"{variant}-{count}", "memory")
        shutil.copytree(base, roots[variant], symlinks=True)
    prepare_qmem(roots["qmem"], env, python)
    times: dict[str, list[float]] = {"qmem": [], "git": [], "dulwich": [], "python": []}
    for run in range(runs):
        rel = f"user/new-{run:03d}.md"
        times["qmem"].append(run_qmem(roots["qmem"], rel, env, python))
        times["git"].append(run_git(roots["git"], rel, env))
        times["dulwich"].append(run_dulwich(roots["dulwich"], rel, env, python))
        times["python"].append(timed([python, "-c", "pass"], env))
    return {name: statistics.median(values) for name, values in times.items()}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="qmem-bench-") as work:
        env = bench_env(work)
        rows = [
            (int(size), bench_size(work, int(size), args.runs, env, python))
            for size in args.sizes.split(",")
        ]
    print(render_table(rows, args.runs))
    return 0


def bench_env(work: str) -> dict[str, str]:
    """Isolated HOME and identity so the bench never reads or writes the user's git config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "QMEM_", "QWEN_"))}
    # Installed packages have .pyc files; cache bytecode in the bench dir (never in the tree)
    # so a PYTHONDONTWRITEBYTECODE environment does not bill recompilation to every run.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(
        PYTHONPYCACHEPREFIX=os.path.join(work, "pycache"),
        HOME=work,
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.path.join(work, "gitconfig"),
        GIT_AUTHOR_NAME="Bench",
        GIT_AUTHOR_EMAIL="bench@example.com",
        GIT_COMMITTER_NAME="Bench",
        GIT_COMMITTER_EMAIL="bench@example.com",
    )
    return env


def render_table(rows: list[tuple[int, dict[str, float]]], runs: int) -> str:
    lines = [
        f"One commit, whole process, median of {runs} (ms)",
        "",
        "| files | python -c pass | qmem run_writer | git add -A && commit | dulwich porcelain "
        "| qmem / git | qmem / dulwich |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for count, t in rows:
        lines.append(
            f"| {count:,} | {t['python']:.0f} | {t['qmem']:.0f} | {t['git']:.0f} "
            f"| {t['dulwich']:.0f} | {t['qmem'] / t['git']:.2f} | {t['qmem'] / t['dulwich']:.2f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
