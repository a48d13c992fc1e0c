"""store.survey: one lstat per memory file compared with an index C git wrote; forked or not."""

from __future__ import annotations

import mmap
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from helpers_git import GitRepo, gitdir, memory_text

from qmem_git.store import gitindex, statrecord, survey
from qmem_git.store.survey import TEMP_MARKER, Survey


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    """Three committed memories and MEMORY.md, all older than the index (not racily clean)."""
    repo = GitRepo(tmp_path / "memory")
    for number in range(3):
        repo.write(f"user/m{number}.md", memory_text("user", f"m{number}", f"fact {number}"))
    repo.write("MEMORY.md", "# Memory index\n")
    past = time.time() - 100
    for path in repo.root.rglob("*.md"):
        os.utime(path, (past, past))
    repo.git("add", "-A")
    repo.git("commit", "-qm", "base")
    return repo


def summary(result: Survey) -> tuple[object, ...]:
    index = result.index
    packed = None if index is None else (index.entries, index.head, index.checksum)
    gone = None if result.gone is None else sorted(result.gone)
    seen = (result.files, sorted(result.temp_files), sorted(result.dirty), packed, result.links)
    return (*seen, gone, result.oversized)


def test_a_committed_tree_has_nothing_dirty(repo: GitRepo) -> None:
    result = survey.survey(repo.path)
    assert sorted(result.files) == ["MEMORY.md", "user/m0.md", "user/m1.md", "user/m2.md"]
    assert result.dirty == set() and result.temp_files == []
    assert result.index is not None and sorted(result.index.paths()) == sorted(result.files)
    st = (repo.root / "user" / "m1.md").stat()
    assert result.files["user/m1.md"] == (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)


def test_edits_new_files_and_temp_files_are_found(repo: GitRepo) -> None:
    repo.write("user/m0.md", memory_text("user", "m0", "an edited fact"))
    repo.write("project/new.md", memory_text("project", "new", "a new fact"))
    repo.write(f"user/.m1.md{TEMP_MARKER}abc", "half a write")
    repo.write(".hidden/skipped.md", memory_text("user", "skipped", "not scanned"))
    repo.write("user/nested/MEMORY.md", memory_text("user", "nested", "only the root one"))
    (repo.root / "user" / "link.md").symlink_to(repo.root / "user" / "m2.md")
    result = survey.survey(repo.path)
    assert result.dirty == {"user/m0.md", "project/new.md", "user/nested/MEMORY.md"}
    assert result.temp_files == [str(repo.root / "user" / f".m1.md{TEMP_MARKER}abc")]
    assert ".hidden/skipped.md" not in result.files and "user/link.md" not in result.files
    assert result.links == ["user/link.md"]  # named like a memory, never followed
    assert "user/nested/MEMORY.md" in result.files  # versioned as a plain file (issue 18)


def test_an_unreadable_index_makes_every_file_dirty(repo: GitRepo) -> None:
    (gitdir(repo.root) / "index").write_bytes(b"DIRC garbage")
    result = survey.survey(repo.path)
    assert result.index is None and result.dirty == set(result.files)


def test_the_forked_survey_equals_the_one_made_here(repo: GitRepo) -> None:
    repo.write("user/m0.md", memory_text("user", "m0", "an edited fact"))
    repo.write(f"user/.x.md{TEMP_MARKER}1", "leftover")
    pending = survey.start(repo.path)
    assert pending.forked == hasattr(os, "fork")
    assert summary(pending.result()) == summary(survey.survey(repo.path))


def test_no_fork_while_threads_run(repo: GitRepo) -> None:
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)
    worker.start()
    try:
        pending = survey.start(repo.path)
        assert not pending.forked
        assert summary(pending.result()) == summary(survey.survey(repo.path))
    finally:
        stop.set()
        worker.join()


def fake_child(root: str, shared: mmap.mmap, answer: bytes | None, code: int) -> survey.Pending:
    """A forked child that leaves ``answer`` (raw, length word included), says it is whole
    when ``code`` is 0, and exits ``code``; ``code`` -9 means it is killed instead."""
    ready, said = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        if answer is not None:
            shared[: len(answer)] = answer
        if code == -9:
            os.kill(os.getpid(), signal.SIGKILL)
        if code == 0:
            os.write(said, b"!")
        os._exit(code)
    os.close(said)
    return survey.Pending(root, pid, shared, None, ready)


