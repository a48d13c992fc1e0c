"""store.survey: one lstat per memory file compared with an index C git wrote; forked or not."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from helpers_git import GitRepo, memory_text

from qmem_git.store import survey
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
    return result.files, sorted(result.temp_files), sorted(result.dirty), packed


def test_a_committed_tree_has_nothing_dirty(repo: GitRepo) -> None:
    result = survey.survey(repo.path)
    assert sorted(result.files) == ["MEMORY.md", "user/m0.md", "user/m1.md", "user/m2.md"]
    assert result.dirty == set() and result.temp_files == []
    assert result.index is not None and sorted(result.index.paths()) == sorted(result.files)
    st = (repo.root / "user" / "m1.md").stat()
    assert result.files["user/m1.md"] == (st.st_mtime_ns, st.st_size)


def test_edits_new_files_and_temp_files_are_found(repo: GitRepo) -> None:
    repo.write("user/m0.md", memory_text("user", "m0", "an edited fact"))
    repo.write("project/new.md", memory_text("project", "new", "a new fact"))
    repo.write(f"user/.m1.md{TEMP_MARKER}abc", "half a write")
    repo.write(".hidden/skipped.md", memory_text("user", "skipped", "not scanned"))
    repo.write("user/nested/MEMORY.md", memory_text("user", "nested", "only the root one"))
    (repo.root / "user" / "link.md").symlink_to(repo.root / "user" / "m2.md")
    result = survey.survey(repo.path)
    assert result.dirty == {"user/m0.md", "project/new.md"}
    assert result.temp_files == [str(repo.root / "user" / f".m1.md{TEMP_MARKER}abc")]
    assert ".hidden/skipped.md" not in result.files and "user/link.md" not in result.files
    assert "user/nested/MEMORY.md" not in result.files


def test_an_unreadable_index_makes_every_file_dirty(repo: GitRepo) -> None:
    (repo.root / ".git" / "index").write_bytes(b"DIRC garbage")
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


@pytest.mark.parametrize("cut", [0, 5, 20, 200, -1])
def test_a_child_that_fails_to_send_means_surveying_here(repo: GitRepo, cut: int) -> None:
    """Nothing, garbage, or a send cut short by a kill: the survey is made here instead."""
    whole = survey._MAGIC + b"garbage" if cut < 0 else survey._encoded(survey.survey(repo.path))
    read_fd, write_fd = os.pipe()
    os.write(write_fd, whole[:cut] if cut >= 0 else whole)
    os.close(write_fd)
    repo.write("user/m0.md", memory_text("user", "m0", "changed since"))
    pending = survey.Pending(repo.path, None, read_fd)
    assert summary(pending.result()) == summary(survey.survey(repo.path))


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
    assert not pending.forked and len(os.listdir("/proc/self/fd")) == before  # pipe closed
    assert summary(pending.result()) == summary(survey.survey(repo.path))
