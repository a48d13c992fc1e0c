"""store.gitindex against indexes C git wrote: versions 2, 3 and 4, extended flags, damage."""

from __future__ import annotations

import contextlib
import itertools
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


def lazy_and_parsed(repo: GitRepo) -> tuple[gitindex.GitIndex, gitindex.GitIndex]:
    """The same index twice: from its bytes and entry offsets (as a writer's survey hands it
    over), and parsed into a dict."""
    git_dir = str(gitdir(repo.root))
    parsed = gitindex.read_index(git_dir)
    data = (gitdir(repo.root) / "index").read_bytes()
    offsets = gitindex.entry_offsets(data)
    assert offsets is not None
    lazy = gitindex.GitIndex.from_base(
        data, offsets, parsed.version, parsed.mtime_ns, parsed.checksum
    )
    return lazy, parsed


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


def test_an_index_from_bytes_and_offsets_reads_and_writes_as_the_parsed_one(
    repo: GitRepo,
) -> None:
    repo.git("update-index", "--skip-worktree", "user/shared-prefix-03.md")  # version 3
    lazy, parsed = lazy_and_parsed(repo)
    assert lazy.version == parsed.version == 3
    for path in [*parsed.paths(), "user/none.md", "", "zzz"]:
        assert lazy.get(path) is None if parsed.get(path) is None else lazy.get(path) is not None
        found, expected = lazy.get(path), parsed.get(path)
        assert (found and vars_of(found)) == (expected and vars_of(expected))
        assert lazy.skips_worktree(path) == parsed.skips_worktree(path)
    assert lazy.skips_worktree("user/shared-prefix-03.md")
    assert gitindex.render_index(lazy) == gitindex.render_index(parsed)  # no change: same bytes
    same_ops((lazy, parsed), repo)
    assert lazy.count() == parsed.count() == len(parsed.entries)
    assert gitindex.render_index(lazy) == gitindex.render_index(parsed)
    gitindex.write_index(str(gitdir(repo.root)), lazy)
    listed = repo.git("ls-files", "-s").splitlines()
    assert [line.split("\t")[1] for line in listed][:1] == ["a-first.md"]
    assert "user/shared-prefix-05a.md" in repo.git("ls-files")
    assert "project/a.md" not in repo.git("ls-files")
    assert lazy.entries == parsed.entries  # parsed on demand, changes applied


def vars_of(entry: gitindex.IndexEntry) -> tuple[object, ...]:
    return tuple(getattr(entry, name) for name in gitindex.IndexEntry.__slots__)


def test_an_index_from_bytes_keeps_conflict_stages(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "memory")
    repo.write("user/a.md", "base\n")
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
    lazy, parsed = lazy_and_parsed(repo)
    assert {"user/a.md\x001", "user/a.md\x002", "user/a.md\x003"} <= parsed.entries.keys()
    assert lazy.get("user/a.md") is None
    for stage in "123":
        assert lazy.get(f"user/a.md\x00{stage}") is not None
    st = (repo.root / "user" / "b.md").stat()
    sha = repo.git("rev-parse", "HEAD:user/b.md").strip()
    for index in (lazy, parsed):
        index.remove("user/a.md\x002")  # one stage alone
        index.set("user/a0.md", st, sha)  # after every stage of user/a.md
    assert gitindex.render_index(lazy) == gitindex.render_index(parsed)
    for index in (lazy, parsed):
        index.set("user/a.md", st, sha)  # resolved: the other stages go, as with git add
    assert gitindex.render_index(lazy) == gitindex.render_index(parsed)
    gitindex.write_index(str(gitdir(repo.root)), lazy)
    assert repo.git("ls-files", "-u") == ""  # nothing unmerged left
    assert "user/a.md" in repo.git("ls-files", "-s", "user/a.md")
    repo.git("write-tree")  # C git accepts the index (it refuses stage 0 beside stages)


# --- reading an index a survey parsed elsewhere ------------------------------------------------


def test_entry_offsets_find_every_entry_of_indexes_git_wrote(repo: GitRepo) -> None:
    """Long names (over 0xFFF bytes) and extended flags included; version 4 has none."""
    repo.git("update-index", "--skip-worktree", "user/shared-prefix-03.md")  # version 3
    data = (gitdir(repo.root) / "index").read_bytes()
    offsets = gitindex.entry_offsets(data)
    assert offsets is not None and len(offsets) == 15  # 14 entries, then where they end
    parsed = gitindex.parse_index(data)
    pieces = [data[start:end] for start, end in itertools.pairwise(offsets)]
    assert pieces == list(parsed.entries.values())
    repo.git("update-index", "--index-version", "4")
    assert gitindex.entry_offsets((gitdir(repo.root) / "index").read_bytes()) is None
    assert gitindex.entry_offsets(data[:100] + data[-20:]) is None  # entries cut off


def test_the_unparsed_index_equals_the_parsed_one(repo: GitRepo) -> None:
    git_dir = str(gitdir(repo.root))
    index = gitindex.read_index(git_dir)
    index.head = "0" * 40
    gitindex.write_index(git_dir, index)
    checksum = (gitdir(repo.root) / "index").read_bytes()[-20:]
    lazy = gitindex.read_unparsed(git_dir, checksum)
    assert lazy is not None
    parsed = gitindex.read_index(git_dir)
    assert gitindex.render_index(lazy) == gitindex.render_index(parsed)
    assert lazy.head == parsed.head == "0" * 40 and lazy.mtime_ns == parsed.mtime_ns
    assert gitindex.read_unparsed(git_dir, b"\1" * 20) is None  # another index now
    offsets: list[int] = []
    gitindex.read_index(git_dir, offsets=offsets)  # as the survey's child hands them over
    assert offsets == gitindex.entry_offsets((gitdir(repo.root) / "index").read_bytes())
    handed = gitindex.read_unparsed(git_dir, checksum, offsets)
    assert handed is not None and gitindex.render_index(handed) == gitindex.render_index(parsed)
