"""store.writer: lock, recover, plan, commit; the forked survey must change nothing but speed."""

from __future__ import annotations

import os
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from helpers_git import git_argv

from qmem_git.core.changes import ChangeSet
from qmem_git.core.paths import Layout
from qmem_git.errors import QmemError, RepoLocked
from qmem_git.store import locks, workdir
from qmem_git.store.repo import Identity, apply_changeset, init_repo
from qmem_git.store.workdir import render_index
from qmem_git.store.writer import WriterStart, run_writer

IDENTITY = Identity("Test Writer", "writer@example.com")
NOW = datetime(2026, 4, 1, 8, 0, 0, tzinfo=timezone.utc)
LATER = NOW + timedelta(hours=1)
TENURE = "qmem-writer"  # in the repository


def doc(name: str, body: str = "") -> str:
    return f"---\nname: {name}\ndescription: about {name}\ntype: user\n---\n\n{body or name}\n"


def make_layout(base: Path) -> Layout:
    lay = Layout(str(base / "memory"), str(base), "explicit", "")
    init_repo(lay, "true")
    writes = {f"user/m{i}.md": doc(f"m{i}") for i in range(5)}
    apply_changeset(
        lay, ChangeSet("remember", "base", writes=writes), identity=IDENTITY, host="h", now=NOW
    )
    return lay


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    return make_layout(tmp_path / "state")


def add(name: str) -> ChangeSet:
    return ChangeSet(op="remember", subject=name, writes={f"user/{name}.md": doc(name)})


def assert_clean(root: str) -> None:
    status = subprocess.run(
        [*git_argv(root), "status", "--porcelain"], capture_output=True, text=True, check=True
    )
    assert status.stdout == ""
    subprocess.run([*git_argv(root), "fsck", "--strict"], capture_output=True, check=True)


def test_run_writer_plans_under_the_lock(layout: Layout) -> None:
    seen: list[bool] = []

    def plan() -> ChangeSet:
        seen.append(os.path.exists(os.path.join(layout.git_dir, TENURE)))
        return add("x")

    result = run_writer(layout, plan, identity=IDENTITY, host="h", now=LATER)
    assert seen == [True] and result.applied.commit
    assert not os.path.exists(os.path.join(layout.git_dir, TENURE))


def test_run_writer_needs_a_repo(tmp_path: Path) -> None:
    lay = Layout(str(tmp_path / "m"), str(tmp_path), "explicit", "")
    with pytest.raises(QmemError, match="init"):
        run_writer(lay, lambda: ChangeSet("remember", "x"), identity=IDENTITY, host="h", now=NOW)


def test_the_plan_reuses_the_writers_scan(layout: Layout, monkeypatch: pytest.MonkeyPatch) -> None:
    """plan + MEMORY.md render inside run_writer cost no second walk of the work tree."""
    seen: list[int] = []

    def no_walk(root: str) -> object:
        raise AssertionError("walked the work tree again")

    def plan() -> ChangeSet:
        seen.append(len(workdir.scan_documents(layout.memory_root)))
        return add("x")

    monkeypatch.setattr(workdir, "iter_memory_files", no_walk)
    result = run_writer(layout, plan, identity=IDENTITY, host="h", now=LATER)
    monkeypatch.undo()
    assert seen == [5] and result.applied.commit
    memory_md = Path(layout.memory_root, "MEMORY.md").read_text()
    assert memory_md == render_index(layout.memory_root).text
    assert_clean(layout.memory_root)


@pytest.mark.parametrize("hand_edit", [False, True])
def test_the_forked_survey_makes_the_same_commits(tmp_path: Path, hand_edit: bool) -> None:
    """Two identical stores, one writer each way: the same commit ids (recover included)."""
    heads = []
    for overlap in (False, True):
        lay = make_layout(tmp_path / str(overlap))
        if hand_edit:
            path = Path(lay.memory_root, "user", "m1.md")
            path.write_text(doc("m1", "edited by hand"))
            os.utime(path, ns=(int(NOW.timestamp()) * 10**9,) * 2)
        with WriterStart(lay, 10, overlap=overlap) as started:
            result = run_writer(
                lay, lambda: add("x"), identity=IDENTITY, host="h", now=LATER, started=started
            )
        with WriterStart(lay, 10, overlap=overlap) as started:
            again = run_writer(
                lay, lambda: add("y"), identity=IDENTITY, host="h", now=LATER, started=started
            )
        assert bool(result.recovery.commit) == hand_edit
        assert again.applied.commit and again.recovery.commit is None
        assert_clean(lay.memory_root)
        heads.append((result.recovery.commit, again.applied.commit))
    assert heads[0] == heads[1]


