"""Our cache files in the repository (``qmem-index``, ``qmem-identity``, the pack checks).

Each is written to a temp file and put in place, never fsynced: a cache lost in a crash only
means the slow path once. The checked ones are framed as a head (format, and what the content
is for), the CRC-32 of the body, the body; a reader gets the body back only when both match.

A file renamed over another makes ext4 (``auto_da_alloc``) write the new file's data out at
once: ~0.6 ms per MiB, paid on every write for files that need no durability. These files are
written under the writer lock only, and a reader that finds one missing takes the slow path; so
the old version is removed first and the new one renamed into the free name.
"""

from __future__ import annotations

import os


def write_cache(path: str, data: bytes) -> None:
    """Write ``path`` through a temp file; on OSError no temp file is left behind."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
        put_in_place(tmp, path)
    except OSError:
        try:  # noqa: SIM105 - contextlib is not imported on the writer's path
            os.unlink(tmp)
        except OSError:
            pass
        raise


def put_in_place(tmp: str, path: str) -> None:
    """Move the finished ``tmp`` to ``path``, removing what is there first."""
    try:  # noqa: SIM105 - contextlib is not imported on the writer's path
        os.unlink(path)
    except FileNotFoundError:
        pass
    os.replace(tmp, path)


def write_checked(path: str, head: bytes, body: bytes) -> None:
    """:func:`write_cache` of ``body`` framed with ``head`` and its CRC-32."""
    import binascii

    write_cache(path, head + binascii.crc32(body).to_bytes(4, "big") + body)


def read_checked(path: str, head: bytes) -> bytes | None:
    """The body :func:`write_checked` framed with ``head``; None when the file is missing,
    has another head, or its body is not what the CRC says."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    if not data.startswith(head):
        return None
    import binascii

    start = len(head) + 4
    body = data[start:]
    return body if binascii.crc32(body).to_bytes(4, "big") == data[len(head) : start] else None
