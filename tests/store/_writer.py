"""Subprocess driver: add memories through run_writer, print ``OK <path> <commit>`` after each.

Usage: python tests/store/_writer.py MEMORY_ROOT REL_PATH [REL_PATH ...]

Each path is one writing command (lock, recovery, one commit), as ``qmem-git remember`` does.
"""

from __future__ import annotations

import sys
from datetime import datetime, timezone

from qmem_git.core.changes import ChangeSet
from qmem_git.core.paths import Layout
from qmem_git.store.repo import Identity
from qmem_git.store.writer import run_writer


def memory_text(name: str) -> str:
    return f"---\nname: {name}\ndescription: written by {name}\ntype: user\n---\n\nFact {name}.\n"


def write_one(layout: Layout, rel: str) -> str | None:
    name = rel.rsplit("/", 1)[-1].removesuffix(".md")

    def plan() -> ChangeSet:
        return ChangeSet(
            op="remember", subject=f"add {name}", writes={rel: memory_text(name)}, added=1
        )

    result = run_writer(
        layout,
        plan,
        identity=Identity("Writer", "writer@example.com"),
        host="test-host",
        now=datetime.now(timezone.utc),
        lock_timeout=60.0,
    )
    return result.applied.commit


def main(argv: list[str]) -> int:
    root = argv[0]
    layout = Layout(root, root.rsplit("/", 1)[0], "explicit", "")
    for rel in argv[1:]:
        print(f"OK {rel} {write_one(layout, rel)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
