"""Putting a new version of one of our cache files (``.git/qmem-*``) in place.

A file renamed over another makes ext4 (``auto_da_alloc``) write the new file's data out at
once: ~0.6 ms per MiB, paid on every write for files that need no durability. Our cache files
are checked when read (a CRC, the index trailer they are keyed by), written under the writer
lock only, and a reader that finds one missing takes the slow path; so the old version is
removed first and the new one renamed into the free name.
"""

from __future__ import annotations

import os


def put_in_place(tmp: str, path: str) -> None:
    """Move the finished ``tmp`` to ``path``, removing what is there first."""
    try:  # noqa: SIM105 - contextlib is not imported on the writer's path
        os.unlink(path)
    except FileNotFoundError:
        pass
    os.replace(tmp, path)