def test_a_started_writer_holds_the_lock_until_it_is_left(layout: Layout) -> None:
    """WriterStart takes the lock and tenure on entry, keeps them through run_writer, frees them."""
    calls: list[str] = []
    tenure = os.path.join(layout.git_dir, TENURE)

    def identity() -> Identity:
        calls.append("identity")
        return IDENTITY

    def plan() -> ChangeSet:
        calls.append("plan")
        return add("x")

    with WriterStart(layout, 1) as started:
        assert os.path.exists(tenure) and started.pending is not None and started.pending.forked
        with pytest.raises(RepoLocked):
            locks.writer_lock(layout, 0).__enter__()
        result = run_writer(layout, plan, identity=identity, host="h", now=LATER, started=started)
        assert os.path.exists(tenure)  # still held: the caller leaves the WriterStart
    assert calls == ["identity", "plan"] and result.applied.commit
    assert not os.path.exists(tenure) and started.pending is None
    with locks.writer_lock(layout, 0):
        pass
    assert_clean(layout.memory_root)


def test_a_failure_before_the_plan_writes_nothing_and_frees_the_lock(layout: Layout) -> None:
    before = Path(layout.git_dir, "refs", "heads", "main").read_text()
    with pytest.raises(QmemError, match="refused"), WriterStart(layout, 1) as started:
        pending = started.pending
        raise QmemError("refused")
    assert pending is not None and not pending.forked  # the survey child was reaped
    assert Path(layout.git_dir, "refs", "heads", "main").read_text() == before
    assert not os.path.exists(os.path.join(layout.git_dir, TENURE))
    assert run_writer(layout, lambda: add("y"), identity=IDENTITY, host="h", now=LATER).applied


@pytest.mark.parametrize("crash", ["after the ref, before the index", "while writing the index"])
def test_the_forked_writers_spliced_index_repairs_a_crash(
    layout: Layout, monkeypatch: pytest.MonkeyPatch, crash: str
) -> None:
    """A writer killed between its commit and its index write leaves the old index (and, when
    killed in the write, ``index.lock``); the next writer, whose index is the file's bytes
    spliced (the forked survey's way), leaves an index in git's order that C git reads clean."""
    from qmem_git.store import gitindex

    git_dir = Path(layout.git_dir)
    saved = {name: (git_dir / name).read_bytes() for name in ("index", gitindex.HEAD_RECORD)}
    apply_changeset(layout, add("killed"), identity=IDENTITY, host="h", now=LATER)
    for name, data in saved.items():  # the writer died before the index was updated
        (git_dir / name).write_bytes(data)
    if crash == "while writing the index":
        (git_dir / "index.lock").write_bytes(saved["index"][:100])
        old = (NOW - timedelta(minutes=1)).timestamp()
        os.utime(git_dir / "index.lock", (old, old))  # left by a writer killed a while ago
    spliced: list[int] = []
    real = gitindex.spliced_index

    def counted(*args: object) -> gitindex.GitIndex:
        spliced.append(1)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(gitindex, "spliced_index", counted)
    with WriterStart(layout, 10) as started:
        assert started.pending is not None and started.pending.forked == hasattr(os, "fork")
        result = run_writer(
            layout, lambda: add("next"), identity=IDENTITY, host="h", now=LATER, started=started
        )
    assert result.applied.commit and result.recovery.commit is None
    assert spliced == ([1] if hasattr(os, "fork") else [])
    assert not (git_dir / "index.lock").exists()
    assert_clean(layout.memory_root)
    data = (git_dir / "index").read_bytes()
    index = gitindex.parse_index(data)
    by_git_order = sorted(index.entries, key=lambda key: key.encode("utf-8", "surrogateescape"))
    assert list(index.entries) == by_git_order
    listed = subprocess.run(
        [*git_argv(layout.memory_root), "ls-files"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert {"user/killed.md", "user/next.md", "MEMORY.md"} <= set(listed)
