"""VS Code tasks: rendering, marker-based install into tasks.json (JSONC), bundled-copy drift,
and the problemMatcher regex against the real ``qmem-git validate --format gcc`` output."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from qmem_git.errors import QmemError
from qmem_git.integrations import vscode

REPO_ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 5, 20, 8, 0, 0, tzinfo=timezone.utc)
QMEM_GIT = Path(sys.executable).parent / "qmem-git"

USER_TASKS = """{
  // my build tasks
  "version": "2.0.0",
  "tasks": [
    {
      "label": "build",
      "type": "shell",
      "command": "make", /* the usual */
      "args": ["all",],
    },
    { "label": "qmem: mine", "type": "shell", "command": "echo" },
  ],
  "inputs": [ { "id": "other", "type": "promptString" }, ],
}
"""


def labels(data: dict[str, Any]) -> list[str]:
    return [task["label"] for task in data["tasks"]]


def test_rendered_tasks_are_marked_and_complete() -> None:
    data = vscode.render_tasks_file()
    assert data["version"] == "2.0.0"
    names = ["validate", "recall", "log", "diff", "sync", "dream", "forget"]
    assert labels(data) == [f"qmem: {name}" for name in names]
    assert all(vscode.is_our_task(task) for task in data["tasks"])
    validate = data["tasks"][0]
    assert validate["args"] == ["validate", "--format", "gcc"]
    assert validate["runOptions"] == {"runOn": "folderOpen"}
    assert validate["problemMatcher"]["owner"] == "qmem"
    assert validate["problemMatcher"]["pattern"]["regexp"] == vscode.GCC_REGEXP
    assert all(task["problemMatcher"] == [] for task in data["tasks"][1:])
    used = {arg for task in data["tasks"] for arg in task["args"] if arg.startswith("${input:")}
    assert used == {f"${{input:{item['id']}}}" for item in data["inputs"]}


def test_the_forget_task_lists_and_asks_before_removing() -> None:
    """A task run by a click in the editor must not remove memories on its first run."""
    forget = next(t for t in vscode.render_tasks() if t["label"] == "qmem: forget")
    assert forget["args"][:2] == ["forget", "--interactive"]
    assert "asks" in forget["detail"] or "confirm" in forget["detail"]


def test_install_merges_into_jsonc_and_round_trips(tmp_path: Path) -> None:
    path = tmp_path / ".vscode" / "tasks.json"
    path.parent.mkdir()
    path.write_text(USER_TASKS)
    result = vscode.install_tasks(str(tmp_path), now=NOW)
    assert result.changed and result.path == str(path)
    assert result.backup == f"{path}.bak-20260520-080000"
    assert Path(result.backup).read_text() == USER_TASKS
    assert any("comments" in note for note in result.notes)
    data = json.loads(path.read_text())
    assert labels(data)[:2] == ["build", "qmem: mine"]  # a look-alike without our marker stays
    assert data["tasks"][0]["args"] == ["all"]
    assert [item["id"] for item in data["inputs"]] == ["other", "qmemQuery", "qmemForgetQuery"]

    again = vscode.install_tasks(str(tmp_path), now=NOW)
    assert not again.changed and again.backup is None

    removed = vscode.install_tasks(str(tmp_path), uninstall=True, now=NOW)
    assert removed.changed
    assert json.loads(path.read_text()) == {
        "version": "2.0.0",
        "tasks": [
            {"label": "build", "type": "shell", "command": "make", "args": ["all"]},
            {"label": "qmem: mine", "type": "shell", "command": "echo"},
        ],
        "inputs": [{"id": "other", "type": "promptString"}],
    }


def test_install_into_a_fresh_folder_and_uninstall_empties_it(tmp_path: Path) -> None:
    result = vscode.install_tasks(str(tmp_path))
    assert result.backup is None
    assert json.loads(Path(result.path).read_text()) == vscode.render_tasks_file()
    vscode.install_tasks(str(tmp_path), uninstall=True)
    assert json.loads(Path(result.path).read_text()) == {"version": "2.0.0"}


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    result = vscode.install_tasks(str(tmp_path), dry_run=True)
    assert result.changed and "qmem: validate" in result.text
    assert not (tmp_path / ".vscode").exists()


def test_broken_tasks_json_is_refused(tmp_path: Path) -> None:
    path = tmp_path / ".vscode" / "tasks.json"
    path.parent.mkdir()
    path.write_text('{"tasks": [ {"label": } ]}')
    with pytest.raises(QmemError, match="not valid JSON"):
        vscode.install_tasks(str(tmp_path))
    path.write_text('{"tasks": {"label": "x"}}')
    with pytest.raises(QmemError, match="not a list"):
        vscode.install_tasks(str(tmp_path))
    assert os.listdir(path.parent) == ["tasks.json"]


# --------------------------------------------------------------------------- drift


@pytest.mark.parametrize("relative", sorted(vscode.bundled_files()))
def test_bundled_copies_match_the_package(relative: str) -> None:
    """Regenerate with: python -m qmem_git.integrations.vscode --write ."""
    shipped = REPO_ROOT / relative
    assert shipped.read_text(encoding="utf-8") == vscode.bundled_files()[relative]


def test_bundled_pre_commit_hook_is_executable() -> None:
    assert os.access(REPO_ROOT / "hooks" / "git-pre-commit.sh", os.X_OK)


def test_write_regenerates_every_bundled_file(tmp_path: Path) -> None:
    assert vscode.main(["--write", str(tmp_path)]) == 0
    for relative, text in vscode.bundled_files().items():
        assert (tmp_path / relative).read_text() == text
    assert vscode.main([]) == 2


# --------------------------------------------------------------------------- problem matcher


def test_problem_matcher_parses_real_validate_output(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    (root / "user").mkdir(parents=True)
    (root / "user" / "bad.md").write_text("---\nname: Bad\ntype: misc\n---\n\nbody\n")
    (root / "project").mkdir()
    (root / "project" / "nofm.md").write_text("just text\n")
    (root / "project" / "key.md").write_text("token ghp_" + "Q" * 36 + "\n")  # an error
    done = subprocess.run(
        [str(QMEM_GIT), "--memory-dir", str(root), "validate", "--format", "gcc"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ},
    )
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert len(lines) >= 3
    tasks = json.loads((REPO_ROOT / vscode.TASKS_FILE).read_text())
    pattern = tasks["tasks"][0]["problemMatcher"]["pattern"]
    regex = re.compile(pattern["regexp"])
    parsed = []
    for line in lines:
        match = regex.match(line)
        assert match, line
        parsed.append(
            (
                match.group(pattern["file"]),
                int(match.group(pattern["line"])),
                match.group(pattern["severity"]),
            )
        )
    # run from outside the memory folder, so paths are absolute and VS Code can open them
    files = {item[0] for item in parsed}
    assert {str(root / "user/bad.md"), str(root / "project/nofm.md")} <= files
    assert (str(root / "user/bad.md"), 3, "warning") in parsed  # the type line: advice
    assert (str(root / "project/key.md"), 1, "error") in parsed  # a credential


def test_regex_keeps_windows_drive_letters() -> None:
    match = re.match(vscode.GCC_REGEXP, r"C:\mem\user\x.md:4:1: warning: odd [rule]")
    assert match and match.group(1) == r"C:\mem\user\x.md" and match.group(4) == "warning"


# --------------------------------------------------------------------------- labels, links, modes


def test_a_task_of_the_users_with_our_label_is_replaced_not_duplicated(tmp_path: Path) -> None:
    path = tmp_path / ".vscode" / "tasks.json"
    path.parent.mkdir()
    mine = {"label": "qmem: validate", "type": "shell", "command": "qmem-git validate"}
    other = {"label": "build", "type": "shell", "command": "make"}
    path.write_text(json.dumps({"version": "2.0.0", "tasks": [mine, other, dict(mine)]}))
    result = vscode.install_tasks(str(tmp_path), now=NOW)
    data = json.loads(path.read_text())
    names = labels(data)
    assert len(names) == len(set(names))  # every label once
    assert names[0] == "build"
    validate = next(task for task in data["tasks"] if task["label"] == "qmem: validate")
    assert vscode.is_our_task(validate)
    replaced = [note for note in result.notes if "'qmem: validate' was replaced" in note]
    assert len(replaced) == 1
    assert result.backup is not None and "qmem-git validate" in Path(result.backup).read_text()
    again = vscode.install_tasks(str(tmp_path), now=NOW)
    assert not again.changed and not again.notes


def test_a_symlinked_tasks_file_keeps_its_link_and_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared-tasks.json"
    shared.write_text('{"version": "2.0.0", "tasks": []}')
    shared.chmod(0o640)
    link = tmp_path / "proj" / ".vscode" / "tasks.json"
    link.parent.mkdir(parents=True)
    link.symlink_to(shared)
    result = vscode.install_tasks(str(tmp_path / "proj"), now=NOW)
    assert link.is_symlink()
    assert "qmem: validate" in labels(json.loads(shared.read_text()))
    assert os.stat(shared).st_mode & 0o777 == 0o640
    assert result.backup is not None and os.stat(result.backup).st_mode & 0o777 == 0o640
    assert any("symlink" in note for note in result.notes)


def test_install_tasks_reports_a_non_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / ".vscode" / "tasks.json"
    path.parent.mkdir()
    path.write_bytes(b'{"tasks": [{"label": "caf\xe9"}]}')
    with pytest.raises(QmemError, match="not UTF-8 text"):
        vscode.install_tasks(str(tmp_path))
    assert os.listdir(path.parent) == ["tasks.json"]
