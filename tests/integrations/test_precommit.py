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
    bad.write_text(memory(body=f"see {TOKEN}"))
    assert precommit.validate_main([good, ".qwen/memory/user/bad.md"]) == 1
    out = capsys.readouterr().out
    assert out == (
        ".qwen/memory/user/bad.md:7:5: error: possible secret: GitHub PAT (github-pat); "
        "remove it, memory files are committed and shared [secret]\n"
    )
    bad.write_text(memory().replace("type: user", "type: misc"))  # style: advice only
    assert precommit.validate_main([good, ".qwen/memory/user/bad.md"]) == 0
    assert "warning: frontmatter type 'misc'" in capsys.readouterr().out


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
    (root / "notes.md").write_text(f"loose notes {TOKEN}")  # a root-level note is fine...
    names = ["mem/notes.md", "mem/user/terse.md", "README.md"]
    assert precommit.validate_main(["--memory-root", "mem", *names]) == 1
    out = capsys.readouterr().out
    assert "mem/notes.md:1:13: error:" in out and "[secret]" in out  # ...a credential is not
    assert "[path-layout]" not in out and "README.md" not in out


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
    assert f"{bad}:4:1: warning: frontmatter type 'misc' is not one of" in out
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
    (repo / bad).write_text(f"see {TOKEN}\n")  # no memory (not listed)
    args = ["try-repo", str(hook_env.source), "--files", bad, *GOOD_FILES]
    result = pre_commit(repo, hook_env.env, *args)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert f"{bad}:1:5: error: possible secret: GitHub PAT" in out
    assert "Fixing .qwen/memory/MEMORY.md" in out
    assert index.read_text() == expected
    lines = out.splitlines()
    assert any("qmem no conflict markers" in line and "Passed" in line for line in lines), out
    assert any("qmem detect secrets" in line and "Failed" in line for line in lines), out


# --- the documented snippet, in the three places memory lives in a repository ---------------

DOCS = PROJECT_ROOT / "docs" / "integrations.md"
SNIPPET_MARKER = "<!-- pre-commit-snippet -->\n```yaml\n"
SNIPPET_URL = "https://github.com/qmem-git/qmem-git"
TEAM_INDEX = (  # Qwen Code's team format of make_team: sorted by path, equal descriptions grouped
    "- [Freeze](project/freeze.md) — Freeze memory\n"
    "- [Terse](user/terse-2.md) — Terse memory (also: user/terse.md)"
)


def make_team(root: Path) -> Path:
    """A team folder (two memories share a description) without its MEMORY.md."""
    make_memory(root, index=False)
    (root / "user" / "terse-2.md").write_text(memory(body="Terse, again."))
    return root


def documented_config(hook_env: HookEnv) -> str:
    """The snippet users paste, with the hooks' repository swapped for this checkout."""
    text = DOCS.read_text(encoding="utf-8")
    start = text.index(SNIPPET_MARKER) + len(SNIPPET_MARKER)
    snippet = text[start : text.index("```", start)]
    assert f"\n  - repo: {SNIPPET_URL}\n" in snippet
    assert "\n    rev: main  #" in snippet
    rev = _git(hook_env.source, hook_env.env, "rev-parse", "HEAD")
    return snippet.replace(SNIPPET_URL, str(hook_env.source)).replace("rev: main", f"rev: {rev}")


def project_with_config(tmp_path: Path, hook_env: HookEnv) -> Path:
    repo = tmp_path / "project"
    repo.mkdir()
    _git(repo, hook_env.env, "init", "-q", "-b", "main")
    (repo / ".pre-commit-config.yaml").write_text(documented_config(hook_env))
    (repo / "README.md").write_text("# A project\n")
    return repo


def run_all(hook_env: HookEnv, repo: Path, *args: str) -> tuple[int, str]:
    result = pre_commit(repo, hook_env.env, "run", *args)
    return result.returncode, result.stdout + result.stderr


def passed(out: str, name: str) -> bool:
    return any(line.startswith(name) and line.endswith("Passed") for line in out.splitlines())


def test_snippet_checks_local_mode_memory_committed_with_the_project(
    hook_env: HookEnv, tmp_path: Path
) -> None:
    repo = project_with_config(tmp_path, hook_env)
    index = make_memory(repo / ".qwen" / "memory") / "MEMORY.md"
    _git(repo, hook_env.env, "add", "-A")
    code, out = run_all(hook_env, repo, "--all-files")
    assert code == 0, out
    assert passed(out, "qmem validate memory files") and passed(out, "qmem rebuild MEMORY.md")
    expected = index.read_text()
    index.write_text("stale\n")
    bad = ".qwen/memory/user/bad.md"
    (repo / bad).write_text(f"see {TOKEN}\n")  # no memory (not listed)
    _git(repo, hook_env.env, "add", "-A")
    code, out = run_all(hook_env, repo)  # what a `git commit` would check: the staged files
    assert code == 1, out
    assert f"{bad}:1:5: error: possible secret: GitHub PAT" in out
    assert "Fixing .qwen/memory/MEMORY.md" in out and index.read_text() == expected
    (repo / bad).unlink()
    _git(repo, hook_env.env, "add", "-A")
    code, out = run_all(hook_env, repo)
    assert code == 0, out