def framed(data: bytes, size: int | None = None) -> bytes:
    return (len(data) if size is None else size).to_bytes(8, "little") + data


@pytest.mark.parametrize(
    "case", ["nothing", "failed", "killed", "not ours", "cut short", "too long"]
)
def test_a_child_without_a_whole_answer_means_surveying_here(repo: GitRepo, case: str) -> None:
    """Only a child that says its answer is whole (a byte on the pipe, written after it) is
    believed; else the survey is made here."""
    whole = survey._encoded(repo.path, survey._known(repo.path))
    answer, code = {
        "nothing": (None, 0),
        "failed": (framed(whole), 1),
        "killed": (framed(whole), -9),
        "not ours": (framed(b"garbage"), 0),
        "cut short": (framed(whole[:-7]), 0),
        "too long": (framed(whole, 1 << 40), 0),
    }[case]
    shared = mmap.mmap(-1, 1 << 20)
    pending = fake_child(repo.path, shared, answer, code)
    repo.write("user/m0.md", memory_text("user", "m0", "changed since"))
    assert summary(pending.result()) == summary(survey.survey(repo.path))
    assert not pending.forked and shared.closed


def test_a_whole_answer_is_used_as_it_is(repo: GitRepo) -> None:
    """The parent decodes what the child left (not a scan of its own made later)."""
    whole = survey._encoded(repo.path, survey._known(repo.path))
    shared = mmap.mmap(-1, 1 << 20)
    pending = fake_child(repo.path, shared, framed(whole), 0)
    repo.write("user/m0.md", memory_text("user", "m0", "changed after the child looked"))
    result = pending.result()
    assert "user/m0.md" not in result.dirty  # the child's view, from before the edit
    assert summary(result) == summary(survey._decode(whole, repo.path))


