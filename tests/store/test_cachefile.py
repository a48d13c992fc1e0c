"""store.cachefile: a cache file's new version takes the place of the old one."""

from __future__ import annotations

from pathlib import Path

from qmem_git.store.cachefile import put_in_place


def test_the_new_version_replaces_the_old_one(tmp_path: Path) -> None:
    path, tmp = tmp_path / "qmem-stat", tmp_path / "qmem-stat.1.tmp"
    path.write_bytes(b"old")
    old_inode = path.stat().st_ino
    tmp.write_bytes(b"new")
    new_inode = tmp.stat().st_ino
    put_in_place(str(tmp), str(path))
    assert path.read_bytes() == b"new" and path.stat().st_ino == new_inode != old_inode
    assert not tmp.exists()


def test_a_first_version_needs_no_old_one(tmp_path: Path) -> None:
    path, tmp = tmp_path / "qmem-docs", tmp_path / "qmem-docs.1.tmp"
    tmp.write_bytes(b"first")
    put_in_place(str(tmp), str(path))
    assert path.read_bytes() == b"first" and sorted(p.name for p in tmp_path.iterdir()) == [
        "qmem-docs"
    ]
