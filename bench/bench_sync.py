"""Sync benchmark: ``qmem-git`` processes against C git processes, same run, same histories.

Every row times one whole command as a process (interpreter start, imports, locks, the
hostile-history checks, history mtimes, MEMORY.md, packing) against the C git commands doing
the same exchange, over a local path remote. Histories are built with ``git fast-import``:
200 memories written once, then commits that edit a few of them (most memories stay as first
written, as in a year of use). Peak memory is the process's maximum resident set (wait4).

Rows: fetch 1 commit + fast-forward at several history lengths (the cost must stay flat),
clone, push of 1 commit, and a diverged sync (fetch 1, merge, push).
``BENCH_SYNC_SIZES=100,5000`` picks the history lengths (default 100,5000,10000).
"""

from __future__ import annotations

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
    return Run(elapsed, usage.ru_maxrss / 1024)


def runs(*commands: tuple[str, ...]) -> Run:
    """Several processes in a row (``git pull && git push``): summed time, highest peak."""
    done = [run(*argv) for argv in commands]
    return Run(sum(r.ms for r in done), max(r.peak_mib for r in done))


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
    ours: Run
    theirs: Run


def measure(tmp: Path, commits: int, full: bool) -> list[Row]:
    """One history length: fetch 1 + fast-forward; with ``full``, clone, push, diverged too."""
    base = tmp / f"h{commits}"
    seed = base / "seed"
    build_history(seed, commits)
    served_q, served_c = base / "q.git", base / "c.git"
    for served in (served_q, served_c):
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(served)], check=True)
    git("-C", str(seed), "push", "-q", str(served_q), "main")
    writer, reader = base / "writer" / "memory", base / "reader" / "memory"
    qmem(writer, "clone", str(served_q))  # rebuilds the imported MEMORY.md once, pushes it
    git("-C", str(writer), "push", "-q", str(served_c), "main")
    c_writer, c_reader = base / "c-writer", base / "c-reader"
    git("clone", "-q", str(served_c), str(c_writer))
    rows: list[Row] = []
    ours_clone = qmem(reader, "clone", str(served_q))
    theirs_clone = git("clone", "-q", str(served_c), str(c_reader))
    if full:
        rows.append(Row("clone", commits, ours_clone, theirs_clone))

    qmem(writer, "remember", f"Benchmark fact one lands on {commits} commits")
    c_commit(c_writer, "one")
    ours_push = qmem(writer, "sync")
    theirs_push = git("-C", str(c_writer), "push", "-q", "origin", "main")
    if full:
        rows.append(Row("push 1 commit", commits, ours_push, theirs_push))

    ours_ff = qmem(reader, "sync")
    theirs_ff = git("-C", str(c_reader), "pull", "-q", "--ff-only")
    rows.append(Row("fetch 1 commit + fast-forward", commits, ours_ff, theirs_ff))
    if not full:
        return rows

    qmem(writer, "remember", "Benchmark fact two arrives from the writer machine")
    qmem(writer, "sync")
    qmem(reader, "remember", "Benchmark fact three is written on the reader machine")
    c_commit(c_writer, "two")
    git("-C", str(c_writer), "push", "-q", "origin", "main")
    c_commit(c_reader, "three")
    ours_merge = qmem(reader, "sync")
    theirs_merge = runs(
        ("git", "-C", str(c_reader), "pull", "-q", "--no-rebase", "--no-edit"),
        ("git", "-C", str(c_reader), "push", "-q", "origin", "main"),
    )
    rows.append(Row("diverged sync (fetch 1, merge, push)", commits, ours_merge, theirs_merge))
    shutil.rmtree(base, ignore_errors=True)
    return rows


def sizes() -> list[int]:
    text = os.environ.get("BENCH_SYNC_SIZES", "")
    return [int(part) for part in text.split(",") if part.strip()] or list(DEFAULT_SIZES)


def main() -> None:
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        isolate(tmp)
        rows: list[Row] = []
        for commits in sizes():
            rows += measure(tmp, commits, full=commits >= 5000)
    print(f"## sync: whole processes, qmem-git vs C git (same run, {MEMORIES} memories)\n")
    print(
        "| operation | commits | qmem-git ms | C git ms | ratio "
        "| qmem-git peak MiB | C git peak MiB |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        ours, theirs = row.ours, row.theirs
        print(
            f"| {row.operation} | {row.commits:,} | {ours.ms:.0f} | {theirs.ms:.0f} | "
            f"{ours.ms / theirs.ms:.1f}x | {ours.peak_mib:.0f} | {theirs.peak_mib:.1f} |"
        )


if __name__ == "__main__":
    main()
