"""store.survey: one lstat per memory file compared with an index C git wrote; forked or not."""

from __future__ import annotations

import mmap
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers_git import GitRepo, gitdir, memory_text

from qmem_git.store import gitindex, survey
from qmem_git.store.survey import TEMP_MARKER, Survey


def encoded(root: str) -> bytes:
    """The child's whole answer as it leaves it in the shared memory: both parts, each after
    its length."""
    seen = survey._scan(root)
    parts = (survey._found_part(seen), survey._compared_part(root, seen))
    return b"".join(len(part).to_bytes(survey._LENGTH, "little") + part for part in parts)


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
    return (*seen, gone, result.linked)


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
    repo.write(".hidden/dot.md", memory_text("user", "dot", "Qwen lists dot-folders too"))
    repo.write("user/nested/MEMORY.md", memory_text("user", "nested", "only the root one"))
    (repo.root / "user" / "link.md").symlink_to(repo.root / "user" / "m2.md")
    result = survey.survey(repo.path)
    new = {"user/m0.md", "project/new.md", "user/nested/MEMORY.md", ".hidden/dot.md"}
    assert result.dirty == new
    assert result.temp_files == [str(repo.root / "user" / f".m1.md{TEMP_MARKER}abc")]
    assert "user/link.md" not in result.files
    assert result.links == ["user/link.md"]  # named like a memory: never committed
    st = (repo.root / "user" / "m2.md").stat()  # but listed as Qwen reads it, through the link
    assert result.linked == {
        "user/link.md": (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)
    }
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


def fake_child(
    root: str, shared: mmap.mmap, answer: bytes | None, code: int, first: bytes = b""
) -> survey.Pending:
    """A forked child that leaves ``answer`` (raw, length words included), says ``first``
    (the word for its first part), says it is whole when ``code`` is 0, and exits ``code``;
    ``code`` -9 means it is killed instead."""
    ready, said = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        if answer is not None:
            shared[: len(answer)] = answer
        if first:
            os.write(said, first)
        if code == -9:
            os.kill(os.getpid(), signal.SIGKILL)
        if code == 0:
            os.write(said, b"!")
        os._exit(code)
    os.close(said)
    return survey.Pending(root, pid, shared, ready)


def framed(data: bytes, size: int | None = None) -> bytes:
    return (len(data) if size is None else size).to_bytes(8, "little") + data


@pytest.mark.parametrize(
    "case", ["nothing", "failed", "killed", "not ours", "cut short", "too long"]
)
def test_a_child_without_a_whole_answer_means_surveying_here(repo: GitRepo, case: str) -> None:
    """Only a child that says its answer is whole (a byte on the pipe, written after it) is
    believed; else the survey is made here."""
    whole = encoded(repo.path)
    answer, code = {
        "nothing": (None, 0),
        "failed": (whole, 1),
        "killed": (whole, -9),
        "not ours": (framed(b"garbage"), 0),
        "cut short": (whole[:-7], 0),
        "too long": (framed(whole[8:], 1 << 40), 0),
    }[case]
    shared = mmap.mmap(-1, 1 << 20)
    pending = fake_child(repo.path, shared, answer, code)
    repo.write("user/m0.md", memory_text("user", "m0", "changed since"))
    assert summary(pending.result()) == summary(survey.survey(repo.path))
    assert not pending.forked and shared.closed


def test_a_whole_answer_is_used_as_it_is(repo: GitRepo) -> None:
    """The parent decodes what the child left (not a scan of its own made later)."""
    whole = encoded(repo.path)
    shared = mmap.mmap(-1, 1 << 20)
    pending = fake_child(repo.path, shared, whole, 0)
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
    whole = encoded(repo.path)
    assert len(whole) + 8 <= survey._shared_size(repo.path) <= 2 * index_bytes + (4 << 20)


def test_the_parent_reads_the_index_the_child_compared_with(repo: GitRepo) -> None:
    """The child hands over its comparison and the offsets of the index's entries, not the
    entries: the parent's index is the file it read itself, and reads as a fresh parse."""
    whole = encoded(repo.path)
    result = survey._decode(whole, repo.path)
    fresh = gitindex.read_index(str(gitdir(repo.root)))
    assert result.index is not None and result.index.count() == fresh.count()
    for path in fresh.paths():
        found, expected = result.index.get(path), fresh.get(path)
        assert found is not None and expected is not None and found.sha == expected.sha
    assert gitindex.render_index(result.index) == gitindex.render_index(fresh)
    assert (result.index.version, result.index.head) == (fresh.version, fresh.head)
    assert (result.index.mtime_ns, result.index.stamp) == (fresh.mtime_ns, fresh.stamp)
    assert result.index.entries == fresh.entries


