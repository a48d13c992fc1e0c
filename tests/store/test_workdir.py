"""The memory work tree on disk: atomic writes and scanning (spec §5, checklist 13-15)."""

from __future__ import annotations

import contextlib
import os
import stat
import time
from pathlib import Path

import pytest

from qmem_git.core.model import MAX_FILE_BYTES
from qmem_git.store import workdir
from qmem_git.store.survey import TEMP_MARKER
from qmem_git.store.workdir import (
    TakenPaths,
    atomic_write,
    index_path,
    iter_memory_files,
    load_document,
    read_text,
    render_index,
    scan_documents,
)

BASE_NS = 1_700_000_000_000_000_000


def write_doc(
    root: Path,
    rel: str,
    mtime_s: float | None = None,
    *,
    kind: str = "user",
    name: str | None = None,
    description: str = "d",
    mtime_ns: int | None = None,
) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    title = name if name is not None else Path(rel).stem
    path.write_text(
        f"---\nname: {title}\ndescription: {description}\ntype: {kind}\n---\n\nBody of {rel}\n"
    )
    if mtime_ns is None and mtime_s is not None:
        mtime_ns = int(mtime_s * 1_000_000_000)
    if mtime_ns is not None:
        os.utime(path, ns=(mtime_ns, mtime_ns))
    return path


def rel_paths(root: Path) -> list[str]:
    return sorted(info.relative_path for info in iter_memory_files(str(root)))


# --- atomic_write ----------------------------------------------------------------------------