def test_an_answer_too_big_to_share_means_surveying_here(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(survey, "_shared_size", lambda root: 64)
    pending = survey.start(repo.path)
    assert pending.forked == hasattr(os, "fork")
    assert summary(pending.result()) == summary(survey.survey(repo.path))


def test_the_shared_room_follows_the_index_size(repo: GitRepo) -> None:
    """Room for the answer, not a fixed 64 MiB a small ``ulimit -v`` cannot spare."""
    index_bytes = (gitdir(repo.root) / "index").stat().st_size
    whole = survey._encoded(repo.path, survey._known(repo.path))
    assert len(whole) + 8 <= survey._shared_size(repo.path) <= 2 * index_bytes + (1 << 20)


def test_closing_an_uncollected_survey_reaps_the_child(repo: GitRepo) -> None:
    pending = survey.start(repo.path)
    pid = pending.pid
    pending.close()
    if pid is not None:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_a_failing_fork_means_surveying_here(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fork can fail (EAGAIN: the user's process limit); the write must not."""

    def no_fork() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    before = len(os.listdir("/proc/self/fd"))
    pending = survey.start(repo.path)
    assert not pending.forked and len(os.listdir("/proc/self/fd")) == before  # nothing leaked
    assert summary(pending.result()) == summary(survey.survey(repo.path))


def test_the_child_names_the_tracked_files_that_are_gone(repo: GitRepo) -> None:
    """The child works out deletions (index paths with no file), so the parent never needs
    the index's 10,000 paths as a dict; its index then finds entries in the file's bytes."""
    (repo.root / "user" / "m1.md").unlink()
    pending = survey.start(repo.path)
    result = pending.result()
    assert result.gone == {"user/m1.md"}
    assert result.index is not None and result.index.get("user/m1.md") is not None
    assert summary(result) == summary(survey.survey(repo.path))


def test_files_over_the_size_limit_are_named_for_recovery(repo: GitRepo) -> None:
    """MEMORY.md is built without them (recovery holds them back); the child lists them so
    the writer's copy of 10,000 file stamps needs no comprehension."""
    from qmem_git.core.limits import MAX_FILE_BYTES
    from qmem_git.store.recovery import _render_files

    repo.write("user/huge.md", "x" * (MAX_FILE_BYTES + 1))
    forked = survey.start(repo.path).result()
    here = survey.survey(repo.path)
    assert forked.oversized == here.oversized == ["user/huge.md"]
    render = _render_files(forked.files, forked.oversized)
    kept = {r: st for r, st in forked.files.items() if st[1] <= MAX_FILE_BYTES and r != "MEMORY.md"}
    assert render == kept and "user/huge.md" not in render
    assert "MEMORY.md" not in render and "user/m0.md" in render


def test_an_answered_child_is_reaped_without_waiting_for_its_exit(repo: GitRepo) -> None:
    """The parent goes on once the answer is whole; the exiting child is reaped later (at the
    next survey or close), never left behind as a zombie."""
    pending = survey.start(repo.path)
    pid = pending.pid
    assert pid is not None
    pending.result()
    deadline = time.monotonic() + 10
    while pid in survey._exiting and time.monotonic() < deadline:
        time.sleep(0.01)
        survey._reap_exited()
    assert pid not in survey._exiting
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


# --- the stat record: a dict comparison instead of parsing the index --------------------------


def record_of(repo: GitRepo) -> dict[str, object] | None:
    git_dir = str(gitdir(repo.root))
    record = statrecord.read(git_dir, (gitdir(repo.root) / "index").read_bytes()[-20:])
    return None if record is None else dict(statrecord.stamps_of(record))


def seen_of(result: Survey) -> tuple[object, ...]:
    """A survey without its index's entries (listing them would parse the index)."""
    gone = None if result.gone is None else sorted(result.gone)
    return (result.files, sorted(result.dirty), gone, result.oversized, result.links)


def test_a_survey_records_what_it_found_clean_so_the_next_parses_nothing(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert record_of(repo) is None  # C git wrote the index: no record yet
    first = survey.survey(repo.path)  # parses it, and records the stamps it found clean
    assert record_of(repo) == first.files and first.dirty == set()

    def no_parsing(*args: object, **kwargs: object) -> None:
        raise AssertionError("the index was parsed")

    monkeypatch.setattr(gitindex, "parse_index", no_parsing)
    monkeypatch.setattr(gitindex.GitIndex, "stat_dirty", no_parsing)
    here = survey.survey(repo.path)
    forked = survey.start(repo.path).result()  # the child inherits the patched module
    assert seen_of(here) == seen_of(forked) == seen_of(first)
    assert here.index is not None and here.index.get("user/m1.md") is not None


def test_a_child_records_an_index_another_program_wrote(repo: GitRepo) -> None:
    survey.survey(repo.path)
    repo.write("user/m3.md", memory_text("user", "m3", "fact 3"))
    repo.git("add", "user/m3.md")  # a new index, no record for it
    assert record_of(repo) is None
    result = survey.start(repo.path).result()
    assert result.dirty <= {"user/m3.md"}  # racily clean if added in the index's clock tick
    record = record_of(repo)
    assert record is not None and sorted(record) == sorted(result.files)
    assert record["user/m3.md"] == (None if result.dirty else result.files["user/m3.md"])


def test_an_edit_that_keeps_size_and_mtime_is_still_found(repo: GitRepo) -> None:
    """The record keeps the change time too, which no one can set back."""
    survey.survey(repo.path)
    path = repo.root / "user" / "m1.md"
    st = path.stat()
    path.write_text(path.read_text().replace("fact 1", "fakt 1"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    assert survey.survey(repo.path).dirty == {"user/m1.md"}
    assert survey.start(repo.path).result().dirty == {"user/m1.md"}


def test_a_recorded_file_as_new_as_the_index_is_racily_clean(repo: GitRepo) -> None:
    """An edit in the same clock tick as the index write leaves the stamp as recorded: git's
    rule still applies, a file not older than the index gets hashed."""
    path = repo.root / "user" / "m2.md"
    future = time.time_ns() + 100 * 1_000_000_000
    os.utime(path, ns=(future, future))
    git_dir = str(gitdir(repo.root))
    scan = survey._scan(repo.path, 1 << 64)
    index = gitindex.read_index(git_dir)
    index.adopt_stamps(scan.files(), set())  # recorded as clean, stamp and all
    gitindex.write_index(git_dir, index)
    assert record_of(repo) == scan.files()
    assert survey.survey(repo.path).dirty == {"user/m2.md"}
    assert survey.start(repo.path).result().dirty == {"user/m2.md"}


def test_recorded_unknowns_are_dirty_until_a_write_knows_them(repo: GitRepo) -> None:
    git_dir = str(gitdir(repo.root))
    index = gitindex.read_index(git_dir)
    index.adopt_stamps(survey._scan(repo.path, 1 << 64).files(), {"user/m0.md"})
    gitindex.write_index(git_dir, index)
    record = record_of(repo)
    assert record is not None and record["user/m0.md"] is None
    here = survey.survey(repo.path)
    assert here.dirty == {"user/m0.md"} and "user/m0.md" in here.files
    assert seen_of(survey.start(repo.path).result()) == seen_of(here)


# --- folder by folder: what a recorded folder's comparison finds ----------------------------


def recorded_repo(repo: GitRepo) -> None:
    """A record for the index as it is (the first survey makes it)."""
    survey.survey(repo.path)
    assert record_of(repo) is not None


def both(repo: GitRepo) -> tuple[Survey, Survey]:
    here = survey.survey(repo.path)
    forked = survey.start(repo.path).result()
    assert seen_of(here) == seen_of(forked)
    return here, forked


def test_a_folder_listed_in_another_order_is_compared_file_by_file(repo: GitRepo) -> None:
    """The record keeps each folder in the order it lists its files; a folder listed in
    another order (copied, rebuilt) is no cheap match, but no file in it is taken as changed."""
    recorded_repo(repo)
    git_dir = str(gitdir(repo.root))
    checksum = (gitdir(repo.root) / "index").read_bytes()[-20:]
    record = statrecord.read(git_dir, checksum)
    assert record is not None
    folders = dict(record[0])
    names = folders["user/"][0].split("\0")
    known = statrecord.folder_stamps(folders["user/"])
    names.reverse()
    flat = [number for name in names for number in known[name]]
    folders["user/"] = ("\0".join(names), statrecord.pack(flat))
    index = gitindex.read_recorded(git_dir, checksum)
    assert index is not None
    index.recorded = folders
    seen = survey._scan(repo.path, 1 << 64)
    assert survey.differences(folders, seen) == ({}, set())
    assert survey.differences(record[0], seen) == ({}, set())


def test_files_and_folders_come_and_go(repo: GitRepo) -> None:
    recorded_repo(repo)
    repo.write("user/m9.md", memory_text("user", "m9", "a new fact in a recorded folder"))
    repo.write("project/new.md", memory_text("project", "new", "a new folder"))
    (repo.root / "user" / "m1.md").unlink()
    here, _ = both(repo)
    assert here.dirty == {"user/m9.md", "project/new.md"} and here.gone == {"user/m1.md"}
    for number in (0, 2, 9):
        (repo.root / "user" / f"m{number}.md").unlink()
    (repo.root / "user").rmdir()  # a recorded folder gone as a whole
    here, _ = both(repo)
    assert here.gone == {"user/m0.md", "user/m1.md", "user/m2.md"}
    assert here.dirty == {"project/new.md"}


# --- the cut: the newest files a writer ranks, found by the survey --------------------------


def test_the_survey_finds_the_cut_of_the_files_memory_md_is_built_from(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neither MEMORY.md nor an oversized file counts, even as the newest (the forked child
    inherits the patched count)."""
    from qmem_git.core.limits import MAX_FILE_BYTES
    from qmem_git.store.recovery import _render_files

    monkeypatch.setattr(survey, "NEWEST", 2)
    repo.write("user/huge.md", "x" * (MAX_FILE_BYTES + 1))
    (repo.root / "MEMORY.md").touch()
    for number, age in enumerate((30, 20, 10)):
        when = time.time() - age
        os.utime(repo.root / "user" / f"m{number}.md", (when, when))
    for result in both(repo):
        render = _render_files(result.files, result.oversized)
        assert sorted(render) == ["user/m0.md", "user/m1.md", "user/m2.md"]
        assert result.cut == render["user/m1.md"][0]  # the 2nd newest of the three
    (repo.root / "user" / "m0.md").unlink()
    assert all(result.cut is None for result in both(repo))  # no more files than the count
