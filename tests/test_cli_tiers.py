"""``--tier project|user|team``: Qwen Code 0.24's three memory tiers, through the real process
(the click CLI and the click-free fast path), checked with C git."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from clihelpers import Run, assert_clean_repo, git, qmem_in

MEMORY = "---\nname: Terse answers\ndescription: the user wants short replies\ntype: user\n---\nx\n"


def run(project: Path, *args: str, env: dict[str, str] | None = None) -> Run:
    """``python -m qmem_git ARGS`` in ``project`` (no ``--memory-dir``: the tier decides)."""
    return qmem_in(project, *args, env=env)


def click_run(project: Path, *args: str) -> Run:
    """The same command through click (``cli.run``), never the fast path."""
    code = "import sys; from qmem_git.cli import run; sys.exit(run(sys.argv[1:]))"
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=project
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project in its own git repository, with one team memory committed there."""
    folder = tmp_path / "proj"
    team = folder / ".qwen" / "team-memory"
    team.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(folder)], check=True)
    (team / "terse.md").write_text(MEMORY)
    (team / "MEMORY.md").write_text("- [Terse answers](terse.md) — the user wants short replies")
    subprocess.run(["git", "-C", str(folder), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(folder), "commit", "-qm", "team memory"], check=True)
    return folder


def where(project: Path, tier: str, env: dict[str, str] | None = None) -> dict[str, str]:
    result = run(project, "--tier", tier, "where", "--json", env=env)
    assert result.code == 0, result.err
    data: dict[str, str] = result.json()
    return data


def test_where_names_each_tiers_folder_state_and_repository(
    project: Path, isolated_home: Path, tmp_path: Path
) -> None:
    qwen = isolated_home / ".qwen"
    user = where(project, "user")
    assert (user["memory_root"], user["state_dir"]) == (f"{qwen}/memories", f"{qwen}/memories.qmem")
    assert user["repository"] == f"{qwen}/memories.git" and user["tier"] == "user"
    team = where(project, "team")
    assert team["memory_root"] == f"{project}/.qwen/team-memory"
    assert team["repository"] == f"{project}/.git" and team["initialized"] is True
    default = where(project, "project")
    assert default["memory_root"].startswith(f"{qwen}/projects/") and default["tier"] == "project"
    moved = where(project, "user", {"QWEN_CODE_MEMORY_BASE_DIR": str(tmp_path / "mb")})
    assert moved["memory_root"] == str(tmp_path / "mb" / "memories")
    after = run(project, "where", "--json", "--tier", "team")  # after the command name too
    assert after.json()["memory_root"] == team["memory_root"]


def test_user_tier_is_versioned_recalled_and_leaves_qwens_files_alone(
    project: Path, isolated_home: Path
) -> None:
    qwen = isolated_home / ".qwen"
    assert run(project, "--tier", "user", "init").code == 0
    saved = run(
        project, "--tier", "user", "remember", "--type", "user", "I prefer green tea always"
    )
    assert saved.code == 0, saved.err
    written = qwen / "memories" / "feedback" / "short.md"  # what Qwen's extraction would write
    written.parent.mkdir()
    written.write_text(MEMORY.replace("type: user", "type: feedback"))
    assert run(project, "--tier", "user", "snapshot").code == 0
    root = qwen / "memories"
    assert git(root, "ls-files").split() == ["MEMORY.md", "feedback/short.md", *_one(root)]
    assert_clean_repo(root)
    recalled = run(project, "--tier", "user", "recall", "green tea")
    assert recalled.code == 0 and "I prefer green tea always" in recalled.out
    assert sorted(p.name for p in qwen.iterdir()) == ["memories", "memories.git", "memories.qmem"]
    assert not (root / ".git").exists()
    assert run(project, "--tier", "user", "index", "--check").code == 0
    assert run(project, "--tier", "user", "validate").code == 0
    log = run(project, "--tier", "user", "log", "--json").json()
    assert [entry["op"] for entry in log] == ["edit", "remember", "index"]  # snapshot infers the op


def _one(root: Path) -> list[str]:
    return [p.relative_to(root).as_posix() for p in (root / "user").iterdir()]


WRITERS = [
    ["init"],
    ["remember", "I prefer green tea always"],
    ["snapshot"],
    ["sync"],
    ["forget", "terse"],
    ["undo"],
    ["repair"],
    ["remote", "add", "origin", "/nowhere"],
    ["dream", "--force"],
]


@pytest.mark.parametrize("args", WRITERS, ids=lambda a: a[0])
def test_team_writers_refuse_and_never_make_a_nested_repository(
    project: Path, args: list[str]
) -> None:
    head = git(project, "rev-parse", "HEAD")
    for result in (
        run(project, "--tier", "team", *args),
        click_run(project, "--tier", "team", *args),
    ):
        assert result.code == 1, (result.out, result.err)
        assert result.err.count("Error:") == 1 and result.err.startswith("Error: ")
        assert f"project's own git repository ({project})" in result.err
        assert "git -C" in result.err
    assert (
        not list((project / ".qwen").glob("*.git"))
        and not (project / ".qwen" / "team-memory" / ".git").exists()
    )
    assert git(project, "rev-parse", "HEAD") == head
    assert git(project, "status", "--porcelain") == ""


