"""What reaches a terminal: text from hand-written files and other machines' commits is shown,
never acted on (escape sequences spelled out); piped output stays exact."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from clihelpers import git, qmem, qmem_on_tty

# retitle the terminal, write the clipboard (OSC 52), clear the screen, return to column 0
TITLE = "\x1b]0;owned\x07"
CLIPBOARD = "\x1b]52;c;cHduZWQ=\x07"
CLEAR = "\x1b[2J\r"
NO_COLOR = {"NO_COLOR": "1"}


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    """A store holding one hand-written memory with escape sequences, committed with C git
    under a subject that has one too."""
    root = tmp_path / "state" / "memory"
    assert qmem(root, "init").code == 0
    text = (
        "---\nname: deploy\ndescription: how staging deploys\ntype: project\n---\n\n"
        f"Staging deploys with {CLIPBOARD}make ship{CLEAR}.\n"
    )
    (root / "project").mkdir(exist_ok=True)
    (root / "project" / "deploy.md").write_text(text, encoding="utf-8")
    git(root, "add", "project/deploy.md")
    git(root, "commit", "-q", "--no-verify", "-m", f"edit: deploy {TITLE}notes")
    return root


def test_show_on_a_terminal_spells_out_escapes_and_keeps_colour(memory: Path) -> None:
    shown = qmem_on_tty(memory, "show")
    assert shown.code == 0, shown.out
    assert "^[]52;c;cHduZWQ=^Gmake ship^[[2J^M." in shown.out
    assert "edit: deploy ^[]0;owned^Gnotes" in shown.out
    assert "\x1b]" not in shown.out and "\x07" not in shown.out and "\x1b[2J" not in shown.out
    assert "\x1b[32m+Staging deploys" in shown.out  # our own colours still reach it


@pytest.mark.parametrize("command", ["show", "diff"])
def test_piped_output_stays_exact(memory: Path, command: str) -> None:
    piped = subprocess.run(  # bytes: text mode would read CR as a line end
        [sys.executable, "-m", "qmem_git", "--memory-dir", str(memory), command],
        capture_output=True,
        check=True,
    ).stdout.decode("utf-8")
    assert f"+Staging deploys with {CLIPBOARD}make ship{CLEAR}.\n" in piped
    assert "\x1b[32m" not in piped  # no colour off a terminal


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("log", "-n", "1"), "edit: deploy ^[]0;owned^Gnotes"),
        (("diff",), "+Staging deploys with ^[]52;c;cHduZWQ=^Gmake ship^[[2J^M."),
        (("history", "project/deploy.md"), "edit: deploy ^[]0;owned^Gnotes"),
        (("recall", "staging deploys"), "^[]52;c;cHduZWQ=^Gmake ship^[[2J^M."),  # no click
    ],
)
def test_reading_commands_spell_out_escapes_on_a_terminal(
    memory: Path, args: tuple[str, ...], expected: str
) -> None:
    run = qmem_on_tty(memory, *args, env=NO_COLOR)
    assert run.code == 0, run.out
    assert expected in run.out
    assert "\x1b" not in run.out and "\x07" not in run.out


def test_messages_naming_a_path_spell_out_its_escapes(memory: Path, tmp_path: Path) -> None:
    missing = qmem_on_tty(memory, "history", f"project/{TITLE}.md")
    assert missing.out == "No history for project/^[]0;owned^G.md.\n"
    error = qmem_on_tty(tmp_path / TITLE / "memory", "log")  # stderr: an Error: line
    assert error.code != 0
    assert error.out.startswith("Error: ") and f"{tmp_path}/^[]0;owned^G/memory" in error.out
    assert "\x1b" not in error.out and "\x07" not in error.out
