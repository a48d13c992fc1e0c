"""Opening a file the user named without trusting what it is.

A FIFO would block ``open`` until a writer comes (forever, in a hook), and ``/dev/zero`` or a
character device never ends: :func:`open_regular` opens without blocking and refuses anything
but a regular file; :func:`read_regular` also caps how much is read.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO


class NotRegularFile(OSError):
    """The path names a FIFO, a device, a socket or a folder."""


def open_regular(path: str) -> BinaryIO:
    """``open(path, "rb")`` for a regular file (symlinks followed); else NotRegularFile, or
    the OSError of the open."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(0, "not a regular file", path)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; a longer one raises
    NotRegularFile too (as "larger than ..."), so nothing unbounded is ever held."""
    with open_regular(path) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise NotRegularFile(0, f"larger than {limit:,} bytes", path)
    return data