def test_an_index_read_before_the_child_answers_must_be_the_one_it_read(repo: GitRepo) -> None:
    """The parent's early read is used only when the child compared with that same file."""
    before = survey._parent_index(repo.path)
    repo.write("user/m0.md", memory_text("user", "m0", "staged before the child looked"))
    repo.git("add", "user/m0.md")
    whole = encoded(repo.path)
    with pytest.raises(ValueError, match="changed since"):
        survey._decode(whole, repo.path, before)
    after = survey._parent_index(repo.path)
    index = survey._decode(whole, repo.path, after).index
    assert index is not None and index.get("user/m0.md") is not None


def test_a_damaged_index_the_child_parsed_is_refused_by_the_parent(repo: GitRepo) -> None:
    """The child leaves the SHA-1 check to the parent (hashlib is ~4 ms to import, on the
    child's critical path): an index whose content no longer matches its trailer is refused,
    and the survey made here finds it unreadable."""
    path = gitdir(repo.root) / "index"
    data = bytearray(path.read_bytes())
    data[20] ^= 0xFF  # a byte of the first entry's mtime: parseable, but not what was hashed
    path.write_bytes(bytes(data))
    whole = encoded(repo.path)
    with pytest.raises(ValueError, match="damaged"):
        survey._decode(whole, repo.path)
    shared = mmap.mmap(-1, 1 << 20)
    result = fake_child(repo.path, shared, whole, 0).result()
    assert result.index is None and summary(result) == summary(survey.survey(repo.path))


