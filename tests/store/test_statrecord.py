"""store.statrecord: the full lstat stamps written with the index, kept folder by folder."""

from __future__ import annotations

import binascii
import marshal
import os
import struct
import sys
from pathlib import Path

import pytest
from helpers_git import GitRepo, gitdir, memory_text

from qmem_git.store import gitindex, statrecord


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "memory")
    for number in range(12):
        repo.write(f"user/m{number:02d}.md", memory_text("user", f"m{number}", "x"))
    repo.write("project/a.md", memory_text("project", "a", "fact"))
    repo.write("project/deep/b.md", memory_text("project", "b", "fact"))
    repo.git("add", "-A")
    repo.git("commit", "-qm", "base")
    return repo


def git_dir(repo: GitRepo) -> str:
    return str(gitdir(repo.root))


def trailer(repo: GitRepo) -> bytes:
    return (gitdir(repo.root) / "index").read_bytes()[-20:]


def read(repo: GitRepo) -> statrecord.Record | None:
    return statrecord.read(git_dir(repo), trailer(repo))


def recorded(repo: GitRepo) -> dict[str, statrecord.Stamp | None] | None:
    record = read(repo)
    return None if record is None else statrecord.stamps_of(record)


def stamp(path: Path) -> statrecord.Stamp:
    st = path.lstat()
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)


def scanned(repo: GitRepo) -> dict[str, statrecord.Stamp]:
    return {
        path.relative_to(repo.root).as_posix(): stamp(path)
        for path in repo.root.rglob("*.md")
        if ".git" not in path.parts
    }


def recorded_index(repo: GitRepo) -> gitindex.GitIndex:
    """The index, every file known as it is on disk, written with its record."""
    index = gitindex.read_index(git_dir(repo))
    index.adopt_stamps(scanned(repo), set())
    gitindex.write_index(git_dir(repo), index)
    return index


def test_writing_the_index_records_each_file_s_full_stamp(repo: GitRepo) -> None:
    index = gitindex.read_index(git_dir(repo))
    assert index.stamps is None  # read from the file alone: nothing known
    assert recorded(repo) is None
    index.adopt_stamps({}, set())  # nothing scanned: every path known as unknown
    path = repo.root / "project" / "a.md"
    index.set("project/a.md", path.lstat(), repo.git("rev-parse", "HEAD:project/a.md").strip())
    index.remove("user/m00.md")
    gitindex.write_index(git_dir(repo), index)
    record = recorded(repo)
    assert record is not None and record == index.stamps
    assert record["project/a.md"] == stamp(path)
    assert "user/m00.md" not in record
    assert record["user/m01.md"] is None
    assert sorted(record) == sorted(gitindex.read_index(git_dir(repo)).paths())


def test_each_folder_is_kept_in_the_order_it_lists_its_files(repo: GitRepo) -> None:
    recorded_index(repo)
    record = read(repo)
    assert record is not None
    folders, unknown, _ = record
    assert sorted(folders) == ["project/", "project/deep/", "user/"] and unknown == []
    for prefix, (names, packed) in folders.items():
        listed = [n for n in os.listdir(repo.root / prefix) if n.endswith(".md")]
        assert names.split("\0") == listed
        flat = [n for name in listed for n in stamp(repo.root / prefix / name)]
        assert packed == statrecord.pack(flat)


def test_a_writer_packs_again_only_the_folders_it_changed(repo: GitRepo) -> None:
    """Written from the record read with it plus the paths changed since, the record equals
    one written from scratch; folders nothing changed in are the very objects read."""
    recorded_index(repo)
    index = gitindex.read_recorded(git_dir(repo), trailer(repo))
    assert index is not None and index.recorded is not None
    before = index.recorded
    repo.write("user/new.md", memory_text("user", "new", "fact"))
    new = repo.root / "user" / "new.md"
    index.set("user/new.md", new.lstat(), repo.git("hash-object", "-w", str(new)).strip())
    index.remove("project/deep/b.md")
    assert index.restamped == {"user/new.md", "project/deep/b.md"}
    gitindex.write_index(git_dir(repo), index)
    after = read(repo)
    assert after is not None and index.recorded == after[0] and index.restamped == set()
    assert index.recorded["project/"] is before["project/"]  # not packed again
    assert "project/deep/" not in after[0]  # its only file left the index
    assert "new.md" in after[0]["user/"][0].split("\0")
    full = gitindex.read_index(git_dir(repo))
    full.adopt_stamps(index.stamps, set())  # type: ignore[arg-type]  # no unknowns here
    gitindex.write_index(git_dir(repo), full)
    assert read(repo) == after


def test_a_record_is_void_once_another_program_writes_the_index(repo: GitRepo) -> None:
    recorded_index(repo)
    assert recorded(repo) is not None
    repo.write("user/new.md", memory_text("user", "new", "fact"))
    repo.git("add", "user/new.md")  # C git rewrites the index: a new trailer
    assert recorded(repo) is None
    assert gitindex.read_recorded(git_dir(repo), trailer(repo)) is None


@pytest.mark.parametrize("damage", ["flip", "cut", "garbage"])
def test_a_damaged_record_is_ignored(repo: GitRepo, damage: str) -> None:
    recorded_index(repo)
    path = gitdir(repo.root) / statrecord.STAT_RECORD
    data = path.read_bytes()
    path.write_bytes(
        {
            "flip": data[:-5] + bytes([data[-5] ^ 1]) + data[-4:],
            "cut": data[:-9],
            "garbage": data[:36] + b"\xff" * 40,
        }[damage]
    )
    assert recorded(repo) is None


