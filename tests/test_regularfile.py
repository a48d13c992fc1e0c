"""regularfile: files named by users are opened without trusting what they are."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from qmem_git.regularfile import NotRegularFile, open_regular, read_regular


def test_a_regular_file_and_a_link_to_one_are_read(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    target.write_bytes(b"{}")
    (tmp_path / "link").symlink_to(target)
    with open_regular(str(tmp_path / "link")) as handle:
        assert handle.read() == b"{}"
    assert read_regular(str(target), 2) == b"{}"


def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(NotRegularFile, match="not a regular file"):
        open_regular(str(fifo))
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/null"])
def test_devices_and_folders_are_refused(path: str, tmp_path: Path) -> None:
    with pytest.raises(NotRegularFile):
        open_regular(path)
    with pytest.raises(NotRegularFile):
        read_regular(str(tmp_path), 10)


def test_read_regular_stops_at_its_limit(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"x" * 11)
    with pytest.raises(NotRegularFile, match="larger than 10 bytes"):
        read_regular(str(big), 10)
    with pytest.raises(FileNotFoundError):
        read_regular(str(tmp_path / "missing"), 10)
