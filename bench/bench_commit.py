"""Time one ``qmem-git remember``, whole process, on repos of 100 / 1,000 / 10,000 memory files.

Compares (same run, interleaved, median of N) the real CLI, ``<venv>/bin/qmem-git --memory-dir
ROOT remember TEXT`` (unique text per run, so every run commits one new memory), against C git
``git add -A && git commit -q`` and dulwich porcelain ``add`` + ``commit``, each after writing
one new file; prints a markdown table with both ratios (issue target: qmem <= 2x git and
<= 0.5x dulwich porcelain). ``python -c pass`` is the floor every Python process pays.
``qmem-git snapshot`` records one file an agent changed among them (issue 18 target: <= 3x
the same git commands); the file's time is set 10 s back, as an agent's write has settled by
the time its hook runs.

Two more processes show what any Python writer on dulwich pays before doing its own work:
``import dulwich.objects`` (its object model, the least of it a writer needs), and one ``lstat``
per memory file (the check for uncommitted changes, as ``git add -A`` makes it). ``floor / git``
is the larger of the two over git: even run side by side, as ``remember`` runs them, no
whole-process commit can beat it.

    .venv/bin/python bench/bench_commit.py [--sizes 100,1000,10000] [--runs 9]
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

# one lstat per memory file, dot-folders and symlinks skipped (as store.survey scans)
LSTAT_PASS = """
import os, sys
stack = [sys.argv[1]]
while stack:
    for entry in os.scandir(stack.pop()):
        if entry.is_dir(follow_symlinks=False):
            if entry.name[0] != ".":
                stack.append(entry.path)
        elif entry.name.endswith(".md"):
            entry.stat(follow_symlinks=False)
"""


def memory_text(name: str, kind: str) -> str:
    return f"---\nname: {name}\ndescription: bench memory {name}\ntype: {kind}\n---\n\n{name}.\n"


def remember_text(run: int) -> str:
    """A durable fact (spec §7.6 filters) that no earlier run saved, so each run commits."""
    words = ("amber", "birch", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo")
    return f"The staging cluster {words[run % len(words)]}-{run:04d} deploys from branch rel-{run}"


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


def qmem_command(cli: str, root: str, *args: str) -> list[str]:
    return [cli, "--memory-dir", root, *args]


def prepare_qmem(root: str, env: dict[str, str], cli: str) -> None:
    """The copy's repository moved beside the folder, where qmem-git keeps it, ``qmem-git
    init``, then one warm-up remember so the index is ours (steady state)."""
    os.rename(os.path.join(root, ".git"), root + ".git")
    worktree = ["config", "core.worktree", "../" + os.path.basename(root)]
    subprocess.run(["git", f"--git-dir={root}.git", *worktree], check=True, env=env)
    subprocess.run(qmem_command(cli, root, "init"), check=True, env=env, capture_output=True)
    run_qmem(root, -1, env, cli)


def run_qmem(root: str, run: int, env: dict[str, str], cli: str) -> float:
    return timed(qmem_command(cli, root, "remember", remember_text(run)), env)


def run_git(root: str, rel: str, env: dict[str, str]) -> float:
    path = os.path.join(root, rel)
    script = f'printf "%s" "$1" > "{path}" && git add -A && git commit -q -m x'
    return timed(["sh", "-c", script, "sh", memory_text(rel, "user")], env, cwd=root)


def run_snapshot(root: str, run: int, env: dict[str, str], cli: str) -> float:
    """One memory an agent rewrote (an existing file), then ``qmem-git snapshot``."""
    path = os.path.join(root, "user", "batch-000", "m00000.md")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(memory_text(f"m00000 edit {run}", "user"))
    settled = time.time() - 10
    os.utime(path, (settled, settled))
    return timed(qmem_command(cli, root, "snapshot"), env)


def run_dulwich(root: str, rel: str, env: dict[str, str], python: str) -> float:
    return timed([python, "-c", DULWICH_DRIVER, root, rel, memory_text(rel, "user")], env)


def timed(args: list[str], env: dict[str, str], cwd: str | None = None) -> float:
    start = time.perf_counter()
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{args[0]} failed ({done.returncode}): {done.stderr.strip()}")
    return elapsed


def bench_size(
    work: str, count: int, runs: int, env: dict[str, str], python: str, cli: str
) -> dict[str, float]:
    base = os.path.join(work, f"base-{count}", "memory")
    build_base(base, count, env)
    roots = {}
    for variant in ("qmem", "git", "dulwich", "snap"):
        roots[variant] = os.path.join(work, f"{variant}-{count}", "memory")
        shutil.copytree(base, roots[variant], symlinks=True)
    prepare_qmem(roots["qmem"], env, cli)
    prepare_qmem(roots["snap"], env, cli)
    names = ("qmem", "git", "dulwich", "python", "import", "lstat", "snapshot")
    times: dict[str, list[float]] = {name: [] for name in names}
    before = int(git_out(roots["qmem"], env, "rev-list", "--count", "HEAD"))
    for run in range(runs):
        rel = f"user/new-{run:03d}.md"
        times["qmem"].append(run_qmem(roots["qmem"], run, env, cli))
        times["git"].append(run_git(roots["git"], rel, env))
        times["dulwich"].append(run_dulwich(roots["dulwich"], rel, env, python))
        times["python"].append(timed([python, "-c", "pass"], env))
        times["import"].append(timed([python, "-c", "import dulwich.objects"], env))
        times["lstat"].append(timed([python, "-c", LSTAT_PASS, roots["qmem"]], env))
        times["snapshot"].append(run_snapshot(roots["snap"], run, env, cli))
    after = int(git_out(roots["qmem"], env, "rev-list", "--count", "HEAD"))
    if after - before != runs:  # every timed run must have made exactly one commit
        raise SystemExit(f"qmem made {after - before} commits in {runs} runs")
    return {name: statistics.median(values) for name, values in times.items()}


def git_out(root: str, env: dict[str, str], *args: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={root}.git", *args], check=True, env=env, capture_output=True, text=True
    ).stdout


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args(argv)
    python = sys.executable
    cli = os.path.join(os.path.dirname(python), "qmem-git")
    with tempfile.TemporaryDirectory(prefix="qmem-bench-") as work:
        env = bench_env(work)
        rows = [
            (int(size), bench_size(work, int(size), args.runs, env, python, cli))
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
        f"One `qmem-git remember` vs one commit, whole process, median of {runs} (ms)",
        "",
        "| files | python -c pass | import dulwich.objects | lstat pass | qmem-git remember "
        "| git add -A && commit | dulwich porcelain | qmem / git | qmem / dulwich | floor / git "
        "| qmem-git snapshot | snapshot / git |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for count, t in rows:
        floor = max(t["import"], t["lstat"])
        lines.append(
            f"| {count:,} | {t['python']:.0f} | {t['import']:.0f} | {t['lstat']:.0f} "
            f"| {t['qmem']:.0f} | {t['git']:.0f} | {t['dulwich']:.0f} "
            f"| {t['qmem'] / t['git']:.2f} | {t['qmem'] / t['dulwich']:.2f} "
            f"| {floor / t['git']:.2f} | {t['snapshot']:.0f} | {t['snapshot'] / t['git']:.2f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