@pytest.mark.parametrize(
    "body",
    [
        [],
        ({}, []),
        ({}, "not a list", b""),
        ({"user/": ("m00.md", b"short")}, [], b""),  # stamps for fewer files than names
        ({"user/": ("", b"")}, [], b""),  # an empty folder is never recorded
        ({"user/": ("m00.md", 32 * b"\0", "extra")}, [], b""),
        ({"user/": ["m00.md", 32 * b"\0"]}, [], b""),
        ({1: ("m00.md", 32 * b"\0")}, [], b""),
        ({}, [1], b""),
        ({}, [], b"odd"),  # not whole offsets
    ],
)
def test_a_record_of_the_wrong_shape_is_ignored(repo: GitRepo, body: object) -> None:
    """The checksum only tells the bytes are as written: what they hold is checked too."""
    recorded_index(repo)
    hand_made(repo, ({"user/": ("m00.md", 32 * b"\0")}, [], b""))
    assert read(repo) == ({"user/": ("m00.md", 32 * b"\0")}, [], b"")  # the right shape
    hand_made(repo, body)
    assert read(repo) is None


def hand_made(repo: GitRepo, body: object) -> None:
    payload = marshal.dumps(body)
    head = f"qmem-stat-2 {sys.byteorder}\n".encode() + trailer(repo)
    path = gitdir(repo.root) / statrecord.STAT_RECORD
    path.write_bytes(head + binascii.crc32(payload).to_bytes(4, "big") + payload)


def test_an_index_without_a_trailer_gets_no_record(repo: GitRepo) -> None:
    """index.skipHash: a zero trailer names no content, so it cannot key a record."""
    assert statrecord.write(git_dir(repo), b"\0" * 20, {"project/a.md": None}) is None
    assert statrecord.write(git_dir(repo), b"", {"project/a.md": None}) is None
    assert not (gitdir(repo.root) / statrecord.STAT_RECORD).exists()
    assert statrecord.read(git_dir(repo), b"\0" * 20) is None


def test_times_outside_what_the_record_packs_are_kept_as_unknown(repo: GitRepo) -> None:
    """A file dated after 2262 (past a signed 64-bit nanosecond count) is recorded as not
    known, so it never matches a scan: it only ever reads as changed, it never breaks."""
    far = 2**63 + 5_000_000_000
    with pytest.raises(struct.error):
        statrecord.pack([far, 1, 1, 1])
    path = repo.root / "project" / "a.md"
    os.utime(path, ns=(far, far))
    assert path.lstat().st_mtime_ns == far
    recorded_index(repo)
    record = recorded(repo)
    assert record is not None and record["project/a.md"] is None
    assert record["user/m01.md"] == stamp(repo.root / "user" / "m01.md")


def test_an_inode_number_past_the_signed_range_is_packed(repo: GitRepo) -> None:
    big = (1, 2, 2**64 - 3, 4)
    assert statrecord.folder_stamps(("x.md", statrecord.pack(list(big)))) == {"x.md": big}


def test_the_record_keeps_where_each_entry_of_its_index_starts(repo: GitRepo) -> None:
    """Written from a parsed index and from one spliced from the file's bytes alike."""
    recorded_index(repo)  # the index parsed entry by entry
    data = (gitdir(repo.root) / "index").read_bytes()
    record = read(repo)
    assert record is not None
    assert list(statrecord.offsets_of(record) or []) == gitindex.entry_offsets(data)
    index = gitindex.read_recorded(git_dir(repo), trailer(repo))  # spliced from the bytes
    assert index is not None
    repo.write("user/new.md", memory_text("user", "new", "fact"))
    new = repo.root / "user" / "new.md"
    index.set("user/new.md", new.lstat(), repo.git("hash-object", "-w", str(new)).strip())
    index.remove("project/a.md")
    gitindex.write_index(git_dir(repo), index)
    data = (gitdir(repo.root) / "index").read_bytes()
    record = read(repo)
    assert record is not None
    assert list(statrecord.offsets_of(record) or []) == gitindex.entry_offsets(data)
    assert repo.git("ls-files").split() == sorted(
        [*(f"user/m{n:02d}.md" for n in range(12)), "user/new.md", "project/deep/b.md"]
    )


def test_offsets_that_do_not_fit_the_index_are_not_used(repo: GitRepo) -> None:
    recorded_index(repo)
    record = read(repo)
    assert record is not None
    folders, unknown, _ = record
    index = gitindex.read_index(git_dir(repo))
    index.adopt_stamps(scanned(repo), set())
    gitindex.write_index(git_dir(repo), index)  # the same index: the same trailer
    statrecord.write(git_dir(repo), trailer(repo), index.stamps or {}, offsets=[12, 13])
    lazy = gitindex.read_recorded(git_dir(repo), trailer(repo))
    assert lazy is not None and lazy.get("user/m03.md") is not None
    assert gitindex.render_index(lazy) == (gitdir(repo.root) / "index").read_bytes()
    assert (folders, unknown) == read(repo)[:2]  # type: ignore[index]
