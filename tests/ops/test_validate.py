"""Validation on disk: tree walk, explicit paths, symlinks, bounded reads, nothing written."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest
from helpers_git import GitRepo, gitdir

from qmem_git.core.model import MAX_FILE_BYTES
from qmem_git.ops.validate import Report, validate_paths, validate_staged, validate_tree
from qmem_git.store.workdir import render_index


def memory(kind: str = "user", name: str = "Terse", body: str = "User prefers terse.") -> str:
    return f"---\nname: {name}\ndescription: {name} memory\ntype: {kind}\n---\n\n{body}\n"


SECRET = "token ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
BAD = memory(body=SECRET)  # a credential: the kind of finding that is an error (safety)


def make_root(base: Path, files: dict[str, str | bytes] | None = None) -> Path:
    root = base / "memory"
    for folder in ("user", "feedback", "project", "reference"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    defaults: dict[str, str | bytes] = {
        "user/terse.md": memory(),
        "project/release.md": memory("project", "Release", "Freeze starts 2026-03-05."),
    }
    for rel, content in {**defaults, **(files or {})}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    (root / "MEMORY.md").write_text(render_index(str(root)).text, encoding="utf-8")
    return root


def snapshot(root: Path) -> dict[str, tuple[int, bytes | str]]:
    state: dict[str, tuple[int, bytes | str]] = {}
    for directory, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            path = Path(directory, name)
            info = path.lstat()
            content: bytes | str = (
                os.readlink(path) if path.is_symlink() else b"" if path.is_dir() else b"?"
            )
            if path.is_file() and not path.is_symlink() and info.st_size < 1 << 20:
                content = path.read_bytes()
            state[str(path.relative_to(root))] = (info.st_mtime_ns, content)
    return state


def rules(report: Report) -> set[tuple[str, str]]:
    return {(f.path, f.rule) for f in report.findings if f.severity == "error"}


def test_good_tree_passes(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    report = validate_tree(root)
    assert report.findings == ()
    assert report.files_checked == 3
    assert report.exit_code == 0


def test_findings_are_relative_to_the_root_and_sorted(tmp_path: Path) -> None:
    root = make_root(tmp_path, {"user/bad.md": BAD})
    report = validate_tree(root)
    assert rules(report) == {("user/bad.md", "secret")}
    assert report.exit_code == 1
    assert [f.path for f in report.findings] == sorted(f.path for f in report.findings)


BAD_FILES: list[tuple[str, str | bytes, str]] = [
    ("user/latin1.md", b"---\nname: caf\xe9\n---\n", "utf8"),
    ("user/nul.md", b"---\n\0\n---\n", "nul-byte"),
    ("user/con.md", memory(), "path-unsafe"),
    ("user/aux .md", memory(), "path-unsafe"),
    ("user/key.md", BAD, "secret"),
]


@pytest.mark.parametrize(("rel", "content", "rule"), BAD_FILES, ids=[c[0] for c in BAD_FILES])
def test_bad_file_in_tree(tmp_path: Path, rel: str, content: str | bytes, rule: str) -> None:
    root = make_root(tmp_path, {rel: content})
    before = snapshot(root)
    report = validate_tree(root)
    assert (rel, rule) in rules(report)
    assert snapshot(root) == before


ADVICE: list[tuple[str, str | bytes, str | None]] = [
    ("user/trunc.md", "---\nname: x\ndesc", "frontmatter-missing"),
    ("user/brace.md", '{"name": "x"}\n', "frontmatter-missing"),
    (
        "user/pwn.md",
        '---\nname: !!python/object/apply:os.system ["true"]\n---\nx\n',
        "frontmatter-yaml",
    ),
    ("user/notes.txt", "hello", None),
    ("misc/x.md", memory(), None),
    ("Pinned/x.md", memory(), None),
    ("user/MEMORY.md", memory(), None),
]


@pytest.mark.parametrize(("rel", "content", "rule"), ADVICE, ids=[c[0] for c in ADVICE])
def test_what_the_agent_accepts_is_advice_at_most(
    tmp_path: Path, rel: str, content: str | bytes, rule: str | None
) -> None:
    """Style and place are advice (Qwen Code reads such files): never an error (issue 18)."""
    root = make_root(tmp_path, {rel: content})
    (root / "MEMORY.md").write_text(render_index(str(root)).text, encoding="utf-8")
    report = validate_tree(root)
    assert report.exit_code == 0, report.findings
    found = {f.rule for f in report.findings if f.path == rel}
    assert found == ({rule} if rule else set())


def test_git_lookalike_folders_are_reported_and_dot_git_is_skipped(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    gitdir(root).mkdir()
    (gitdir(root) / "junk.md").write_text("not checked")
    (root / ".GIT").mkdir()
    (root / ".GIT" / "x.md").write_text("plain notes, no frontmatter\n")  # listed, no memory
    (root / ".gitignore").write_text("*.tmp\n")
    report = validate_tree(root)
    assert rules(report) == {(".GIT", "path-unsafe")}


def test_ten_megabyte_file_is_never_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_root(tmp_path, {"user/big.md": b"a" * (10 * 1024 * 1024)})
    reads: list[int] = []
    real_read = os.read

    def counting_read(fd: int, size: int) -> bytes:
        data = real_read(fd, size)
        reads.append(len(data))
        return data

    monkeypatch.setattr(os, "read", counting_read)
    report = validate_tree(root)
    assert ("user/big.md", "size-limit") in rules(report)
    assert max(reads) <= MAX_FILE_BYTES + 1
    assert sum(reads) < 64 * 1024  # only the small files and MEMORY.md were read


def test_symlink_inside_pointing_outside(tmp_path: Path) -> None:
    outside = tmp_path / "secret.md"
    outside.write_text(memory())
    root = make_root(tmp_path)
    (root / "user" / "link.md").symlink_to(outside)
    (root / "project" / "inner.md").symlink_to(root / "user" / "terse.md")
    (root / "reference" / "dir").symlink_to(tmp_path)
    before = snapshot(root)
    report = validate_tree(root)
    found = {f.path: f for f in report.findings if f.rule == "symlink"}
    assert set(found) == {"user/link.md", "project/inner.md"}  # a folder link is not a memory
    assert "outside the memory root" in found["user/link.md"].message
    assert "outside" not in found["project/inner.md"].message
    assert snapshot(root) == before


def test_memory_root_that_is_a_symlink(tmp_path: Path) -> None:
    real = make_root(tmp_path)
    link = tmp_path / "linked-memory"
    link.symlink_to(real)
    for report in (validate_tree(link), validate_paths(link, ["user/terse.md"])):
        assert [(f.path, f.rule) for f in report.findings] == [(str(link), "symlink")]
        assert report.exit_code == 1 and report.files_checked == 0


def test_missing_root(tmp_path: Path) -> None:
    report = validate_tree(tmp_path / "nope")
    assert [f.rule for f in report.findings] == ["file-unreadable"]


def test_fifo_is_not_opened(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    os.mkfifo(root / "user" / "pipe.md")
    report = validate_tree(root)  # would block forever if opened without O_NONBLOCK
    assert ("user/pipe.md", "path-layout") in rules(report)


def test_index_missing_stale_and_dropped(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    (root / "MEMORY.md").unlink()
    assert rules(validate_tree(root)) == {("MEMORY.md", "index-missing")}
    (root / "MEMORY.md").write_text("- [Old](user/old.md) — gone")
    assert rules(validate_tree(root)) == {("MEMORY.md", "index-stale")}
    long_name = "A rather long memory title that keeps going " * 3
    many = {f"user/m{n:03d}.md": memory(name=f"{long_name}{n}") for n in range(198)}
    root = make_root(tmp_path / "big", many)
    report = validate_tree(root)
    [finding] = [f for f in report.findings if f.rule == "index-limit"]
    assert "memories out of MEMORY.md, the part Qwen Code loads: user/m" in finding.message
    assert report.exit_code == 0  # a warning: the store is valid, the hook lets commits in


def test_case_collision(tmp_path: Path) -> None:
    root = make_root(tmp_path, {"user/Terse.md": memory(name="Other")})
    report = validate_tree(root)
    assert ("user/terse.md", "path-collision") in rules(report)


# --- explicit paths -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "rule"),
    [
        ("../x.md", "path-unsafe"),
        ("/etc/x.md", "path-unsafe"),
        (".GIT/x.md", "path-unsafe"),
        ("con.md", "path-unsafe"),
        ("user/../../x.md", "path-unsafe"),
        ("user/missing.md", "file-unreadable"),
    ],
)
def test_explicit_bad_paths_are_reported_never_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str, rule: str
) -> None:
    root = make_root(tmp_path)
    (tmp_path / "x.md").write_text(memory())
    (root / ".GIT").mkdir()
    (root / ".GIT" / "x.md").write_text(memory())
    (root / "con.md").write_text(memory())
    opened: list[str] = []
    real_open = os.open

    def tracking_open(path: str, *args: int, **kwargs: int) -> int:
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", tracking_open)
    report = validate_paths(root, [given])
    assert [(f.path, f.rule) for f in report.findings if f.severity == "error"][:1] == [
        (given, rule)
    ]
    assert opened == []


def test_explicit_symlinked_component(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.md").write_text(memory())
    (root / "reference" / "ext").symlink_to(elsewhere)
    report = validate_paths(root, ["reference/ext/x.md"])
    assert [(f.path, f.rule) for f in report.findings] == [("reference/ext/x.md", "symlink")]


def test_explicit_paths_keep_the_callers_spelling(tmp_path: Path) -> None:
    root = make_root(tmp_path, {"user/bad.md": BAD})
    report = validate_paths(root, ["memory/user/bad.md", "memory/user/terse.md"], base=tmp_path)
    assert rules(report) == {("memory/user/bad.md", "secret")}
    assert report.files_checked == 2
    absolute = str(root / "user" / "bad.md")
    assert rules(validate_paths(root, [absolute])) == {(absolute, "secret")}


def test_explicit_directory_and_root(tmp_path: Path) -> None:
    root = make_root(tmp_path, {"user/bad.md": BAD})
    assert rules(validate_paths(root, ["user"])) == {("user/bad.md", "secret")}
    (root / "MEMORY.md").write_text("stale")
    report = validate_paths(root, ["memory"], base=tmp_path)
    assert rules(report) == {
        ("memory/user/bad.md", "secret"),
        ("memory/MEMORY.md", "index-stale"),
    }


def test_explicit_memory_md_is_checked_against_the_rebuild(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    assert validate_paths(root, ["MEMORY.md"]).findings == ()
    (root / "MEMORY.md").write_text("stale")
    assert rules(validate_paths(root, ["MEMORY.md"])) == {("MEMORY.md", "index-stale")}


# --------------------------------------------------------------------------- validate --staged


def committed_store(base: Path) -> GitRepo:
    """The default tree with its MEMORY.md, committed with C git."""
    root = make_root(base)
    repo = GitRepo(root)
    repo.git("add", "-A")
    repo.git("commit", "-qm", "base")
    return repo


def test_staged_nothing_to_check_but_the_index(tmp_path: Path) -> None:
    repo = committed_store(tmp_path)
    (repo.root / "user" / "draft.md").write_text("an untracked draft, not part of a commit\n")
    report = validate_staged(repo.root)
    assert report.findings == () and report.files_checked == 1  # MEMORY.md


def test_staged_content_is_checked_not_the_work_tree(tmp_path: Path) -> None:
    repo = committed_store(tmp_path)
    bad = repo.root / "user" / "bad.md"
    bad.write_text(BAD)
    repo.git("add", "user/bad.md")
    bad.write_text(memory("user", "Fixed", "Fixed in the work tree only."))
    assert ("user/bad.md", "secret") in rules(validate_staged(repo.root))
    assert ("user/bad.md", "secret") not in rules(validate_tree(repo.root))
    repo.git("add", "user/bad.md")  # staging the fix is what clears the commit
    assert ("user/bad.md", "secret") not in rules(validate_staged(repo.root))


def test_a_valid_staged_file_passes_though_the_work_tree_is_broken(tmp_path: Path) -> None:
    repo = committed_store(tmp_path)
    path = repo.root / "user" / "terse.md"
    path.write_text(memory("user", "Terse", "User prefers very terse answers."))
    repo.git("add", "user/terse.md")
    path.write_text(BAD)
    assert ("user/terse.md", "secret") not in rules(validate_staged(repo.root))


def test_identical_staged_files_are_each_checked_under_their_own_path(tmp_path: Path) -> None:
    repo = committed_store(tmp_path)
    for rel in ("user/one.md", "user/two.md"):
        (repo.root / rel).write_text(BAD)
    repo.git("add", "user")
    found = rules(validate_staged(repo.root))
    assert {("user/one.md", "secret"), ("user/two.md", "secret")} <= found


def test_staged_symlinks_big_files_and_bad_names_are_refused_unread(tmp_path: Path) -> None:
    repo = committed_store(tmp_path)
    (repo.root / "user" / "link.md").symlink_to("/etc/passwd")
    (repo.root / "user" / "huge.md").write_text("x" * (MAX_FILE_BYTES + 1))
    (repo.root / "User").mkdir()
    (repo.root / "User" / "terse.md").write_text(memory())
    (repo.root / "notes.txt").write_text("not a memory\n")
    repo.git("add", "-A")
    found = rules(validate_staged(repo.root))
    assert ("user/link.md", "symlink") in found
    assert ("user/huge.md", "size-limit") in found
    assert {("user", "path-collision"), ("user/terse.md", "path-collision")} <= found
    assert ("notes.txt", "path-layout") not in found  # not a memory: the person's to commit


def test_memory_index_as_staged_is_checked(tmp_path: Path) -> None:
    repo = committed_store(tmp_path)
    (repo.root / "MEMORY.md").write_text("junk\n")
    repo.git("add", "MEMORY.md")
    (repo.root / "MEMORY.md").write_text(render_index(str(repo.root)).text)
    assert ("MEMORY.md", "index-stale") in rules(validate_staged(repo.root))
    repo.git("rm", "-q", "--cached", "-f", "MEMORY.md")
    assert ("MEMORY.md", "index-missing") in rules(validate_staged(repo.root))


def test_a_huge_staged_blob_is_refused_without_being_read(tmp_path: Path) -> None:
    """The index's size field can lie (0 after --cacheinfo): the blob read itself is bounded."""
    repo = committed_store(tmp_path)
    big = tmp_path / "big"
    with big.open("wb") as handle:
        for _ in range(64):
            handle.write(b"x" * (1 << 20))
    sha = repo.git("hash-object", "-w", str(big)).strip()
    repo.git("update-index", "--add", "--cacheinfo", f"100644,{sha},user/huge.md")
    tracemalloc.start()
    try:
        found = rules(validate_staged(repo.root))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert ("user/huge.md", "size-limit") in found
    assert peak < 16 << 20  # the 64 MiB blob was never inflated
