"""A store whose MEMORY.md Qwen Code 0.24.4 wrote: ``index --check`` accepts it, ``index`` and
``snapshot`` leave it as it is (no ping-pong of rewrites between the two)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from clihelpers import assert_clean_repo, git, qmem
from helpers_git import git_argv

from qwen.conftest import Bridge

MTIME_NS = 1_790_000_000_000_000_000
BODY = "- Keep it.\n  **Why:** asked.\n  **How to apply:** always.\n"
FILES = {
    rel: f"---\nname: {name}\ndescription: {description}\ntype: {rel.split('/')[0]}\n---\n\n{BODY}"
    for rel, name, description in [
        ("user/偏好.md", "简洁", "用户喜欢简洁的回答"),
        ("user/b.md", "Uses rg", "search with rg, not grep"),
        ("feedback/a.md", "long " * 40, "a name longer than 120 characters is cut"),
        ("project/x y.md", "Spaces", "😀" * 70),
        ("reference/Ärger.md", "Umlaut", "a file name that is percent-encoded"),
        ("reference/arger.md", "Plain", "sorts before Ärger"),
    ]
}


def test_index_check_accepts_what_qwen_wrote(qwen: Bridge, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    memory = project / ".qwen" / "memory"
    assert qmem(memory, "init").code == 0
    for rel, text in FILES.items():
        path = memory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        os.utime(path, ns=(MTIME_NS, MTIME_NS))  # one mtime: ties ordered by localeCompare
    assert qmem(memory, "snapshot").code == 0
    head = git(memory, "rev-parse", "HEAD")
    ours = (memory / "MEMORY.md").read_bytes()
    (result,) = qwen(
        [{"op": "index", "project": str(project), "env": {"QWEN_CODE_MEMORY_LOCAL": "1"}}]
    )
    assert isinstance(result, str) and result.count("\n") == len(FILES) - 1
    assert (memory / "MEMORY.md").read_bytes() == ours  # Qwen wrote the same bytes
    assert qmem(memory, "index", "--check").code == 0
    assert qmem(memory, "index").out.strip() == "MEMORY.md is up to date"
    assert qmem(memory, "snapshot").code in (0, 1)
    assert git(memory, "rev-parse", "HEAD") == head  # nothing to commit: no rewrite
    assert_clean_repo(memory)


def test_index_check_and_the_pre_commit_hook_accept_qwens_index_of_an_agents_folder(
    qwen: Bridge, tmp_path: Path
) -> None:
    """pinned/, root-level notes, deep folders, lint findings Qwen reads anyway: the index
    Qwen wrote passes ``index --check`` and the memory repository's own pre-commit hook (a
    plain ``git commit``); a credential is still refused by the hook."""
    from qwen.test_index_differential import AGENT_FOLDER

    project = tmp_path / "proj"
    memory = project / ".qwen" / "memory"
    assert qmem(memory, "init").code == 0
    for n, (rel, text) in enumerate(AGENT_FOLDER):
        path = memory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
        os.utime(path, ns=(MTIME_NS + n % 3, MTIME_NS + n % 3))
    (result,) = qwen(
        [{"op": "index", "project": str(project), "env": {"QWEN_CODE_MEMORY_LOCAL": "1"}}]
    )
    assert isinstance(result, str) and "(Pinned/deploy.md)" in result
    assert qmem(memory, "index", "--check").code == 0
    env = {**os.environ, "QMEM_HOOK_REQUIRED": "1"}  # the hook must run, or the commit fails
    git(memory, "add", "-A")
    done = subprocess.run(
        [*git_argv(memory), "commit", "-q", "-m", "by hand"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "Pinned/deploy.md" in git(memory, "ls-files")
    (memory / "user" / "key.md").write_text(
        FILES["user/b.md"] + "token ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8\n", encoding="utf-8"
    )
    git(memory, "add", "user/key.md")
    refused = subprocess.run(
        [*git_argv(memory), "commit", "-q", "-m", "a secret"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert refused.returncode != 0 and "secret" in refused.stdout + refused.stderr
