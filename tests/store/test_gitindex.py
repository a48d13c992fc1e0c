"""store.gitindex against indexes C git wrote: versions 2, 3 and 4, extended flags, damage."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

import pytest
from helpers_git import GitRepo, git_argv, gitdir, memory_text

from qmem_git.store import gitindex


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    """Paths that share long prefixes (what version 4 compresses), one over 0xFFF bytes."""
    repo = GitRepo(tmp_path / "memory")
    for number in range(12):
        repo.write(f"user/shared-prefix-{number:02d}.md", memory_text("user", f"m{number}", "x"))
    repo.write("project/a.md", memory_text("project", "a", "fact"))
    repo.git("add", "-A")
    repo.git("commit", "-qm", "base")
    # a path over 0xFFF bytes (its length does not fit the flags), in the index only: too long
    # for this file system
    blob = repo.git("rev-parse", "HEAD:project/a.md").strip()
    deep = "/".join(["d" * 200] * 21) + "/long.md"
    repo.git("update-index", "--add", "--cacheinfo", f"100644,{blob},project/{deep}")
    return repo


def entries(repo: GitRepo) -> dict[str, tuple[str, int, int]]:
    index = gitindex.read_index(str(gitdir(repo.root)))
    found = {}
    for path in index.paths():
        entry = index.get(path)
        assert entry is not None
        found[path] = (entry.sha, entry.mode, entry.size)
    return found


def ls_files(repo: GitRepo) -> str:
    return repo.git("ls-files", "-s", "--debug")


def test_version_4_reads_as_version_2_does_and_is_written_back_for_git(repo: GitRepo) -> None:
    as_v2 = entries(repo)
    repo.git("update-index", "--index-version", "4")
    assert (gitdir(repo.root) / "index").read_bytes()[4:8] == b"\0\0\0\4"
    assert entries(repo) == as_v2
    before = ls_files(repo)
    git_dir = str(gitdir(repo.root))
    gitindex.write_index(git_dir, gitindex.read_index(git_dir))  # written as version 2
    assert (gitdir(repo.root) / "index").read_bytes()[4:8] == b"\0\0\0\2"
    assert ls_files(repo) == before
    assert len([p for p in as_v2 if len(p) > 0xFFF]) == 1


def test_extended_flags_survive_and_intent_to_add_is_seen(repo: GitRepo) -> None:
    repo.write("user/draft.md", memory_text("user", "draft", "a draft"))
    repo.git("add", "-N", "user/draft.md")
    repo.git("update-index", "--skip-worktree", "project/a.md")
    for version in ("3", "4"):
        repo.git("update-index", "--index-version", version)
        git_dir = str(gitdir(repo.root))
        index = gitindex.read_index(git_dir)
        draft, kept = index.get("user/draft.md"), index.get("project/a.md")
        assert draft is not None and draft.intent_to_add
        assert kept is not None and not kept.intent_to_add
        before = repo.git("ls-files", "-t", "-s")
        gitindex.write_index(git_dir, index)
        assert repo.git("ls-files", "-t", "-s") == before  # S (skip-worktree) kept
        assert "user/draft.md" in repo.git("diff", "--name-only")  # still intent-to-add


@pytest.mark.parametrize("cut", [30, 80, 200])
def test_a_damaged_version_4_index_never_breaks_the_reader(repo: GitRepo, cut: int) -> None:
    repo.git("update-index", "--index-version", "4")
    path = gitdir(repo.root) / "index"
    data = path.read_bytes()
    body = data[:cut] + b"\xff" * 8 + data[cut + 8 : -20]
    path.write_bytes(body + b"\0" * 20)  # no checksum: only the structure can tell
    with contextlib.suppress(gitindex.IndexUnreadable):  # refused or read, never a crash
        entries(repo)


def same_ops(indexes: tuple[gitindex.GitIndex, ...], repo: GitRepo) -> None:
    st = (repo.root / "project" / "a.md").stat()
    sha = repo.git("rev-parse", "HEAD:project/a.md").strip()
    for index in indexes:
        index.set("user/shared-prefix-05a.md", st, sha)  # between two entries
        index.set("user/shared-prefix-07.md", st, sha)  # replaces one
        index.set("a-first.md", st, sha)
        index.set("zz-last.md", st, sha)
        index.remove("user/shared-prefix-09.md")
        index.remove("user/not-there.md")
        index.set("user/shared-prefix-09.md", st, sha)  # removed, then back
        index.remove("project/a.md")


def test_entries_set_and_removed_are_what_c_git_reads(repo: GitRepo) -> None:
    repo.git("update-index", "--skip-worktree", "user/shared-prefix-03.md")  # version 3
    git_dir = str(gitdir(repo.root))
    index = gitindex.read_index(git_dir)
    assert index.version == 3 and index.skips_worktree("user/shared-prefix-03.md")
    same_ops((index,), repo)
    gitindex.write_index(git_dir, index)
    listed = repo.git("ls-files", "-s").splitlines()
    assert [line.split("\t")[1] for line in listed][:1] == ["a-first.md"]
    assert "user/shared-prefix-05a.md" in repo.git("ls-files")
    assert "project/a.md" not in repo.git("ls-files")
    assert index.count() == len(listed)


def test_conflict_stages_are_kept_until_a_path_is_resolved(tmp_path: Path) -> None:
    repo = conflicted(tmp_path)
    index = gitindex.read_index(str(gitdir(repo.root)))
    assert {"user/a.md\x001", "user/a.md\x002", "user/a.md\x003"} <= index.entries.keys()
    assert index.get("user/a.md") is None
    st = (repo.root / "user" / "b.md").stat()
    sha = repo.git("rev-parse", "HEAD:user/b.md").strip()
    index.remove("user/a.md\x002")  # one stage alone
    index.set("user/a0.md", st, sha)  # after every stage of user/a.md
    index.set("user/a.md", st, sha)  # resolved: the other stages go, as with git add
    gitindex.write_index(str(gitdir(repo.root)), index)
    assert repo.git("ls-files", "-u") == ""  # nothing unmerged left
    assert "user/a.md" in repo.git("ls-files", "-s", "user/a.md")
    repo.git("write-tree")  # C git accepts the index (it refuses stage 0 beside stages)


def whole_sort_render(index: gitindex.GitIndex) -> bytes:
    """The index bytes as the writer made them before it joined its pieces: every entry
    sorted by its path bytes and stage, hashed piece by piece (the reference)."""
    import hashlib

    def key(item: tuple[str, bytes]) -> tuple[bytes, str]:
        path, _, stage = item[0].partition("\0")
        return path.encode("utf-8", "surrogateescape"), stage

    raws = [raw for _, raw in sorted(index.entries.items(), key=key)]
    digest = hashlib.sha1()
    head = gitindex._HEADER.pack(gitindex.SIGNATURE, index.version, len(raws))
    for piece in (head, *raws):
        digest.update(piece)
    return b"".join((head, *raws)) + digest.digest()


@pytest.mark.parametrize("rounds", [1, 3])
def test_the_written_index_is_the_whole_sort_byte_for_byte(repo: GitRepo, rounds: int) -> None:
    """Entries added among the ordered rest, over several writes of one index object (a
    writer's recovery, then its commit), give the bytes of a whole sort; C git reads them."""
    git_dir = str(gitdir(repo.root))
    index = gitindex.read_index(git_dir)
    st = (repo.root / "project" / "a.md").stat()
    sha = repo.git("rev-parse", "HEAD:project/a.md").strip()
    for number in range(rounds):
        same_ops((index,), repo)
        index.set(f"user/shared-prefix-{number:02d}b.md", st, sha)  # new, mid-order
        index.set(f"0-new-{number}.md", st, sha)  # new, first
        index.remove(f"user/shared-prefix-1{number}.md")
        expected = whole_sort_render(index)
        assert gitindex.render_index(index) == expected
        gitindex.write_index(git_dir, index)
        assert (Path(git_dir) / "index").read_bytes() == expected
        assert gitindex.read_index(git_dir).entries == index.entries
    listed = [line.split("\t")[1] for line in repo.git("ls-files", "-s").splitlines()]
    assert listed == sorted(listed, key=lambda p: p.encode())  # C git's order, no complaint
    assert "0-new-0.md" in listed and "user/shared-prefix-10.md" not in listed
    repo.git("ls-files", "--debug")
    repo.git("write-tree")  # C git builds a tree from it (it refuses an unordered index)


def spliced_and_parsed(git_dir: str) -> tuple[gitindex.GitIndex, gitindex.GitIndex]:
    """The index as a writer's survey gives it (the file's bytes and a parse's offsets), and
    as a plain parse gives it."""
    data = (Path(git_dir) / "index").read_bytes()
    offsets: list[int] = []
    parsed = gitindex.read_index(git_dir, offsets=offsets)
    assert parsed.stamp is not None and gitindex.checksum_holds(data)
    return gitindex.spliced_index(git_dir, data, parsed.stamp, offsets), parsed


def conflicted(tmp_path: Path) -> GitRepo:
    """A merge left ``user/a.md`` in stages 1-3 between stage-0 paths."""
    repo = GitRepo(tmp_path / "conflicted")
    repo.write("user/a.md", "base\n")
    repo.write("user/0.md", "zero\n")
    repo.git("add", "-A")
    repo.git("commit", "-qm", "base")
    repo.git("checkout", "-qb", "other")
    repo.write("user/a.md", "other\n")
    repo.git("commit", "-qam", "other")
    repo.git("checkout", "-q", "main")
    repo.write("user/a.md", "main\n")
    repo.write("user/b.md", "b\n")
    repo.git("add", "-A")
    repo.git("commit", "-qm", "main")
    subprocess.run([*git_argv(repo.root), "merge", "-q", "other"], capture_output=True)
    return repo


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("which", ["long names, version 3", "conflict stages"])
def test_a_spliced_index_reads_and_writes_as_a_parsed_one(
    repo: GitRepo, tmp_path: Path, seed: int, which: str
) -> None:
    """The same random changes to the spliced index (binary search, runs of the file's bytes)
    and to a parsed one give the same lookups, count, entries and bytes; C git reads them."""
    import random

    if which == "conflict stages":
        repo = conflicted(tmp_path)
    else:
        repo.git("update-index", "--skip-worktree", "user/shared-prefix-03.md")  # version 3
    git_dir = str(gitdir(repo.root))
    spliced, parsed = spliced_and_parsed(git_dir)
    keys = list(parsed.entries)
    pick = random.Random(seed)
    names = [*keys, "0.md", "user/a.md", "user/a0.md", "user/shared-prefix-05a.md", "zz.md"]
    st = (repo.root / "user").stat()
    for _ in range(pick.randint(0, 8)):
        key, settled, sha = pick.choice(names), pick.random() < 0.8, f"{pick.getrandbits(160):040x}"
        setting = pick.random() < 0.6 and "\0" not in key
        for index in (spliced, parsed):
            if setting:
                index.set(key, st, sha, settled=settled)
            else:
                index.remove(key)
    for key in names:
        found, expected = spliced.get(key), parsed.get(key)
        assert (found is None) == (expected is None)
        assert spliced.skips_worktree(key) == parsed.skips_worktree(key)
        if found is not None and expected is not None:
            assert (found.sha, found.mode, found.mtime_ns, found.size) == (
                expected.sha,
                expected.mode,
                expected.mtime_ns,
                expected.size,
            )
    assert spliced.count() == parsed.count() and spliced.changed == parsed.changed
    assert gitindex.render_index(spliced) == gitindex.render_index(parsed)
    gitindex.write_index(git_dir, spliced)
    assert spliced.entries == parsed.entries  # built on demand, from the same changes
    repo.git("ls-files", "-s", "--debug")
    assert int(repo.git("ls-files", "-s").count("\n")) == parsed.count()