def test_team_readers_work_on_the_projects_folder(project: Path) -> None:
    assert run(project, "--tier", "team", "validate").code == 0
    staged = run(project, "--tier", "team", "validate", "--staged")
    assert staged.code == 0 and "checks the whole team folder" in staged.err
    assert "warning:" not in staged.err
    recalled = run(project, "--tier", "team", "recall", "short replies")
    assert recalled.code == 0 and "Terse answers" in recalled.out
    assert git(project, "status", "--porcelain") == ""


@pytest.mark.parametrize("runner", [run, click_run], ids=["fast", "click"])
def test_an_unknown_tier_or_a_tier_with_memory_dir_is_a_usage_error(
    project: Path, tmp_path: Path, runner: object
) -> None:
    assert callable(runner)
    bad = runner(project, "--tier", "shared", "recall", "x")
    assert bad.code == 2 and "shared" in bad.err
    both = runner(project, "--tier", "user", "--memory-dir", str(project), "recall", "x")
    assert both.code == 2 and "--memory-dir or --tier" in both.err
    assert json.loads(run(project, "where", "--json").out)["tier"] == "project"


def _commit(project: Path, message: str) -> None:
    subprocess.run(["git", "-C", str(project), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(project), "commit", "-qm", message], check=True)


def test_team_log_history_diff_and_show_read_the_projects_history(project: Path) -> None:
    team = project / ".qwen" / "team-memory"
    (project / "src.py").write_text("print(1)\n")
    _commit(project, "code only")
    (team / "rg.md").write_text(MEMORY.replace("Terse answers", "Use rg"))
    _commit(project, "team: use rg")
    log = run(project, "--tier", "team", "log", "--json").json()
    assert [entry["subject"] for entry in log] == ["team: use rg", "team memory"]
    assert [c["path"] for c in log[0]["changes"]] == ["rg.md"]  # relative to the team folder
    assert run(project, "--tier", "team", "log", "-n", "1").out.split()[3:] == [
        "team:",
        "use",
        "rg",
    ]
    history = run(project, "--tier", "team", "history", "terse.md", "--json").json()
    assert [entry["subject"] for entry in history] == ["team memory"]
    assert run(project, "--tier", "team", "history", "nothing.md").code == 1
    (team / "terse.md").write_text(MEMORY + "more\n")
    diff = run(project, "--tier", "team", "diff", "--json").json()  # not committed yet
    assert diff["files"] == [{"path": "terse.md", "status": "M"}] and "+more" in diff["diff"]
    shown = run(project, "--tier", "team", "show", "HEAD~1")
    assert shown.code == 0 and "code only" in shown.out and "diff --git" not in shown.out
    refused = run(project, "--tier", "team", "diff", "--", "--output=/tmp/x")
    assert refused.code == 2 and "cannot start with '-'" in refused.err
    assert not list((project / ".qwen").glob("*.git"))


def test_project_recall_also_reads_the_user_tier_as_qwen_does(
    project: Path, isolated_home: Path, tmp_path: Path
) -> None:
    user = isolated_home / ".qwen" / "memories" / "user"
    user.mkdir(parents=True)
    (user / "tea.md").write_text(MEMORY.replace("Terse answers", "Green tea always"))
    found = run(project, "recall", "green tea", "--json")  # the project store is not set up
    assert found.code == 0 and found.json()["selected"] == ["user/tea.md"]
    assert not (isolated_home / ".qwen" / "memories.qmem").exists()  # recall made no state
    elsewhere = tmp_path / "notes" / "memory"
    elsewhere.mkdir(parents=True)
    assert run(project, "--memory-dir", str(elsewhere), "recall", "green tea").code == 1
    assert run(project, "--tier", "team", "recall", "green tea").code == 1  # team: its own


def test_the_user_tier_follows_you_to_another_machine(project: Path, tmp_path: Path) -> None:
    """Synced to its own remote, cloned on a machine with another home folder."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    assert run(project, "--tier", "user", "init").code == 0
    assert run(project, "--tier", "user", "remember", "I prefer green tea always").code == 0
    assert run(project, "--tier", "user", "remote", "add", "origin", str(remote)).code == 0
    assert run(project, "--tier", "user", "sync").code == 0
    other = tmp_path / "other-home"
    other.mkdir()
    cloned = run(project, "--tier", "user", "clone", str(remote), env={"HOME": str(other)})
    assert cloned.code == 0, cloned.err
    root = other / ".qwen" / "memories"
    assert git(root, "log", "--format=%s", "-1").strip().startswith("remember: ")
    assert sorted(p.name for p in root.parent.iterdir()) == [
        "memories",
        "memories.git",
        "memories.qmem",
    ]
    recalled = run(project, "recall", "green tea", env={"HOME": str(other)})
    assert "I prefer green tea always" in recalled.out  # recalled in every project there
