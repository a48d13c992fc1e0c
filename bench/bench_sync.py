"""Sync benchmark: push and fetch of 100 memory commits, qmem-git against C git, same run.

Both sides move the same 100 commits (each one ``remember``) between the same repositories,
over a local path and over ``git://`` (a ``git daemon`` on 127.0.0.1). qmem-git's numbers are
in-process library calls (``ops.sync.run_sync``) and include what C git does not do: the
hostile-history checks, history mtimes for the work tree, MEMORY.md and packing. C git's
include its process starts. Prints a markdown table; the ratio is qmem-git / C git.

Then one new commit each way on a 5,000-commit history (made with C git fast-import), where
what a sync reads must not grow with the history; a fast-forward still restamps every file
with its history time (ARCHITECTURE §3), which walks back to each file's last change.
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
LONG_HISTORY = 5000


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


def grow_history(repo: Path, count: int) -> None:
    """``count`` more commits on ``main`` (C git fast-import), each editing one of 300 memories."""
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "main"], check=True, capture_output=True, text=True
    ).stdout.strip()
    lines: list[bytes] = []
    for n in range(count):
        body = f"---\nname: m{n}\ndescription: memory {n}\ntype: user\n---\n\nFact {n}.\n".encode()
        message = f"edit: m{n}\n".encode()
        lines += [
            b"commit refs/heads/main",
            f"committer bench <b@x> {1_700_000_000 + n} +0000".encode(),
        ]
        lines += [f"data {len(message)}".encode(), message]
        if n == 0:
            lines.append(f"from {head}".encode())
        lines += [
            f"M 100644 inline user/m{n % 300}.md".encode(),
            f"data {len(body)}".encode(),
            body,
        ]
    subprocess.run(
        ["git", "-C", str(repo), "fast-import", "--quiet"],
        input=b"\n".join(lines) + b"\n",
        check=True,
    )
    git("-C", str(repo), "reset", "-q", "--hard")


def measure_long_history(tmp: Path) -> list[tuple[str, str, float, float]]:
    """One new commit each way on a history of ``LONG_HISTORY`` commits, over a local path."""
    served = tmp / "served-long"
    served.mkdir()
    clock = [1_800_000_000]
    seed = Machine(tmp, "seed-long", clock)
    seed.remember("Benchmark memory zero starts the long history")
    grow_history(seed.root, LONG_HISTORY)
    seed.remember("Benchmark memory two rebuilds MEMORY.md after the import")
    for name in ("q.git", "c.git"):
        git("init", "-q", "--bare", "-b", "main", str(served / name))
        git("-C", str(seed.root), "push", "-q", str(served / name), "main")
    machines = {}
    for name in ("writer", "reader"):  # clones made by C git; qmem-git adopts them
        git("clone", "-q", str(served / "q.git"), str(tmp / f"{name}-long" / "memory"))
        machines[name] = Machine(tmp, f"{name}-long", clock)
        git("clone", "-q", str(served / "c.git"), str(tmp / f"c-{name}-long"))
    writer, reader = machines["writer"], machines["reader"]
    # files C git checked out carry checkout times, not history times: the first fast-forward
    # on each side restamps them and rebuilds MEMORY.md once; settle that before timing
    writer.remember("Benchmark memory warms up the long history")
    for machine in (writer, reader, writer, reader):
        machine.sync()
    assert reader.head() == writer.head()
    writer.remember("Benchmark memory one lands on the long history")
    c_writer = tmp / "c-writer-long"
    (c_writer / "user" / "one.md").write_text(DOC_ONE)
    git("-C", str(c_writer), "add", "-A")
    git("-C", str(c_writer), "commit", "-q", "-m", "one")

    q_push = timed(writer.sync)
    c_push = timed(lambda: git("-C", str(c_writer), "push", "-q", "origin", "main"))
    c_reader = tmp / "c-reader-long"

    def c_fetch() -> None:
        git("-C", str(c_reader), "fetch", "-q", "origin")
        git("-C", str(c_reader), "merge", "-q", "--ff-only", "origin/main")

    q_pull = timed(reader.sync)
    c_pull = timed(c_fetch)
    assert reader.head() == writer.head()
    q_idle = timed(reader.sync)
    c_idle = timed(lambda: git("-C", str(c_reader), "fetch", "-q", "origin"))
    history = f"{LONG_HISTORY:,}-commit history"
    return [
        (f"push 1 commit, {history}", "path", q_push, c_push),
        (f"fetch 1 commit + fast-forward, {history}", "path", q_pull, c_pull),
        (f"sync with nothing new, {history}", "path", q_idle, c_idle),
    ]


DOC_ONE = "---\nname: one\ndescription: one\ntype: user\n---\n\nOne.\n"


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
        rows += measure_long_history(tmp)
    print(f"## sync: {COMMITS} memory commits, qmem-git vs C git (same run)\n")
    print("| operation | transport | qmem-git ms | C git ms | ratio |")
    print("|---|---|---:|---:|---:|")
    for operation, transport, ours, theirs in rows:
        shown = "local path" if transport == "path" else "git://"
        print(f"| {operation} | {shown} | {ours:.0f} | {theirs:.0f} | {ours / theirs:.2f}x |")


if __name__ == "__main__":
    main()
