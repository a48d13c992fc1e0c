"""The memory repository's git pre-commit hook, run by real ``git commit``s: it finds
``qmem-git`` as a shell would (PATH), falls back to the Python that installed it, and when
neither can run says so in one line (and lets the commit through unless told to refuse)."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest
from clihelpers import git
from helpers_git import git_argv, gitdir

from qmem_git.store.workdir import render_index

REPO = Path(__file__).resolve().parent.parent
BAD = "no frontmatter here, but a key: ghp_" + "Q" * 36 + "\n"
GOOD = "---\nname: Tabs\ndescription: Tabs\ntype: user\n---\n\n- Tabs, always.\n"


def make_venv(where: Path) -> Path:
    """A real venv whose Python imports this checkout (and its dependencies) via a .pth file."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    paths = [str(REPO), *site.getsitepackages()]
    Path(purelib, "qmem-test.pth").write_text("\n".join(paths) + "\n")
    return python


def launcher(folder: Path, interpreter: str) -> Path:
    """A ``qmem-git`` console script as pip writes one: a shebang naming its venv's Python."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "qmem-git"
    script.write_text(
        f"#!{interpreter}\nimport sys\nfrom qmem_git.__main__ import entry\nsys.exit(entry())\n"
    )
    script.chmod(0o755)
    return folder


@pytest.fixture
def installed(tmp_path: Path) -> tuple[Path, Path]:
    """(memory repo, venv) with the hook installed by ``qmem-git init`` run from that venv."""
    venv = tmp_path / "venv"
    python = make_venv(venv)
    memory = tmp_path / "state" / "memory"
    init = subprocess.run(
        [str(python), "-m", "qmem_git", "--memory-dir", str(memory), "init"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert init.returncode == 0, init.stderr
    assert str(python) in (gitdir(memory) / "hooks" / "pre-commit").read_text()
    return memory, venv


def shell_path(*first: Path) -> str:
    """PATH with git and a shell but no qmem-git, after the folders given."""
    git_exe = shutil.which("git")
    assert git_exe
    path = os.pathsep.join([*map(str, first), os.path.dirname(git_exe), "/bin"])
    return path


def stage(memory: Path, text: str) -> None:
    (memory / "user").mkdir(exist_ok=True)
    (memory / "user" / "tabs.md").write_text(text)
    if text == GOOD:
        (memory / "MEMORY.md").write_text(render_index(str(memory)).text)
    git(memory, "add", "-A")


def commit(memory: Path, path: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*git_argv(str(memory)), "commit", "-q", "-m", "by hand"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": path, **env},
    )


def test_qmem_git_on_path_checks_commits_after_the_installing_venv_is_gone(
    installed: tuple[Path, Path], tmp_path: Path
) -> None:
    memory, venv = installed
    shutil.rmtree(venv)
    path = shell_path(launcher(tmp_path / "bin", sys.executable))
    stage(memory, BAD)
    refused = commit(memory, path)
    assert refused.returncode == 1, refused.stderr
    assert "(secret)" in refused.stdout + refused.stderr
    stage(memory, GOOD)
    done = commit(memory, path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert git(memory, "log", "-1", "--format=%s").strip() == "by hand"


def test_without_qmem_git_the_commit_goes_through_with_one_line_saying_what_to_do(
    installed: tuple[Path, Path], tmp_path: Path
) -> None:
    memory, venv = installed
    shutil.rmtree(venv)
    # a launcher left behind by the deleted venv counts as missing, not as a failed check
    path = shell_path(launcher(tmp_path / "bin", str(venv / "bin" / "python")))
    stage(memory, BAD)
    warned = commit(memory, path)
    assert warned.returncode == 0, warned.stderr
    said = [line for line in warned.stderr.splitlines() if line.startswith("qmem-git pre-commit:")]
    assert len(said) == 1, warned.stderr
    assert "cannot run qmem-git" in said[0] and "hint: install it" in said[0]
    assert "QMEM_HOOK_REQUIRED=1" in said[0]
    assert git(memory, "log", "-1", "--format=%s").strip() == "by hand"


def test_qmem_hook_required_refuses_the_commit_when_qmem_git_cannot_run(
    installed: tuple[Path, Path],
) -> None:
    memory, venv = installed
    shutil.rmtree(venv)
    before = git(memory, "rev-parse", "HEAD")
    stage(memory, GOOD)
    refused = commit(memory, shell_path(), QMEM_HOOK_REQUIRED="1")
    assert refused.returncode == 1
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "commit refused (QMEM_HOOK_REQUIRED=1)" in lines[0], lines
    assert git(memory, "rev-parse", "HEAD") == before


def test_the_installing_python_is_the_fallback_when_qmem_git_is_not_on_path(
    installed: tuple[Path, Path],
) -> None:
    memory, _ = installed
    path = shell_path()
    assert shutil.which("qmem-git", path=path) is None
    stage(memory, BAD)
    refused = commit(memory, path)
    assert refused.returncode == 1
    assert "(secret)" in refused.stdout + refused.stderr
