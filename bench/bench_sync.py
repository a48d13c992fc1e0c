"""Sync benchmark: ``qmem-git`` processes against C git processes, same run, same histories.

Every row times one whole command as a process (interpreter start, imports, locks, the
hostile-history checks, history mtimes, MEMORY.md, packing) against the C git commands doing
the same exchange, over a local path remote. Histories are built with ``git fast-import``:
200 memories written once, then commits that edit a few of them (most memories stay as first
written, as in a year of use). Peak memory is the process's maximum resident set and CPU its
user + system time with the children it waited for (wait4): on a machine other work shares,
CPU ratios move far less than wall-clock ones.

Rows: fetch 1 commit + fast-forward at several history lengths (the cost must stay flat),
clone, push of 1 commit, and a diverged sync (fetch 1, merge, push). C git clones with
``--no-local``: from a path it would otherwise only hard-link the packs and check nothing,
while ``qmem-git clone`` (which hard-links them too) checks every commit, tree and blob and
times every file from history; over ``--no-local`` C git packs, sends and indexes every
object (hashing each), as it does over any network transport.
``--sizes 100,5000`` (or ``BENCH_SYNC_SIZES``) picks the history lengths (default
100,5000,10000); ``--runs N`` measures each row N times (default 3) and keeps the fastest.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

MEMORIES = 200
HOT = 10  # the memories later commits edit
QMEM = str(Path(sys.executable).parent / "qmem-git")
DEFAULT_SIZES = (100, 5000, 10000)


@dataclass
class Run:
    ms: float
    peak_mib: float
    cpu_ms: float  # user + system, the process and the children it waited for


def run(*argv: str, cwd: Path | None = None) -> Run:
    """One process, timed, with its peak RSS (from wait4, this child only)."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = (time.perf_counter() - started) * 1000
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {err.decode()[-2000:]}")
    return Run(elapsed, usage.ru_maxrss / 1024, (usage.ru_utime + usage.ru_stime) * 1000)


def runs(*commands: tuple[str, ...]) -> Run:
    """Several processes in a row (``git pull && git push``): summed time, highest peak."""
    done = [run(*argv) for argv in commands]
    return Run(sum(r.ms for r in done), max(r.peak_mib for r in done), sum(r.cpu_ms for r in done))


def git(*args: str) -> Run:
    return run("git", *args)


def qmem(root: Path, *args: str) -> Run:
    return run(QMEM, "--memory-dir", str(root), "-q", *args)


def isolate(tmp: Path) -> None:
    home = tmp / "home"
    home.mkdir()
    os.environ.update(
        HOME=str(home),
        GIT_CONFIG_GLOBAL=str(home / ".gitconfig"),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="bench",
        GIT_AUTHOR_EMAIL="bench@example.org",
        GIT_COMMITTER_NAME="bench",
        GIT_COMMITTER_EMAIL="bench@example.org",
        QMEM_TELEMETRY="0",
        QMEM_HOST="bench",
    )
    # as installed (pip compiles bytecode): a shell that disables it would time the compiler
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    package = Path(__file__).resolve().parent.parent / "qmem_git"
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True)


def memory(n: int, version: int) -> bytes:
    return (
        f"---\nname: m{n}\ndescription: benchmark memory {n}\ntype: user\n---\n\n"
        f"Fact {n} as of revision {version}.\n"
    ).encode()


def build_history(repo: Path, commits: int) -> None:
    """``commits`` commits on ``main`` of a new repository (C git fast-import): the first writes
    every memory, the others each edit one of the first ``HOT`` memories."""
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    lines: list[bytes] = []
    for n in range(commits):
        message = f"edit: {n}\n".encode()
        committer = f"committer bench <b@x> {1_700_000_000 + n} +0000".encode()
        lines += [b"commit refs/heads/main", committer]
        lines += [f"data {len(message)}".encode(), message]
        edited = range(MEMORIES) if n == 0 else [n % HOT]
        for k in edited:
            body = memory(k, n)
            lines += [f"M 100644 inline user/m{k}.md".encode(), f"data {len(body)}".encode(), body]
    subprocess.run(
        ["git", "-C", str(repo), "fast-import", "--quiet"],
        input=b"\n".join(lines) + b"\n",
        check=True,
    )
    subprocess.run(["git", "-C", str(repo), "reset", "-q", "--hard"], check=True)


def c_commit(repo: Path, name: str) -> None:
    (repo / "user" / f"{name}.md").write_bytes(memory(500 + len(name), 0))
    git("-C", str(repo), "add", "-A")
    git("-C", str(repo), "commit", "-q", "-m", name)


@dataclass
class Row:
    operation: str
    commits: int
    ours: list[Run]
    theirs: list[Run]

    def add(self, ours: Run, theirs: Run) -> None:
        self.ours.append(ours)
        self.theirs.append(theirs)


