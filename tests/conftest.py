"""Shared fixtures: every test runs with HOME, XDG dirs and git identity pinned to tmp."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}


@pytest.fixture(autouse=True)
def isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """HOME, XDG and git config point into a fresh tmp dir; no QWEN/QMEM/GIT env leaks in."""
    home = tmp_path_factory.mktemp("home")
    for key in list(os.environ):
        if key.startswith(("QWEN_", "QMEM_", "GIT_", "CLAUDE_", "XDG_")):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    for key, value in _GIT_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("QMEM_TELEMETRY", "0")
    # files a test writes are committed at once; tests of the settle time set it themselves
    monkeypatch.setenv("QMEM_QUIET_SECONDS", "0")
    return home


@pytest.fixture(autouse=True)
def _guard_real_home(isolated_home: Path) -> Iterator[None]:
    """Fail any test that wrote into the real user's agent folders."""
    real = Path(os.path.expanduser("~root")) if os.geteuid() == 0 else None
    watched = [p for p in ((real / ".qwen"), (real / ".claude")) if real] if real else []
    before = {p: _mtime(p) for p in watched}
    yield
    for path in watched:
        assert _mtime(path) == before[path], f"test touched the real {path}"


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


@pytest.fixture
def git_exe() -> str:
    exe = shutil.which("git")
    assert exe, "C git is required by the test suite (apt-get install git)"
    return exe


@pytest.fixture
def served(tmp_path: Path) -> Path:
    """A folder served to remotes, holding one empty bare repository ``mem.git``."""
    from servers import init_bare

    root = tmp_path / "served"
    root.mkdir()
    init_bare(root / "mem.git")
    return root


@pytest.fixture
def daemon(served: Path) -> Iterator[object]:
    """``git daemon`` on 127.0.0.1 exporting ``served`` (receive-pack enabled)."""
    from servers import GitDaemon

    server = GitDaemon(served).start()
    yield server
    server.stop()


def require_tool(available: bool, what: str) -> None:
    """Skip a test whose outside tool is missing, naming it; under ``CI`` a missing tool fails."""
    if available:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{what} is missing, and CI must run this test")
    pytest.skip(f"{what} is missing", allow_module_level=True)


@pytest.fixture(autouse=True)
def _stop_hook_watchers(request: pytest.FixtureRequest, isolated_home: Path) -> Iterator[None]:
    """A hook a test runs may start the store's background watcher, which lives as long as the
    hook's parent, the test run itself: end the ones this test started, by the pid each wrote
    into its lock file (only while it holds the lock, so the pid is still its own)."""
    roots = [isolated_home]
    if "tmp_path" in request.fixturenames:
        roots.append(request.getfixturevalue("tmp_path"))
    yield
    for root in roots:
        for lock in root.rglob("watcher.lock"):
            stop_watcher(lock)


def stop_watcher(lock: Path) -> None:
    """SIGTERM the process holding the watcher lock ``lock``, if one does."""
    import signal

    from qmem_git.store.locks import TryLock

    probe = TryLock(str(lock))
    if probe.acquire():
        probe.release()
        return
    pid = lock.read_text(encoding="ascii", errors="replace").strip()
    if pid.isdigit():
        os.kill(int(pid), signal.SIGTERM)
