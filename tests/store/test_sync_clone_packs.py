"""A clone from a local remote whose objects are all packed copies its packs instead of packing
them again: the copied objects get the same checks as fetched ones, ids verified, and a
refusal leaves nothing behind. Remotes made with ``git fast-import`` (it writes one pack)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from clihelpers import qmem
from helpers_git import git_argv, gitdir
from servers import fsck_strict, git_in


def _doc(n: int) -> bytes:
    return (
        f"---\nname: m{n}\ndescription: packed memory {n}\ntype: user\n---\n\nFact {n}.\n".encode()
    )


def _remote(tmp_path: Path, extra: list[bytes]) -> Path:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    lines: list[bytes] = []
    for version in range(3):
        message = f"commit {version}\n".encode()
        lines += [
            b"commit refs/heads/main",
            f"committer t <t@x> {1_700_000_000 + version} +0000".encode(),
        ]
        lines += [f"data {len(message)}".encode(), message]
        for n in range(version, version + 3):
            body = _doc(n)
            lines += [f"M 100644 inline user/m{n}.md".encode(), f"data {len(body)}".encode(), body]
        if version == 2:
            lines += extra
    subprocess.run(
        [*git_argv(str(remote)), "-c", "fastimport.unpackLimit=0", "fast-import", "--quiet"],
        input=b"\n".join(lines) + b"\n",
        check=True,
    )
    assert not any((remote / "objects").glob("[0-9a-f][0-9a-f]/*")), "fast-import packs all"
    return remote


def test_a_clone_from_a_packed_local_remote_is_complete_and_clean(tmp_path: Path) -> None:
    remote = _remote(tmp_path, [])
    memory = tmp_path / "memory"
    result = qmem(memory, "clone", str(remote))
    assert result.code == 0, result.err
    assert sorted(p.name for p in (memory / "user").iterdir()) == [f"m{n}.md" for n in range(5)]
    stamp = int(git_in(remote, "log", "-1", "--format=%ct", "--", "user/m0.md").strip())
    assert int((memory / "user" / "m0.md").stat().st_mtime) == stamp  # history time
    assert git_in(memory, "status", "--porcelain") == ""
    fsck_strict(memory)
    # the remote's pack itself, hard-linked as git clone does, not unpacked and packed again
    theirs = {p.stat().st_ino for p in (remote / "objects" / "pack").glob("*.pack")}
    ours = {p.stat().st_ino for p in (gitdir(memory) / "objects" / "pack").glob("*.pack")}
    assert theirs & ours


def test_a_symlink_in_a_packed_local_remote_is_refused_and_nothing_is_kept(tmp_path: Path) -> None:
    target = b"../../etc/passwd"
    remote = _remote(
        tmp_path, [b"M 120000 inline user/link.md", f"data {len(target)}".encode(), target]
    )
    memory = tmp_path / "memory"
    result = qmem(memory, "clone", str(remote))
    assert result.code == 1, result.err
    assert "user/link.md" in result.err and "symlink" in result.err
    assert not (memory / "user" / "m0.md").exists()
    packs = list((gitdir(memory) / "objects" / "pack").glob("*.pack"))
    assert packs == []  # the copied packs were thrown away with the quarantine
    assert not list(gitdir(memory).glob("qmem-incoming-*"))


def test_a_folder_past_the_tree_entry_limit_is_refused(tmp_path: Path) -> None:
    from qmem_git.store.sync import MAX_TREE_ENTRIES

    blob = (
        subprocess.run(
            ["git", "hash-object", "--stdin"], input=_doc(0), capture_output=True, check=True
        )
        .stdout.decode()
        .strip()
    )
    extra = [f"M 100644 {blob} user/x{n}.md".encode() for n in range(MAX_TREE_ENTRIES + 1)]
    remote = _remote(tmp_path, extra)
    memory = tmp_path / "memory"
    result = qmem(memory, "clone", str(remote))
    assert result.code == 1, result.err
    assert f"the limit is {MAX_TREE_ENTRIES:,}" in result.err
    assert not (memory / "user" / "m0.md").exists()
    assert not list(gitdir(memory).glob("qmem-incoming-*"))


def _push_loose(tmp_path: Path, remote: Path, name: str, body: bytes, mode: str = "") -> None:
    """One commit pushed by C git: fewer than receive.unpackLimit (100) objects stay loose."""
    work = tmp_path / "c-git"
    subprocess.run(["git", "clone", "-q", str(remote), str(work)], check=True)
    path = work / "user" / name
    if mode == "symlink":
        path.symlink_to(body.decode())
    else:
        path.write_bytes(body)
    for args in (["add", "-A"], ["commit", "-q", "-m", "loose"], ["push", "-q"]):
        subprocess.run(["git", "-C", str(work), *args], check=True)
    assert any((remote / "objects").glob("[0-9a-f][0-9a-f]/*")), "C git's push left them loose"


def test_a_clone_copies_the_loose_objects_of_a_local_remote_too(tmp_path: Path) -> None:
    """A remote that took small pushes holds loose objects: they are linked and checked like
    its packs, not read whole and packed again (15 s instead of 2.5 s at 5,000 commits)."""
    remote = _remote(tmp_path, [])
    _push_loose(tmp_path, remote, "late.md", _doc(9))
    theirs = {p.stat().st_ino for p in (remote / "objects").glob("[0-9a-f][0-9a-f]/*")}
    memory = tmp_path / "memory"
    result = qmem(memory, "clone", str(remote))
    assert result.code == 0, result.err
    assert (memory / "user" / "late.md").read_bytes() == _doc(9)
    assert git_in(memory, "status", "--porcelain") == ""
    fsck_strict(memory)
    ours = {p.stat().st_ino for p in (gitdir(memory) / "objects").glob("[0-9a-f][0-9a-f]/*")}
    assert theirs and theirs <= ours  # hard links of the remote's loose objects


def test_a_symlink_in_a_loose_object_of_a_local_remote_is_refused(tmp_path: Path) -> None:
    remote = _remote(tmp_path, [])
    _push_loose(tmp_path, remote, "link.md", b"../../etc/passwd", mode="symlink")
    memory = tmp_path / "memory"
    result = qmem(memory, "clone", str(remote))
    assert result.code == 1, result.err
    assert "user/link.md" in result.err and "symlink" in result.err
    assert not list((gitdir(memory) / "objects").glob("[0-9a-f][0-9a-f]/*"))
    assert not list(gitdir(memory).glob("qmem-incoming-*"))