def best(runs_: list[Run]) -> Run:
    """The fastest of the repeated runs (what the machine's other load took least from), with
    the highest peak memory seen."""
    return Run(
        min(r.ms for r in runs_), max(r.peak_mib for r in runs_), min(r.cpu_ms for r in runs_)
    )


def measure(tmp: Path, commits: int, full: bool, repeat: int) -> list[Row]:
    """One history length, each row ``repeat`` times: fetch 1 + fast-forward; with ``full``,
    clone, push and diverged sync too."""
    base = tmp / f"h{commits}"
    seed = base / "seed"
    build_history(seed, commits)
    served_q, served_c = base / "q.git", base / "c.git"
    for served in (served_q, served_c):
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(served)], check=True)
    git("-C", str(seed), "push", "-q", str(served_q), "main")
    writer = base / "writer" / "memory"
    qmem(writer, "clone", str(served_q))  # rebuilds the imported MEMORY.md once, pushes it
    git(f"--git-dir={writer}.git", "push", "-q", str(served_c), "main")
    c_writer = base / "c-writer"
    git("clone", "-q", str(served_c), str(c_writer))
    clone = Row("clone", commits, [], [])
    for n in range(repeat):
        reader, c_reader = base / f"reader{n}" / "memory", base / f"c-reader{n}"
        clone.add(
            qmem(reader, "clone", str(served_q)),
            git("clone", "-q", "--no-local", str(served_c), str(c_reader)),
        )
    reader, c_reader = base / "reader0" / "memory", base / "c-reader0"
    pushed = Row("push 1 commit", commits, [], [])
    forward = Row("fetch 1 commit + fast-forward", commits, [], [])
    diverged = Row("diverged sync (fetch 1, merge, push)", commits, [], [])
    for n in range(repeat):
        qmem(writer, "remember", f"Benchmark fact {n} lands on {commits} commits")
        c_commit(c_writer, f"one{n}")
        pushed.add(qmem(writer, "sync"), git("-C", str(c_writer), "push", "-q", "origin", "main"))
        forward.add(qmem(reader, "sync"), git("-C", str(c_reader), "pull", "-q", "--ff-only"))
    for n in range(repeat if full else 0):
        qmem(writer, "remember", f"Benchmark fact {n} arrives from the writer machine")
        qmem(writer, "sync")
        qmem(reader, "remember", f"Benchmark fact {n} is written on the reader machine")
        git("-C", str(c_writer), "pull", "-q", "--no-rebase", "--no-edit")  # the last merge
        c_commit(c_writer, f"two{n}")
        git("-C", str(c_writer), "push", "-q", "origin", "main")
        c_commit(c_reader, f"three{n}")
        theirs = runs(
            ("git", "-C", str(c_reader), "pull", "-q", "--no-rebase", "--no-edit"),
            ("git", "-C", str(c_reader), "push", "-q", "origin", "main"),
        )
        diverged.add(qmem(reader, "sync"), theirs)
    shutil.rmtree(base, ignore_errors=True)
    return [clone, pushed, forward, diverged] if full else [forward]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        default=os.environ.get("BENCH_SYNC_SIZES", ""),
        help="history lengths, comma-separated (default 100,5000,10000; clone, push and "
        "diverged rows from 5,000 commits)",
    )
    parser.add_argument(
        "--runs", type=int, default=3, help="times each row is measured; the fastest counts"
    )
    args = parser.parse_args()
    sizes = [int(part) for part in args.sizes.split(",") if part.strip()] or list(DEFAULT_SIZES)
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        isolate(tmp)
        rows: list[Row] = []
        for commits in sizes:
            rows += measure(tmp, commits, full=commits >= 5000, repeat=args.runs)
    print(
        f"## sync: whole processes, qmem-git vs C git (same run, {MEMORIES} memories, "
        f"fastest of {args.runs})\n"
    )
    print(
        "| operation | commits | qmem-git ms | C git ms | ratio "
        "| qmem-git CPU ms | C git CPU ms | CPU ratio "
        "| qmem-git peak MiB | C git peak MiB |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        ours, theirs = best(row.ours), best(row.theirs)
        print(
            f"| {row.operation} | {row.commits:,} | {ours.ms:.0f} | {theirs.ms:.0f} | "
            f"{ours.ms / theirs.ms:.1f}x | {ours.cpu_ms:.0f} | {theirs.cpu_ms:.0f} | "
            f"{ours.cpu_ms / max(theirs.cpu_ms, 1):.1f}x | "
            f"{ours.peak_mib:.0f} | {theirs.peak_mib:.1f} |"
        )


if __name__ == "__main__":
    main()
