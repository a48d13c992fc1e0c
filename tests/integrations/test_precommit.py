"""pre-commit hooks: the main() entry points directly (fast), then through the real framework.

The framework tests install the hooks from a snapshot of this checkout (uncommitted and
untracked files included: ``pre-commit try-repo`` alone would only pick up tracked changes) and
build the hook environment once per module from a local wheelhouse, so the slow part (pip) runs
once. Every ``pre-commit try-repo`` call builds a fresh environment, so only one test uses it;
the others use ``pre-commit run`` with a config pointing at the same snapshot.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from qmem_git.integrations import precommit
from qmem_git.store.workdir import render_index

PROJECT_ROOT = Path(__file__).resolve().parents[2]
HOOK_IDS = ("qmem-validate", "qmem-index", "qmem-secrets", "qmem-no-conflict-markers")
BUILD_DEPS = ("setuptools>=68", "wheel")  # pyproject [build-system]; pip builds offline later
TOKEN = "ghp_" + "Q" * 36


def memory(kind: str = "user", name: str = "Terse", body: str = "User prefers terse.") -> str:
    return f"---\nname: {name}\ndescription: {name} memory\ntype: {kind}\n---\n\n{body}\n"


def make_memory(root: Path, index: bool = True) -> Path:
    (root / "user").mkdir(parents=True, exist_ok=True)
    (root / "project").mkdir(exist_ok=True)
    (root / "user" / "terse.md").write_text(memory())
    (root / "project" / "freeze.md").write_text(memory("project", "Freeze", "Freeze on Friday."))
    if index:
        (root / "MEMORY.md").write_text(render_index(str(root)).text)
    return root


# --- main() functions -----------------------------------------------------------------------


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    precommit.is_memory_root.cache_clear()
    make_memory(tmp_path / ".qwen" / "memory")
    return tmp_path


def test_validate_main_good_and_bad(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = ".qwen/memory/user/terse.md"
    assert precommit.validate_main([good, ".qwen/memory/project/freeze.md"]) == 0
    assert capsys.readouterr().out == ""
    bad = repo / ".qwen/memory/user/bad.md"
    bad.write_text(memory().replace("type: user", "type: misc"))
    assert precommit.validate_main([good, ".qwen/memory/user/bad.md"]) == 1
    out = capsys.readouterr().out
    assert out == (
        ".qwen/memory/user/bad.md:4:1: error: frontmatter type 'misc' is not one of "
        "user, feedback, project, reference [type-invalid]\n"
    )


def test_validate_main_ignores_markdown_outside_memory(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "README.md").write_text("# Project\n" + TOKEN)
    (repo / "docs").mkdir()
    (repo / "docs" / "MEMORY.md").write_text("Design notes about memory.\n")
    assert precommit.validate_main(["README.md", "docs/MEMORY.md"]) == 0
    assert capsys.readouterr().out == ""


def test_validate_main_explicit_root(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = repo / "mem"
    make_memory(root)
    (root / "notes.md").write_text("loose notes")
    names = ["mem/notes.md", "mem/user/terse.md", "README.md"]
    assert precommit.validate_main(["--memory-root", "mem", *names]) == 1
    out = capsys.readouterr().out
    assert "mem/notes.md:1:1: error:" in out and "[path-layout]" in out
    assert "README.md" not in out


def test_find_memory_root(repo: Path) -> None:
    root = str(repo / ".qwen" / "memory")
    assert precommit.find_memory_root(root + "/user/terse.md") == root
    nested = repo / ".qwen/memory/user/project"
    nested.mkdir()
    assert precommit.find_memory_root(str(nested / "x.md")) == root
    loose = repo / "x" / "memory" / "feedback"
    loose.mkdir(parents=True)
    assert precommit.find_memory_root(str(loose / "a.md")) == str(loose.parent)
    (repo / "project").mkdir()
    assert precommit.find_memory_root(str(repo / "project" / "README.md")) is None


def test_index_main_fixes_then_passes(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index = repo / ".qwen/memory/MEMORY.md"
    expected = index.read_text()
    index.write_text("- [Old](user/old.md) — gone")
    (repo / "docs").mkdir()
    (repo / "docs" / "MEMORY.md").write_text("unrelated")
    subprocess.run(["git", "init", "-q"], check=True)
    assert precommit.index_main([]) == 1
    assert capsys.readouterr().out == "Fixing .qwen/memory/MEMORY.md\n"
    assert index.read_text() == expected
    assert (repo / "docs" / "MEMORY.md").read_text() == "unrelated"
    index.write_text(expected + "\n")  # an end-of-file fixer's newline is left alone
    assert precommit.index_main([]) == 0
    assert capsys.readouterr().out == ""


def test_index_main_explicit_root_and_symlink(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_memory(repo / "mem", index=False)
    assert precommit.index_main(["--memory-root", "mem"]) == 1
    assert (root / "MEMORY.md").read_text() == render_index(str(root)).text
    (repo / "linked").symlink_to(root)
    capsys.readouterr()
    assert precommit.index_main(["--memory-root", "linked"]) == 1
    assert "[symlink]" in capsys.readouterr().out


def test_index_main_without_git_walks_the_tree(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / ".qwen/memory/MEMORY.md").write_text("")
    assert precommit.index_main([]) == 1  # no git repository here: falls back to a walk
    assert "Fixing" in capsys.readouterr().out


def test_secrets_main(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "clean.txt").write_text("nothing here\n")
    (repo / "leak.txt").write_text(f"one\r\ntwo {TOKEN}\n")
    (repo / "binary.bin").write_bytes(b"\0" + TOKEN.encode())
    assert precommit.secrets_main(["clean.txt", "binary.bin", "missing.txt"]) == 0
    assert precommit.secrets_main(["clean.txt", "leak.txt"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("leak.txt:2:5: error: possible secret: GitHub PAT (github-pat)")
    assert out.rstrip().endswith("[secret]") and "Q" * 10 not in out


def test_conflict_markers_main(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "ok.md").write_text("a\n====\n")
    (repo / "bad.md").write_text("a\n<<<<<<< HEAD\nb\n=======\nc\n>>>>>>> x\n")
    assert precommit.conflict_markers_main(["ok.md"]) == 0
    assert precommit.conflict_markers_main(["ok.md", "bad.md"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(": error:")[0] for line in lines] == [
        "bad.md:2:1",
        "bad.md:4:1",
        "bad.md:6:1",
    ]


def test_output_survives_odd_file_names(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = "odd\udcff\n.txt"
    with open(os.fsencode(name), "w") as handle:
        handle.write(TOKEN)
    assert precommit.secrets_main([name]) == 1
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 1 and "<U+000A>" in out


# --- the real pre-commit framework ----------------------------------------------------------


@dataclass(frozen=True)
class HookEnv:
    env: dict[str, str]
    source: Path
    config: Path


def _git(cwd: Path, env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    )
    return result.stdout.strip()


@pytest.fixture(scope="module")
def hook_env(tmp_path_factory: pytest.TempPathFactory) -> HookEnv:
    base = tmp_path_factory.mktemp("precommit")
    home = base / "home"
    home.mkdir()
    wheels = base / "wheels"
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("GIT_", "PRE_COMMIT", "PIP_", "QWEN_", "QMEM_", "VIRTUAL_ENV"))
    }
    env.update(
        HOME=str(home),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_CONFIG_HOME=str(home / ".config"),
        PRE_COMMIT_HOME=str(home / "pre-commit"),
        GIT_CONFIG_GLOBAL=str(home / ".gitconfig"),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="Test",
        GIT_AUTHOR_EMAIL="test@example.com",
        GIT_COMMITTER_NAME="Test",
        GIT_COMMITTER_EMAIL="test@example.com",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    source = base / "qmem-src"
    shutil.copytree(
        PROJECT_ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "*.egg-info", "__pycache__", ".*_cache", "build", "dist"
        ),
    )
    _git(source, env, "init", "-q", "-b", "main")
    _git(source, env, "add", "-A")
    _git(source, env, "commit", "-q", "-m", "snapshot")
    pip_env = {**env, **{k: v for k, v in os.environ.items() if k.startswith("PIP_")}}
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "-w", str(wheels), str(source), *BUILD_DEPS],
        env=pip_env,
        capture_output=True,
        text=True,
    )
    if built.returncode != 0:
        pytest.fail(f"cannot build the hook wheelhouse from PyPI: {built.stderr[-500:]}")
    for wheel in wheels.glob("qmem_git-*"):
        wheel.unlink()
    env.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheels))
    rev = _git(source, env, "rev-parse", "HEAD")
    config = base / "pre-commit-config.yaml"
    hooks = "".join(f"      - id: {hook}\n" for hook in HOOK_IDS)
    config.write_text(f"repos:\n  - repo: {source}\n    rev: {rev}\n    hooks:\n{hooks}")
    scratch = base / "scratch"
    scratch.mkdir()
    _git(scratch, env, "init", "-q")
    pre_commit(scratch, env, "install-hooks", "--config", str(config)).check_returncode()
    return HookEnv(env, source, config)


def pre_commit(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pre_commit", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def target_repo(tmp_path: Path, env: dict[str, str]) -> Path:
    repo = tmp_path / "project"
    repo.mkdir()
    _git(repo, env, "init", "-q", "-b", "main")
    make_memory(repo / ".qwen" / "memory")
    (repo / "README.md").write_text("# A project\n")
    _git(repo, env, "add", "-A")
    return repo


def run_hook(hook_env: HookEnv, repo: Path, hook: str, *files: str) -> tuple[int, str]:
    args = ["run", "--config", str(hook_env.config), hook]
    args += ["--files", *files] if files else []
    result = pre_commit(repo, hook_env.env, *args)
    return result.returncode, result.stdout + result.stderr


GOOD_FILES = (".qwen/memory/user/terse.md", ".qwen/memory/project/freeze.md", "README.md")


@pytest.mark.parametrize("hook", HOOK_IDS)
def test_framework_good_files_pass(hook_env: HookEnv, tmp_path: Path, hook: str) -> None:
    repo = target_repo(tmp_path, hook_env.env)
    code, out = run_hook(hook_env, repo, hook, *GOOD_FILES)
    assert code == 0, out
    assert "Passed" in out


def test_framework_bad_files_fail_with_the_right_message(hook_env: HookEnv, tmp_path: Path) -> None:
    repo = target_repo(tmp_path, hook_env.env)
    bad = ".qwen/memory/user/bad.md"
    (repo / bad).write_text(
        memory().replace("type: user", "type: misc") + f"\n{TOKEN}\n<<<<<<< HEAD\n"
    )
    code, out = run_hook(hook_env, repo, "qmem-validate", bad, *GOOD_FILES)
    assert code == 1, out
    assert f"{bad}:4:1: error: frontmatter type 'misc' is not one of" in out
    assert "[type-invalid]" in out and "[secret]" in out and "[conflict-marker]" in out
    code, out = run_hook(hook_env, repo, "qmem-secrets", bad)
    assert code == 1 and f"{bad}:9:1: error: possible secret: GitHub PAT" in out
    assert "Q" * 10 not in out
    code, out = run_hook(hook_env, repo, "qmem-no-conflict-markers", bad)
    assert code == 1 and f"{bad}:10:1: error: git conflict marker" in out


def test_framework_index_fixer(hook_env: HookEnv, tmp_path: Path) -> None:
    repo = target_repo(tmp_path, hook_env.env)
    index = repo / ".qwen/memory/MEMORY.md"
    expected = index.read_text()
    index.write_text("- [Stale](user/stale.md) — stale")
    _git(repo, hook_env.env, "add", "-A")  # without --files pre-commit checks what is staged
    code, out = run_hook(hook_env, repo, "qmem-index")
    assert code == 1, out
    assert "Fixing .qwen/memory/MEMORY.md" in out and "files were modified by this hook" in out
    assert index.read_text() == expected
    _git(repo, hook_env.env, "add", "-A")
    code, out = run_hook(hook_env, repo, "qmem-index")
    assert code == 0, out


def test_try_repo(hook_env: HookEnv, tmp_path: Path) -> None:
    """The documented way to try the hooks: ``pre-commit try-repo <repo> [hook] --files``."""
    repo = target_repo(tmp_path, hook_env.env)
    index = repo / ".qwen/memory/MEMORY.md"
    expected = index.read_text()
    index.write_text("stale")
    bad = ".qwen/memory/user/bad.md"
    (repo / bad).write_text(memory().replace("type: user", "type: misc"))
    args = ["try-repo", str(hook_env.source), "--files", bad, *GOOD_FILES]
    result = pre_commit(repo, hook_env.env, *args)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert f"{bad}:4:1: error: frontmatter type 'misc'" in out
    assert "Fixing .qwen/memory/MEMORY.md" in out
    assert index.read_text() == expected
    for name in ("qmem detect secrets", "qmem no conflict markers"):
        assert any(name in line and "Passed" in line for line in out.splitlines()), out
