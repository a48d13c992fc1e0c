"""An agent may write anything under the memory root, a ``.git`` included (issue 18, item 7):
nothing it writes there is read or run by qmem-git, nor by ``qmem-git git``, the person's own
git command; the repository lives beside the folder and its own hook still guards commits."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from clihelpers import assert_clean_repo, git, head, qmem
from helpers_git import gitdir
from servers import HttpGitServer

MEMORY = "---\nname: {name}\ndescription: about {name}\ntype: user\n---\n\n{name} is a fact.\n"


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    root = tmp_path / "state" / "memory"
    assert qmem(root, "init").code == 0
    assert qmem(root, "remember", "--type", "user", "I prefer tea in the morning").code == 0
    return root


def plant(memory: Path, marker: Path) -> Path:
    """What a hostile or careless agent could write: a whole repository in the memory folder
    (with qmem-git's own marker files), an executable pre-commit hook, and a config whose
    core.fsmonitor and core.hooksPath run a script that leaves ``marker``."""
    agent_git = memory / ".git"
    subprocess.run(["git", "init", "-q", "-b", "main", str(memory)], check=True)
    script = memory.parent / "agent-script.sh"  # outside: the test's; the path is what counts
    script.write_text(f"#!/bin/sh\necho ran >> {marker}\nexit 0\n")
    script.chmod(0o755)
    for hook in ("pre-commit", "post-commit", "commit-msg", "post-checkout"):
        (agent_git / "hooks" / hook).write_text(f"#!/bin/sh\n{script}\n")
        (agent_git / "hooks" / hook).chmod(0o755)
    with (agent_git / "config").open("a") as config:
        config.write(f"[core]\n\tfsmonitor = {script}\n\thooksPath = {agent_git / 'hooks'}\n")
    for name in ("qmem-index", "qmem.lock"):  # look like a store qmem-git made
        (agent_git / name).write_text("")
    return agent_git


def test_nothing_an_agent_writes_under_the_memory_root_runs(tmp_path: Path, memory: Path) -> None:
    marker = tmp_path / "MARKER"
    agent_git = plant(memory, marker)
    bare = tmp_path / "shared.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    (memory / "user" / "coffee.md").write_text(MEMORY.format(name="coffee"))
    steps = [
        ("snapshot",),
        ("remember", "--type", "user", "Deploys happen on Tuesdays only"),
        ("log", "-n", "3"),
        ("diff",),
        ("show",),
        ("history", "user"),
        ("validate",),
        ("remote", "add", "origin", str(bare)),
        ("sync",),
        ("doctor",),
        ("git", "status"),
        ("git", "log", "--oneline"),
    ]
    for args in steps:
        result = qmem(memory, *args)
        assert result.code in (0, 1), (args, result.err)
        assert not marker.exists(), f"qmem-git {' '.join(args)} ran the agent's script"
    coffee = memory / "user" / "coffee.md"
    before = coffee.stat()
    with coffee.open("a") as handle:
        handle.write("Edited by hand.\n")
    os.utime(coffee, ns=(before.st_atime_ns, before.st_mtime_ns))  # MEMORY.md stays as it is
    assert qmem(memory, "git", "add", "user/coffee.md").code == 0
    committed = qmem(memory, "git", "commit", "-q", "-m", "edited by hand")
    assert committed.code == 0, committed.err
    assert not marker.exists(), "qmem-git git commit ran the agent's hook or fsmonitor"
    assert git(memory, "log", "-1", "--format=%s").strip() == "edited by hand"
    tree = git(memory, "ls-tree", "-r", "--name-only", "HEAD").split()
    assert "user/coffee.md" in tree and not [p for p in tree if ".git" in p.split("/")]
    assert git(bare, "rev-parse", "main").strip() != ""
    assert agent_git.is_dir() and (agent_git / "hooks" / "pre-commit").exists()  # left alone
    assert_clean_repo(memory)
    # the plant works: git run *in* the memory folder (not through qmem-git) runs it
    subprocess.run(["git", "-C", str(memory), "status"], capture_output=True, check=False)
    assert marker.exists()


def test_qmem_gits_own_hook_still_guards_a_hand_commit(tmp_path: Path, memory: Path) -> None:
    marker = tmp_path / "MARKER"
    plant(memory, marker)
    before = head(memory)
    bad = "---\nname: leak\ndescription: d\ntype: bogus\n---\n\nkey AKIAIOSFODNN7EXAMPLE\n"
    (memory / "user" / "leak.md").write_text(bad)
    assert qmem(memory, "git", "add", "user/leak.md").code == 0
    refused = qmem(memory, "git", "commit", "-q", "-m", "leak")
    assert refused.code == 1, refused.out + refused.err
    assert "type-invalid" in refused.out + refused.err
    assert head(memory) == before and not marker.exists()
    hook = gitdir(memory) / "hooks" / "pre-commit"
    assert hook.stat().st_mode & stat.S_IXUSR and "qmem-git-managed-hook" in hook.read_text()


def test_doctor_reports_a_git_folder_inside_the_memory_root(tmp_path: Path, memory: Path) -> None:
    assert qmem(memory, "doctor").code == 0
    (memory / ".git").write_text("gitdir: /elsewhere\n")  # a .git file counts as well
    result = qmem(memory, "doctor")
    assert result.code == 0, result.out  # a warning: the agent owns the folder
    assert f"{memory / '.git'} is in the memory folder" in result.out
    assert (memory / ".git").read_text() == "gitdir: /elsewhere\n"


def test_where_names_the_repository_beside_the_memory_folder(memory: Path) -> None:
    data = qmem(memory, "--json", "where").json()
    assert data["repository"] == str(gitdir(memory)) and data["initialized"] is True
    assert not (memory / ".git").exists()
    assert f"repository: {gitdir(memory)}" in qmem(memory, "where").out


def test_qmem_git_git_passes_git_s_exit_code_and_paths(tmp_path: Path, memory: Path) -> None:
    missing = qmem(memory, "git", "rev-parse", "--verify", "-q", "no-such-branch")
    assert missing.code == 1 and missing.err == ""
    assert qmem(memory, "git", "frobnicate").code == 1  # git's own usage error: exit 1
    top = qmem(memory, "git", "rev-parse", "--show-toplevel", cwd=tmp_path)
    assert top.code == 0 and top.out.strip() == str(memory)
    inside = qmem(memory, "git", "ls-files", cwd=memory / "user")  # paths from where you are
    assert inside.out.split() == [p.name for p in sorted((memory / "user").iterdir())]
    empty = qmem(memory, "git")
    assert empty.code == 2 and empty.err.startswith("Error: qmem-git git needs git's arguments")


def test_qmem_git_git_without_git_installed(tmp_path: Path, memory: Path) -> None:
    empty_path = tmp_path / "no-git-here"
    empty_path.mkdir()
    result = qmem(memory, "git", "status", env={"PATH": str(empty_path)})
    assert result.code == 1 and result.out == ""
    assert (
        result.err.startswith("Error: git is not installed") and "hint: install git" in result.err
    )
    assert len(result.err.splitlines()) == 1


def test_plain_git_finds_the_repository_through_its_git_dir(memory: Path) -> None:
    """``git --git-dir=<memory>.git …`` needs no --work-tree: core.worktree names the folder."""
    done = subprocess.run(
        ["git", f"--git-dir={gitdir(memory)}", "status", "--porcelain"],
        capture_output=True,
        text=True,
        check=True,
        cwd=os.path.expanduser("~"),
    )
    assert done.stdout == ""


def test_qmem_index_inside_the_memory_folder_asks_no_git(tmp_path: Path, memory: Path) -> None:
    """``qmem-index`` fixes MEMORY.md before a hand commit; run in the memory folder it must
    not ask git, which would find the agent's .git and run its core.fsmonitor."""
    marker = tmp_path / "MARKER"
    plant(memory, marker)
    (memory / "MEMORY.md").write_text("stale\n")
    code = "from qmem_git.integrations.precommit import index_main\nraise SystemExit(index_main())"
    fix = [sys.executable, "-c", code]
    for where, status in ((memory / "user", 1), (memory, 0)):
        done = subprocess.run(fix, cwd=where, capture_output=True, text=True)
        assert done.returncode == status, done.stdout + done.stderr
    assert (memory / "MEMORY.md").read_text().startswith("- [")
    assert not marker.exists()


def test_https_credentials_come_from_the_repository_not_the_agent_s_git(
    tmp_path: Path, memory: Path, served: Path
) -> None:
    """``git credential fill`` runs with the memory repository as GIT_DIR: a sync started in
    the memory folder never asks a credential helper the agent configured there."""
    marker = tmp_path / "MARKER"
    agent_git = plant(memory, marker)
    server = HttpGitServer(served).start()
    try:
        store = tmp_path / "git-credentials"
        store.write_text(f"http://{server.user}:{server.password}@127.0.0.1:{server.port}\n")
        with (agent_git / "config").open("a") as config:
            config.write(f"[credential]\n\thelper = !{memory.parent / 'agent-script.sh'}\n")
        assert qmem(memory, "git", "config", "credential.helper", f"store --file={store}").code == 0
        assert qmem(memory, "remote", "add", "origin", server.url("mem.git")).code == 0
        synced = qmem(memory, "sync", cwd=memory)
        assert synced.code == 0, synced.err
    finally:
        server.stop()
    assert not marker.exists()
