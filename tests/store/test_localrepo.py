"""store.localrepo: a local remote is read as dulwich's Repo reads it, without Repo for a plain
bare repository; a push to one imports neither dulwich.client nor dulwich.repo."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from dulwich.errors import NotGitRepository
from dulwich.refs import Ref
from dulwich.repo import Repo
from servers import Machine, git_in, init_bare

from qmem_git.store.localrepo import LocalRepository, plain_bare_config

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    """A bare remote holding one memory, pushed by qmem-git."""
    bare = init_bare(tmp_path / "remote.git")
    machine = Machine(tmp_path, "a", [1_700_000_000])
    machine.remember("Plain bare remotes are read without dulwich's Repo")
    machine.connect(str(bare))
    return bare


def _same_as_dulwich(path: Path, bare: bool) -> None:
    with LocalRepository(str(path)) as ours, Repo(str(path)) as theirs:
        assert ours.git_dir == theirs.controldir()
        assert ours.get_refs() == theirs.get_refs()
        assert ours.bare is bare
        head = theirs.refs[Ref(b"refs/heads/main")]
        assert ours.object_store[head].id == theirs.object_store[head].id
        assert ours.config.get((b"core",), b"bare") == theirs.get_config_stack().get(
            (b"core",), b"bare"
        )


def test_a_plain_bare_repository_is_opened_directly_and_reads_as_dulwich_reads_it(
    remote: Path,
) -> None:
    assert plain_bare_config(str(remote)) is not None
    _same_as_dulwich(remote, bare=True)


def test_other_layouts_are_left_to_dulwich(remote: Path, tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", str(remote), str(checkout)], check=True)
    assert plain_bare_config(str(checkout)) is None
    assert plain_bare_config(str(checkout / ".git")) is not None  # git's own dir: bare-looking
    _same_as_dulwich(checkout, bare=False)
    git_in(remote, "config", "core.sharedRepository", "group")
    assert plain_bare_config(str(remote)) is None
    _same_as_dulwich(remote, bare=True)
    git_in(remote, "config", "--unset", "core.sharedRepository")
    git_in(remote, "config", "core.repositoryformatversion", "1")
    git_in(remote, "config", "extensions.worktreeConfig", "true")
    assert plain_bare_config(str(remote)) is None
    _same_as_dulwich(remote, bare=True)


def test_no_repository_is_dulwichs_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotGitRepository):
        LocalRepository(str(tmp_path / "empty"))


def test_a_push_to_a_path_imports_neither_dulwich_client_nor_dulwich_repo(
    remote: Path, tmp_path: Path
) -> None:
    """Their imports (sockets, subprocess, worktrees) were ~10 ms of a ~25 ms C git push."""
    writer = tmp_path / "writer" / "memory"
    subprocess.run(
        [sys.executable, "-m", "qmem_git", "--memory-dir", str(writer), "-q", "clone", str(remote)],
        check=True,
        env={**os.environ, "QMEM_TELEMETRY": "0"},
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "qmem_git",
            "--memory-dir",
            str(writer),
            "-q",
            "remember",
            "Pushes to a path read the remote directly",
        ],
        check=True,
        env={**os.environ, "QMEM_TELEMETRY": "0"},
    )
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from qmem_git.__main__ import main; "
        "code = main(['--memory-dir', sys.argv[2], '-q', 'sync']); "
        "print(code, sorted(m for m in ('dulwich.client', 'dulwich.repo', 'dulwich.worktree', "
        "'socket', 'subprocess') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(REPO_ROOT), str(writer)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "QMEM_TELEMETRY": "0"},
    )
    assert out.stdout.strip() == "0 []", out.stderr
    assert git_in(remote, "log", "-1", "--format=%s").startswith("remember:")


@pytest.mark.parametrize("plain", [True, False])
def test_the_users_config_is_read_from_the_environment_given(
    remote: Path, tmp_path: Path, plain: bool
) -> None:
    """With an environment, the repository's config then the user's files it names (git's
    variables) answer, plain or not, as dulwich's stack over the same files does."""
    from qmem_git.store.plainconfig import PlainStack

    user = tmp_path / "user.gitconfig"
    quoted = "" if plain else '\n\tname = "quoted, so dulwich reads it"'
    user.write_text(f"[receive]\n\tdenyDeletes = true\n[core]\n\thooksPath = mine{quoted}\n")
    git_in(remote, "config", "core.hooksPath", "ours")
    env = {"HOME": str(tmp_path), "GIT_CONFIG_GLOBAL": str(user), "GIT_CONFIG_NOSYSTEM": "1"}
    with LocalRepository(str(remote), env) as repo:
        config = repo.config
        assert isinstance(config, PlainStack) is plain
        assert config.get((b"core",), b"hooksPath") == b"ours"  # the repository's own first
        assert config.get_boolean((b"receive",), b"denyDeletes", False) is True
        with pytest.raises(KeyError):
            config.get((b"receive",), b"denyNonFastForwards")