def test_atomic_write_content_mode_and_no_leftovers(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "dir" / "a.md"
    old_umask = os.umask(0o077)
    try:
        atomic_write(str(target), "héllo\n".encode())
    finally:
        os.umask(old_umask)
    assert target.read_bytes() == "héllo\n".encode()
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert os.listdir(target.parent) == ["a.md"]


def test_atomic_write_replaces_and_applies_mtime(tmp_path: Path) -> None:
    target = tmp_path / "a.md"
    target.write_text("old")
    atomic_write(str(target), b"new", mtime_ns=BASE_NS + 123)
    assert target.read_bytes() == b"new"
    assert target.stat().st_mtime_ns == BASE_NS + 123
    assert os.listdir(tmp_path) == ["a.md"]


def test_atomic_write_without_mtime_uses_now(tmp_path: Path) -> None:
    target = tmp_path / "a.md"
    atomic_write(str(target), b"x")
    assert abs(target.stat().st_mtime - time.time()) < 60


def test_atomic_write_failure_cleans_temp_and_keeps_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "a.md"
    target.write_text("old")

    def boom(src: str, dst: str) -> None:
        assert TEMP_MARKER in os.path.basename(src)
        assert os.path.exists(src)
        raise OSError("disk full")

    monkeypatch.setattr(workdir.os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        atomic_write(str(target), b"new")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["a.md"]


def test_atomic_write_temp_name_is_hidden_and_not_markdown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []
    real_replace = os.replace

    def spy(src: str, dst: str) -> None:
        seen.append(os.path.basename(src))
        real_replace(src, dst)

    monkeypatch.setattr(workdir.os, "replace", spy)
    atomic_write(str(tmp_path / "x.md"), b"x")
    assert len(seen) == 1
    assert seen[0].startswith(".") and not seen[0].endswith(".md")  # never scanned as a memory


def test_atomic_write_keeps_the_mode_of_the_file_it_replaces(tmp_path: Path) -> None:
    private, script = tmp_path / "settings.json", tmp_path / "run.sh"
    private.write_text("{}")
    private.chmod(0o600)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    atomic_write(str(private), b'{"a": 1}')
    atomic_write(str(script), b"#!/bin/sh\necho\n")
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    assert private.read_bytes() == b'{"a": 1}'


def test_atomic_write_mode_argument_wins(tmp_path: Path) -> None:
    fresh, existing = tmp_path / "new.bak", tmp_path / "old.md"
    existing.write_text("x")
    existing.chmod(0o600)
    atomic_write(str(fresh), b"x", mode=0o600)
    atomic_write(str(existing), b"y", mode=0o644)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600
    assert stat.S_IMODE(existing.stat().st_mode) == 0o644


def test_atomic_write_over_a_symlink_replaces_the_link_with_the_targets_mode(
    tmp_path: Path,
) -> None:
    """Callers that must keep a link resolve it first (hooksettings.write_target)."""
    target = tmp_path / "target"
    target.write_text("t")
    target.chmod(0o600)
    link = tmp_path / "link"
    link.symlink_to(target)
    atomic_write(str(link), b"new")
    assert not link.is_symlink() and link.read_bytes() == b"new"
    assert stat.S_IMODE(link.stat().st_mode) == 0o600
    assert target.read_text() == "t"


# --- iter_memory_files -----------------------------------------------------------------------


def test_iter_skips_what_is_not_a_memory_file(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    write_doc(root, "user/a.md")
    write_doc(root, "deep/er/b.md")
    write_doc(root, ".hidden-dir/c.md")
    write_doc(root, ".git/d.md")
    write_doc(root, "user/.dotfile.md")  # dot-*files* are listed (spec §5)
    (root / "MEMORY.md").write_text("- index")
    write_doc(root, "sub/MEMORY.md")
    write_doc(root, "user/notes.txt")
    write_doc(root, "user/readme.MD")
    (root / "dir.md").mkdir()
    write_doc(root, "dir.md/inner.md")  # a directory named *.md is not a file, but is walked
    big = root / "user" / "big.md"
    big.write_text("---\ntype: user\n---\n" + "x" * MAX_FILE_BYTES)
    limit = root / "user" / "limit.md"
    limit.write_bytes(b"x" * MAX_FILE_BYTES)
    os.symlink(root / "user" / "a.md", root / "user" / "link.md")
    outside = tmp_path / "outside"
    write_doc(outside, "o.md")
    os.symlink(outside, root / "linked-dir")
    os.mkfifo(root / "user" / "fifo.md")
    assert rel_paths(root) == [  # what Qwen Code 0.24 lists (docs/real-clients.md)
        ".git/d.md",
        ".hidden-dir/c.md",
        "deep/er/b.md",
        "dir.md/inner.md",
        "linked-dir/o.md",
        "user/.dotfile.md",
        "user/a.md",
        "user/big.md",
        "user/limit.md",
        "user/link.md",
    ]


def test_memory_paths_is_the_writers_rule_everywhere(tmp_path: Path) -> None:
    """walk.memory_paths / is_versioned_path agree with the survey, recovery and ChangeSet rules.

    Writers see oversized files too (they hold them back) and a MEMORY.md below the root (a
    plain file to history); what MEMORY.md lists is iter's rule (is_memory_path).
    """
    from qmem_git.core.holdback import hold_reason
    from qmem_git.store import recovery, survey
    from qmem_git.store.repo import UnsafePath, check_memory_path
    from qmem_git.store.walk import is_memory_path, is_versioned_path, memory_paths

    root = tmp_path / "memory"
    write_doc(root, "user/a.md")
    write_doc(root, "user/.dotfile.md")
    write_doc(root, ".dot.md")
    write_doc(root, ".hidden-dir/c.md")
    write_doc(root, "user/.hidden/d.md")
    write_doc(root, "sub/MEMORY.md")
    (root / "MEMORY.md").write_text("- index")
    write_doc(root, "user/notes.txt")
    (root / "user" / "big.md").write_bytes(b"x" * (MAX_FILE_BYTES + 1))
    os.symlink(root / "user" / "a.md", root / "user" / "link.md")
    os.mkfifo(root / "user" / "fifo.md")
    expected = [
        ".dot.md",
        ".hidden-dir/c.md",
        "sub/MEMORY.md",
        "user/.dotfile.md",
        "user/.hidden/d.md",
        "user/a.md",
        "user/big.md",
    ]
    assert memory_paths(str(root)) == expected
    assert memory_paths(str(tmp_path / "missing")) == []
    listed = [p for p in expected if p != "sub/MEMORY.md"] + ["user/link.md"]  # Qwen's listing
    assert rel_paths(root) == sorted(listed)
    assert sorted(set(survey.survey(str(root)).files) - {"MEMORY.md"}) == expected
    candidates = [*expected, "MEMORY.md", ".git/c.md", "user/.git/d.md"]
    for rel in candidates:
        if ".git/" in rel:  # versioned, but never committed: held back as an unsafe path
            assert is_versioned_path(rel) and hold_reason(rel, b"x") is not None, rel
            continue
        assert is_versioned_path(rel) == (rel in expected) == recovery.is_versioned_path(rel), rel
        assert is_memory_path(rel) == (rel in expected and rel != "sub/MEMORY.md"), rel
        try:
            accepted = check_memory_path(rel) == rel
        except UnsafePath:
            accepted = False
        assert accepted == (rel in expected), rel
    assert not is_memory_path("user/notes.txt")


def test_iter_reports_size_and_mtime(tmp_path: Path) -> None:
    path = write_doc(tmp_path, "user/a.md", mtime_ns=BASE_NS + 5)
    [info] = list(iter_memory_files(str(tmp_path)))
    assert info.path == str(path)
    assert (info.mtime_ns, info.size, info.filename) == (BASE_NS + 5, path.stat().st_size, "a.md")


def test_iter_missing_root_and_file_root(tmp_path: Path) -> None:
    assert list(iter_memory_files(str(tmp_path / "missing"))) == []
    afile = tmp_path / "f.md"
    afile.write_text("x")
    assert list(iter_memory_files(str(afile))) == []


def test_iter_tolerates_file_vanishing_during_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_doc(tmp_path, "a.md")
    write_doc(tmp_path, "b.md")
    real_scandir = os.scandir

    def scandir_then_delete(path: str) -> contextlib.nullcontext[list[os.DirEntry[str]]]:
        entries = list(real_scandir(path))
        victim = os.path.join(path, "a.md")
        if os.fspath(path) == str(tmp_path) and os.path.exists(victim):  # not fixtures' scans
            os.unlink(victim)
        return contextlib.nullcontext(entries)

    monkeypatch.setattr(workdir.os, "scandir", scandir_then_delete)
    assert [info.relative_path for info in iter_memory_files(str(tmp_path))] == ["b.md"]


# --- scan_documents (§5) ---------------------------------------------------------------------


def test_13_relative_paths_use_slashes_and_index_files_never_scanned(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    write_doc(root, "reference/grafana.md", kind="reference")
    write_doc(root, "sub/MEMORY.md")
    write_doc(root, "MEMORY.md")
    docs = scan_documents(str(root))
    assert [d.relative_path for d in docs] == ["reference/grafana.md"]
    assert docs[0].filename == "grafana.md" and docs[0].type == "reference"


def test_14_newest_first_and_alphabetical_ties(tmp_path: Path) -> None:
    write_doc(tmp_path, "user/old.md", 1000)
    write_doc(tmp_path, "user/new.md", 2000)
    assert [d.relative_path for d in scan_documents(str(tmp_path))] == [
        "user/new.md",
        "user/old.md",
    ]
    write_doc(tmp_path, "user/zeta.md", 3000)
    write_doc(tmp_path, "project/alpha.md", 3000, kind="project")
    write_doc(tmp_path, "reference/beta.md", 3000, kind="reference")
    order = [d.relative_path for d in scan_documents(str(tmp_path))]
    assert order[:3] == ["project/alpha.md", "reference/beta.md", "user/zeta.md"]
    assert scan_documents(str(tmp_path))[-1].mtime_ms == 1_000_000.0


def test_same_basename_ties_break_by_relative_path(tmp_path: Path) -> None:
    for rel in ["user/x.md", "feedback/x.md", "a/b/x.md"]:
        write_doc(tmp_path, rel, 500, kind="user")
    assert [d.relative_path for d in scan_documents(str(tmp_path))] == [
        "a/b/x.md",
        "feedback/x.md",
        "user/x.md",
    ]


def test_15_250_documents_keep_the_200_newest(tmp_path: Path) -> None:
    for i in range(250):
        write_doc(tmp_path, f"user/m{i:03d}.md", 1_000_000 + i)
    docs = scan_documents(str(tmp_path))
    assert len(docs) == 200
    assert [d.relative_path for d in docs] == [f"user/m{i:03d}.md" for i in range(249, 49, -1)]


def test_invalid_files_do_not_take_a_slot(tmp_path: Path) -> None:
    for i in range(3):
        write_doc(tmp_path, f"user/ok{i}.md", 100 + i)
    (tmp_path / "user" / "bad.md").write_text("no frontmatter")
    write_doc(tmp_path, "user/misc.md", kind="misc")
    write_doc(tmp_path, "user/cap.md", kind="Project")
    (tmp_path / "user" / "latin1.md").write_bytes(b"---\ntype: user\n---\n\xff\xfe")
    for rel in ["user/bad.md", "user/misc.md", "user/cap.md", "user/latin1.md"]:
        os.utime(tmp_path / rel, ns=(BASE_NS * 2, BASE_NS * 2))  # newest, yet invalid
    docs = scan_documents(str(tmp_path), limit=2)
    assert [d.relative_path for d in docs] == ["user/ok2.md", "user/ok1.md"]


def test_nanosecond_mtimes_collapsing_to_one_float_sort_like_the_core(tmp_path: Path) -> None:
    # Two mtimes 100 ns apart that are the same float millisecond: ties break by name, exactly
    # as core.index.scan_order_key would order the resulting Documents.
    base = 1_700_000_000_123_456_700
    assert base / 1e6 == (base + 100) / 1e6
    write_doc(tmp_path, "user/b.md", mtime_ns=base + 100)
    write_doc(tmp_path, "user/a.md", mtime_ns=base)
    assert [d.relative_path for d in scan_documents(str(tmp_path), limit=1)] == ["user/a.md"]


def test_crlf_file_scans_like_lf(tmp_path: Path) -> None:
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "c.md").write_bytes(
        b"---\r\nname: C\r\ntype: user\r\n---\r\n\r\nA\r\nB\r\n"
    )
    [doc] = scan_documents(str(tmp_path))
    assert (doc.title, doc.body) == ("C", "A\nB")


def test_read_text_and_load_document(tmp_path: Path) -> None:
    assert read_text(str(tmp_path / "missing.md")) is None
    path = write_doc(tmp_path, "user/a.md", mtime_ns=BASE_NS + 1_500_000)
    [info] = list(iter_memory_files(str(tmp_path)))
    doc = load_document(info)
    assert doc is not None and doc.mtime_ms == (BASE_NS + 1_500_000) / 1e6
    path.unlink()
    assert load_document(info) is None


def test_render_index_from_disk(tmp_path: Path) -> None:
    write_doc(tmp_path, "user/terse.md", 2000, name="User Memory", description="User profile")
    write_doc(tmp_path, "reference/dash.md", 1000, kind="reference", name="Dash", description="")
    (tmp_path / "MEMORY.md").write_text("stale")
    result = render_index(str(tmp_path))
    assert result.text == (
        "- [User Memory](user/terse.md) — User profile\n- [Dash](reference/dash.md) — reference"
    )
    assert index_path(str(tmp_path)) == str(tmp_path / "MEMORY.md")


@pytest.mark.parametrize("stem", ["l" * 252, "é" * 125 + "x"])  # 255 and 251 bytes with .md
def test_a_name_near_the_file_name_limit_is_written_atomically(tmp_path: Path, stem: str) -> None:
    name = stem[: 255 - 3] + ".md" if stem.isascii() else stem + ".md"
    assert len(os.fsencode(name)) <= 255
    atomic_write(str(tmp_path / name), b"data")
    assert (tmp_path / name).read_bytes() == b"data"
    assert os.listdir(tmp_path) == [name]  # the temp file was renamed away
    prefix = workdir.temp_prefix(name)
    assert TEMP_MARKER in prefix and len(os.fsencode(prefix)) + 12 <= 255


def test_names_the_index_cannot_link_are_left_out(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    good = root / "user" / "good.md"
    good.parent.mkdir(parents=True)
    good.write_text("---\nname: good\ndescription: good one\ntype: user\n---\n\nGood.\n")
    for raw in (b"caf\xe9.md", b"a\nb.md", b"tab\tname.md"):
        with open(os.path.join(os.fsencode(root / "user"), raw), "wb") as handle:
            handle.write(good.read_bytes().replace(b"good", b"odd"))
    text = render_index(str(root)).text
    assert "user/good.md" in text and "odd" not in text
    assert [d.relative_path for d in scan_documents(str(root))] == ["user/good.md"]


def test_taken_paths_see_every_spelling_a_case_insensitive_disk_would_merge(
    tmp_path: Path,
) -> None:
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "Notes.md").write_text("x")
    (tmp_path / "user" / "caf\u00e9.md").write_text("x")  # NFC on disk
    taken = TakenPaths(str(tmp_path))
    assert taken("user/Notes.md") and taken("user/notes.md") and taken("user/NOTES.md")
    assert taken("user/cafe\u0301.md")  # the NFD spelling of the same name
    assert not taken("user/notes-2.md") and not taken("project/notes.md")


def test_a_remembered_cut_gives_what_a_fresh_ranking_gives() -> None:
    """The plan and the MEMORY.md render rank the same 10,000 files; the second reuses the
    first's cut, also after files got newer, went away or left too few readable ones."""
    from qmem_git.core.model import Document

    stats = {f"user/m{n:04d}.md": (1_000_000_000_000 + n * 7_000_000, 10) for n in range(1000)}
    unreadable: set[str] = set()

    def load(rel: str, mtime_ns: int, size: int) -> Document | None:
        if rel in unreadable:
            return None
        name = rel.rsplit("/", 1)[-1][:-3]
        return Document(
            type="user",
            relative_path=rel,
            title=name,
            description=name,
            body="body",
            mtime_ms=mtime_ns / 1_000_000,
        )

    def titles(cuts: dict[int, int] | None) -> list[str]:
        return [doc.relative_path for doc in workdir.newest_documents(stats, load, 50, cuts=cuts)]

    cuts: dict[int, int] = {}
    assert titles(cuts) == titles(None) and cuts  # first call: ranked, cut kept
    stats["user/new.md"] = (2_000_000_000_000, 10)  # newer than all
    for n in range(990, 1000):
        del stats[f"user/m{n:04d}.md"]  # some of the newest gone
    stats["user/m0003.md"] = (1_999_000_000_000, 10)  # an old one rewritten
    assert titles(cuts) == titles(None)
    unreadable.update(f"user/m{n:04d}.md" for n in range(900, 990))  # the cut's prefix falls short
    assert titles(cuts) == titles(None)
    assert len(titles(cuts)) == 50


def test_a_writer_ranks_from_the_cut_its_survey_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The survey ranked the files already: within shared_scan its cut is used as is."""
    import heapq

    from qmem_git.store import survey

    for number in range(9):
        write_doc(tmp_path, f"user/m{number}.md", mtime_ns=BASE_NS + number * 1_000_000_000)
    monkeypatch.setattr(survey, "NEWEST", 4)
    seen = survey._scan(str(tmp_path))
    cut = survey._cut(seen)
    assert cut == BASE_NS + 5 * 1_000_000_000  # the 4th newest
    expected = [doc.relative_path for doc in scan_documents(str(tmp_path), 2)]

    def no_ranking(*args: object) -> None:
        raise AssertionError("ranked again")

    monkeypatch.setattr(heapq, "nlargest", no_ranking)
    with workdir.shared_scan(str(tmp_path), dict(seen.files), {4: cut}):
        found = [doc.relative_path for doc in scan_documents(str(tmp_path), 2)]
    assert found == expected == ["user/m8.md", "user/m7.md"]


# --- a writer's documents come from, and go to, recall's document cache ----------------------


def cached_scan(root: Path, cache: Path) -> list[object]:
    """One writer's view: a scan, then the documents, within :func:`workdir.shared_scan`."""
    from qmem_git.store import survey

    with workdir.shared_scan(str(root), dict(survey._scan(str(root)).files), cache=str(cache)):
        return list(scan_documents(str(root)))


@pytest.fixture
def five(tmp_path: Path) -> Path:
    for number in range(5):
        write_doc(tmp_path / "memory", f"user/m{number}.md", mtime_ns=BASE_NS + number)
    (tmp_path / "memory" / "user" / "broken.md").write_text("no frontmatter at all\n")
    return tmp_path / "memory"


def test_the_next_writer_and_recall_use_what_a_writer_parsed(
    five: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qmem_git.store import doccache

    cache = tmp_path / "state" / doccache.CACHE_FILE
    first = cached_scan(five, cache)
    assert len(first) == 5 and cache.exists()

    def no_parsing(*args: object) -> None:
        raise AssertionError(f"parsed {args}")

    monkeypatch.setattr(doccache, "parse_entry", no_parsing)
    assert cached_scan(five, cache) == first  # the broken file is cached as no document too
    recalled = doccache.scan_cached(str(five), str(tmp_path / "state"))  # parses nothing either
    assert [doc.to_document() for doc in recalled] == first


def test_a_file_changed_since_it_was_cached_is_parsed_again(five: Path, tmp_path: Path) -> None:
    cache = tmp_path / "state" / "docs.marshal"
    cached_scan(five, cache)
    (five / "user" / "m2.md").write_text(
        "---\nname: m2\ndescription: d\ntype: user\n---\n\na new fact, longer\n"
    )
    docs = {doc.relative_path: doc for doc in cached_scan(five, cache)}  # type: ignore[attr-defined]
    assert "a new fact, longer" in docs["user/m2.md"].body


def test_a_damaged_cache_costs_a_parse_never_a_wrong_document(five: Path, tmp_path: Path) -> None:
    cache = tmp_path / "state" / "docs.marshal"
    first = cached_scan(five, cache)
    data = cache.read_bytes()
    cache.write_bytes(data[: len(data) // 2])  # cut short
    assert cached_scan(five, cache) == first
    cache.write_bytes(b"\0" * 64)
    assert cached_scan(five, cache) == first
