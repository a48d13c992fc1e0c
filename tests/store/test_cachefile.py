"""store.cachefile: a cache file's new version takes the place of the old one."""

from __future__ import annotations

from pathlib import Path

import pytest

from qmem_git.store.cachefile import put_in_place, read_checked, write_cache, write_checked


def test_the_new_version_replaces_the_old_one(tmp_path: Path) -> None:
    path, tmp = tmp_path / "qmem-index", tmp_path / "qmem-index.1.tmp"
    path.write_bytes(b"old")
    old_inode = path.stat().st_ino
    tmp.write_bytes(b"new")
    new_inode = tmp.stat().st_ino
    put_in_place(str(tmp), str(path))
    assert path.read_bytes() == b"new" and path.stat().st_ino == new_inode != old_inode
    assert not tmp.exists()


def test_a_first_version_needs_no_old_one(tmp_path: Path) -> None:
    path, tmp = tmp_path / "qmem-identity", tmp_path / "qmem-identity.1.tmp"
    tmp.write_bytes(b"first")
    put_in_place(str(tmp), str(path))
    assert path.read_bytes() == b"first" and sorted(p.name for p in tmp_path.iterdir()) == [
        "qmem-identity"
    ]


def test_a_checked_file_gives_its_body_back_only_while_whole(tmp_path: Path) -> None:
    path = tmp_path / "qmem-identity"
    write_checked(str(path), b"head/1\n", b"body")
    assert read_checked(str(path), b"head/1\n") == b"body"
    assert read_checked(str(path), b"head/2\n") is None  # another format or key
    data = path.read_bytes()
    path.write_bytes(data[:-1] + b"x")
    assert read_checked(str(path), b"head/1\n") is None  # damaged body
    assert read_checked(str(tmp_path / "missing"), b"head/1\n") is None


def test_a_failed_write_leaves_no_temp_file(tmp_path: Path) -> None:
    (tmp_path / "qmem-index").mkdir()  # a folder in its place: the rename fails
    with pytest.raises(OSError):
        write_cache(str(tmp_path / "qmem-index"), b"data")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["qmem-index"]