def test_snippet_checks_team_memory_and_fixes_its_index_in_qwens_team_format(
    hook_env: HookEnv, tmp_path: Path
) -> None:
    repo = project_with_config(tmp_path, hook_env)
    team = make_team(repo / ".qwen" / "team-memory")
    os.utime(team / "project" / "freeze.md", (1_700_000_000, 1_700_000_000))
    (team / "MEMORY.md").write_text(TEAM_INDEX + "\n")  # an editor's final newline is fine
    assert render_index(str(team)).text != TEAM_INDEX  # the project format would differ
    _git(repo, hook_env.env, "add", "-A")
    code, out = run_all(hook_env, repo, "--all-files")
    assert code == 0, out
    assert passed(out, "qmem validate memory files") and passed(out, "qmem rebuild MEMORY.md")
    assert (team / "MEMORY.md").read_text() == TEAM_INDEX + "\n"
    (team / "MEMORY.md").write_text("- [Terse](user/terse.md) — stale\n")
    bad = ".qwen/team-memory/feedback/leak.md"
    (repo / bad).parent.mkdir()
    (repo / bad).write_text(memory("feedback", "Leak", f"Use {TOKEN} for the bot."))
    _git(repo, hook_env.env, "add", "-A")
    code, out = run_all(hook_env, repo)
    assert code == 1, out
    assert f"{bad}:7:5: error: possible secret: GitHub PAT" in out and "Q" * 10 not in out
    assert "Fixing .qwen/team-memory/MEMORY.md" in out
    assert (team / "MEMORY.md").read_text() == (
        "- [Leak](feedback/leak.md) — Leak memory\n"  # by path, not by age
        "- [Freeze](project/freeze.md) — Freeze memory\n"
        "- [Terse](user/terse-2.md) — Terse memory (also: user/terse.md)"
    )
    pre_commit(repo, hook_env.env, "install").check_returncode()
    _git(repo, hook_env.env, "add", "-A")
    refused = subprocess.run(  # a real `git commit`: the installed hook refuses the secret
        ["git", "commit", "-qm", "team: leak"], cwd=repo, env=hook_env.env, capture_output=True
    )
    assert refused.returncode == 1 and b"possible secret: GitHub PAT" in refused.stderr
    assert subprocess.run(["git", "rev-parse", "-q", "--verify", "HEAD"], cwd=repo).returncode


def test_snippet_checks_a_repository_of_memory_files(hook_env: HookEnv, tmp_path: Path) -> None:
    repo = project_with_config(tmp_path, hook_env)
    (repo / "README.md").unlink()
    make_memory(repo)
    (repo / "MEMORY.md").write_text("")
    _git(repo, hook_env.env, "add", "-A")
    code, out = run_all(hook_env, repo, "--all-files")
    assert code == 1 and "Fixing MEMORY.md" in out, out
    assert (repo / "MEMORY.md").read_text() == render_index(str(repo)).text
    _git(repo, hook_env.env, "add", "-A")
    code, out = run_all(hook_env, repo, "--all-files")
    assert code == 0, out
    assert passed(out, "qmem validate memory files")


def test_snippet_in_a_local_mode_qmem_git_store(hook_env: HookEnv, tmp_path: Path) -> None:
    """qmem-git's local-mode store is its own repository, hidden from the project's: the
    project's hooks see no memory file, and the documented command checks the store."""
    repo = project_with_config(tmp_path, hook_env)
    env = {**hook_env.env, "QWEN_CODE_MEMORY_LOCAL": "1"}
    for args in (["init"], ["remember", "--type", "user", "I prefer terse responses"]):
        command = [sys.executable, "-m", "qmem_git", *args]
        subprocess.run(command, cwd=repo, env=env, check=True, capture_output=True)
    store = repo / ".qwen" / "memory"
    config = ["--config", "../../.pre-commit-config.yaml"]
    in_store = {**env, "GIT_DIR": "../memory.git", "GIT_WORK_TREE": "."}  # as integrations.md

    def run_in_store(*args: str) -> tuple[int, str]:
        result = pre_commit(store, in_store, "run", *args)
        return result.returncode, result.stdout + result.stderr

    code, out = run_in_store("--all-files", *config)
    assert code == 0, out
    assert passed(out, "qmem validate memory files") and passed(out, "qmem rebuild MEMORY.md")
    bad = store / "user" / "i-prefer-terse-responses.md"
    bad.write_text(bad.read_text() + f"\nsee {TOKEN}\n")
    _git(store, in_store, "add", "-A")
    _git(repo, env, "add", "-A")
    assert _git(repo, env, "ls-files", ".qwen") == ""  # init hid the store from the project
    code, out = run_all(hook_env, repo, "--all-files")
    assert code == 0 and "[secret]" not in out, out
    code, out = run_in_store(*config)
    assert code == 1, out
    assert "user/i-prefer-terse-responses.md:" in out and "error: possible secret" in out
    assert (
        _git(store, in_store, "status", "--porcelain", "--ignored", ".pre-commit-config.yaml") == ""
    )


def test_team_folder_index_is_checked_and_fixed_in_qwens_team_format(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    team = make_team(repo / ".qwen" / "team-memory")
    (team / "MEMORY.md").write_text(TEAM_INDEX)
    subprocess.run(["git", "init", "-q"], check=True)
    names = [".qwen/team-memory/MEMORY.md", ".qwen/team-memory/user/terse.md"]
    assert precommit.validate_main(names) == 0
    assert precommit.index_main([]) == 0
    assert (team / "MEMORY.md").read_text() == TEAM_INDEX
    (team / "MEMORY.md").write_text(render_index(str(team)).text)  # the project tier's format
    assert precommit.validate_main(names) == 1
    assert "[index-stale]" in capsys.readouterr().out
    assert precommit.index_main([]) == 1
    assert (team / "MEMORY.md").read_text() == TEAM_INDEX
    (team / "user" / "terse.md").write_text(memory(body=f"see {TOKEN}"))
    assert precommit.validate_main(names) == 1
    assert "[secret]" in capsys.readouterr().out
    assert precommit.is_team_root(str(team)) and not precommit.is_team_root(str(repo / "team"))
