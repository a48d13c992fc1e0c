"""Sync benchmark: push and fetch of 100 memory commits, qmem-git against C git, same run.

Both sides move the same 100 commits (each one ``remember``) between the same repositories,
over a local path and over ``git://`` (a ``git daemon`` on 127.0.0.1). qmem-git's numbers are
in-process library calls (``ops.sync.run_sync``) and include what C git does not do: the
hostile-history checks, history mtimes for the work tree, MEMORY.md and packing. C git's
include its process starts. Prints a markdown table; the ratio is qmem-git / C git.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from servers import GitDaemon, Machine, init_bare

COMMITS = 100


def git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True)


def timed(action) -> float:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


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
    )


def measure(tmp: Path, label: str, url_of) -> list[tuple[str, str, float, float]]:  # type: ignore[no-untyped-def]
    """One transport: (operation, transport, qmem ms, C git ms) rows."""
    served = tmp / f"served-{label}"
    served.mkdir()
    init_bare(served / "q.git")
    init_bare(served / "c.git")
    clock = [1_700_000_000]
    writer = Machine(tmp, f"writer-{label}", clock)
    reader = Machine(tmp, f"reader-{label}", clock)
    writer.remember("Benchmark memory zero starts the history")
    writer.connect(url_of("q.git"))
    git("-C", str(writer.root), "push", "-q", url_of("c.git"), "main")
    reader.clone(url_of("q.git"))
    c_reader = tmp / f"c-reader-{label}"
    git("clone", "-q", url_of("c.git"), str(c_reader))
    for n in range(COMMITS):
        writer.remember(f"Benchmark memory {n} about the {label} transport and port {9000 + n}")

    c_push = timed(lambda: git("-C", str(writer.root), "push", "-q", url_of("c.git"), "main"))
    q_push = timed(writer.sync)

    def c_fetch() -> None:
        git("-C", str(c_reader), "fetch", "-q", "origin")
        git("-C", str(c_reader), "merge", "-q", "--ff-only", "origin/main")

    c_pull = timed(c_fetch)
    q_pull = timed(reader.sync)
    assert reader.head() == writer.head()
    return [
        (f"push {COMMITS} commits", label, q_push, c_push),
        (f"fetch {COMMITS} commits + fast-forward", label, q_pull, c_pull),
    ]


def main() -> None:
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        isolate(tmp)
        rows = measure(tmp, "path", lambda repo: str(tmp / "served-path" / repo))
        daemon_root = tmp / "served-git"
        daemon_root.mkdir()
        daemon = GitDaemon(daemon_root).start()
        try:
            daemon_root.rmdir()  # measure() creates it again with the two bare repos
            rows += measure(tmp, "git", daemon.url)
        finally:
            daemon.stop()
    print(f"## sync: {COMMITS} memory commits, qmem-git vs C git (same run)\n")
    print("| operation | transport | qmem-git ms | C git ms | ratio |")
    print("|---|---|---:|---:|---:|")
    for operation, transport, ours, theirs in rows:
        shown = "local path" if transport == "path" else "git://"
        print(f"| {operation} | {shown} | {ours:.0f} | {theirs:.0f} | {ours / theirs:.2f}x |")


if __name__ == "__main__":
    main()