def test_the_child_does_not_import_hashlib(repo: GitRepo) -> None:
    code = (
        "import sys\n"
        "from qmem_git.store import survey\n"
        f"seen = survey._scan({repo.path!r})\n"
        "survey._found_part(seen)\n"
        f"survey._compared_part({repo.path!r}, seen)\n"
        "print('hashlib' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_an_index_rewritten_since_the_child_read_it_means_surveying_here(repo: GitRepo) -> None:
    """A person's ``git add`` between the child's look and the parent's: the child's index
    is stale, so the answer is dropped and the survey made here."""
    whole = encoded(repo.path)
    shared = mmap.mmap(-1, 1 << 20)
    pending = fake_child(repo.path, shared, whole, 0)
    repo.write("user/m0.md", memory_text("user", "m0", "staged after the child looked"))
    repo.git("add", "user/m0.md")
    with pytest.raises(ValueError, match="changed since"):
        survey._decode(whole, repo.path)
    result = pending.result()
    assert summary(result) == summary(survey.survey(repo.path))
    assert result.index is not None
    staged = result.index.get("user/m0.md")
    assert staged is not None and staged.size == (repo.root / "user" / "m0.md").stat().st_size


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
    """Recovery holds them back, MEMORY.md lists them (Qwen Code reads any size)."""
    from qmem_git.core.limits import MAX_FILE_BYTES
    from qmem_git.store.recovery import _render_files

    repo.write("user/huge.md", "x" * (MAX_FILE_BYTES + 1))
    forked = survey.start(repo.path).result()
    here = survey.survey(repo.path)
    size = (repo.root / "user" / "huge.md").stat().st_size
    assert forked.files["user/huge.md"][1] == here.files["user/huge.md"][1] == size
    assert size > MAX_FILE_BYTES  # listed at any size; recovery holds it back by its content
    render = _render_files(forked.files, forked.linked)
    assert render == {r: st for r, st in forked.files.items() if r != "MEMORY.md"}
    assert "user/huge.md" in render
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


# --- the comparison with the index -----------------------------------------------------------


def seen_of(result: Survey) -> tuple[object, ...]:
    gone = None if result.gone is None else sorted(result.gone)
    return (result.files, sorted(result.dirty), gone, result.linked, result.links)


def both(repo: GitRepo) -> tuple[Survey, Survey]:
    here = survey.survey(repo.path)
    forked = survey.start(repo.path).result()
    assert seen_of(here) == seen_of(forked)
    return here, forked


def test_an_edit_that_keeps_size_and_mtime_is_still_found(repo: GitRepo) -> None:
    """The index keeps the change time too, which no one can set back."""
    path = repo.root / "user" / "m1.md"
    st = path.stat()
    path.write_text(path.read_text().replace("fact 1", "fakt 1"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    for result in both(repo):
        assert result.dirty == {"user/m1.md"}


def test_a_file_as_new_as_the_index_is_racily_clean(repo: GitRepo) -> None:
    """An edit in the same clock tick as the index write leaves the entry's stat as it was:
    git's rule applies, a file not older than the index gets hashed."""
    path = repo.root / "user" / "m2.md"
    future = time.time_ns() + 100 * 1_000_000_000
    os.utime(path, ns=(future, future))
    git_dir = str(gitdir(repo.root))
    index = gitindex.read_index(git_dir)
    index.set("user/m2.md", path.stat(), repo.git("rev-parse", "HEAD:user/m2.md").strip())
    gitindex.write_index(git_dir, index)  # its entry holds the file's stat exactly
    for result in both(repo):
        assert result.dirty == {"user/m2.md"}


def test_files_and_folders_come_and_go(repo: GitRepo) -> None:
    repo.write("user/m9.md", memory_text("user", "m9", "a new fact in a known folder"))
    repo.write("project/new.md", memory_text("project", "new", "a new folder"))
    (repo.root / "user" / "m1.md").unlink()
    here, _ = both(repo)
    assert here.dirty == {"user/m9.md", "project/new.md"} and here.gone == {"user/m1.md"}
    for number in (0, 2, 9):
        (repo.root / "user" / f"m{number}.md").unlink()
    (repo.root / "user").rmdir()  # a tracked folder gone as a whole
    here, _ = both(repo)
    assert here.gone == {"user/m0.md", "user/m1.md", "user/m2.md"}
    assert here.dirty == {"project/new.md"}


# --- the cut: the newest files a writer ranks, found by the survey --------------------------


def test_the_survey_finds_the_cut_of_the_files_memory_md_is_built_from(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MEMORY.md does not count, even as the newest; an oversized file does (Qwen lists it).
    The forked child inherits the patched count."""
    from qmem_git.core.limits import MAX_FILE_BYTES
    from qmem_git.store.recovery import _render_files

    monkeypatch.setattr(survey, "NEWEST", 2)
    repo.write("user/huge.md", "x" * (MAX_FILE_BYTES + 1))
    (repo.root / "MEMORY.md").touch()
    for number, age in enumerate((30, 20, 10, 40)):
        when = time.time() - age
        os.utime(repo.root / "user" / ("huge.md" if number == 3 else f"m{number}.md"), (when, when))
    for result in both(repo):
        render = _render_files(result.files, result.linked)
        assert sorted(render) == ["user/huge.md", "user/m0.md", "user/m1.md", "user/m2.md"]
        assert result.cut == render["user/m1.md"][0]  # the 2nd newest of the four
    (repo.root / "user" / "m0.md").unlink()
    (repo.root / "user" / "huge.md").unlink()
    assert all(result.cut is None for result in both(repo))  # no more files than the count


@pytest.mark.parametrize("whole", [True, False])
def test_the_first_part_is_taken_only_with_the_second(repo: GitRepo, whole: bool) -> None:
    """The child says when what it found on disk is written (the parent decodes it while the
    child compares), then when its comparison is: a child that dies between the two words
    means surveying here."""
    answer = encoded(repo.path)
    shared = mmap.mmap(-1, 1 << 20)
    pending = fake_child(repo.path, shared, answer, 0 if whole else 1, first=b"1")
    expected = survey._decode(answer, repo.path) if whole else None
    repo.write("user/m0.md", memory_text("user", "m0", "changed after the child looked"))
    result = pending.result()
    if expected is not None:  # the child's view, from before the edit
        assert "user/m0.md" not in result.dirty and summary(result) == summary(expected)
    else:
        assert summary(result) == summary(survey.survey(repo.path))
        assert "user/m0.md" in result.dirty
    assert not pending.forked and shared.closed
