"""What reaches a terminal: text from hand-written files and other machines' commits is shown,
never acted on (escape sequences spelled out); piped output stays exact."""

from __future__ import annotations

import os
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
    error = qmem_on_tty(tmp_path / TITLE / "memory", "log", env=NO_COLOR)  # an Error: line
    assert error.code != 0
    assert error.out.startswith("Error: ") and f"{tmp_path}/^[]0;owned^G/memory" in error.out
    assert "\x1b" not in error.out and "\x07" not in error.out


# --------------------------------------------------------------------------- pager


def recorder(folder: Path, name: str) -> Path:
    """A pager that records how it was called (``<name>.args``) and what it read
    (``<name>.in``); it writes nothing to the terminal."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / name
    record = folder / name
    script.write_text(f'#!/bin/sh\necho "$@" > "{record}.args"\ncat > "{record}.in"\n')
    script.chmod(0o755)
    return script


def paged(folder: Path, name: str) -> str | None:
    record = folder / f"{name}.in"
    return record.read_text() if record.exists() else None


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("log",), "edit: deploy"),
        (("show",), "+Staging deploys"),
        (("diff",), "+Staging deploys"),
        (("history", "project/deploy.md"), "edit: deploy"),
    ],
)
def test_reading_commands_page_on_a_terminal_through_qmem_pager_first(
    memory: Path, tmp_path: Path, args: tuple[str, ...], expected: str
) -> None:
    pagers = tmp_path / "pagers"
    env = {"QMEM_PAGER": str(recorder(pagers, "qmem")), "PAGER": str(recorder(pagers, "other"))}
    run = qmem_on_tty(memory, *args, env=env, stdin_tty=True)
    assert run.code == 0, run.out
    shown = paged(pagers, "qmem")
    assert shown is not None and expected in shown
    assert "^[]" in shown  # escapes from the commit are spelled out before the pager sees them
    assert expected not in run.out and paged(pagers, "other") is None


def test_pager_is_pager_then_less_frx(memory: Path, tmp_path: Path) -> None:
    pagers = tmp_path / "pagers"
    run = qmem_on_tty(memory, "log", env={"PAGER": str(recorder(pagers, "p"))}, stdin_tty=True)
    assert run.code == 0 and "edit: deploy" in (paged(pagers, "p") or "")
    recorder(pagers, "less")  # `less` as found on PATH
    env = {"PATH": f"{pagers}{os.pathsep}{os.environ['PATH']}"}
    run = qmem_on_tty(memory, "log", env=env, stdin_tty=True)
    assert run.code == 0 and "edit: deploy" in (paged(pagers, "less") or "")
    assert (pagers / "less.args").read_text().split() == ["-FRX"]


@pytest.mark.parametrize(
    "args",
    [
        ("--no-pager", "log"),
        ("log", "--no-pager"),
        ("--json", "log"),
        ("log", "-q"),
    ],
)
def test_no_pager_with_no_pager_json_or_quiet(
    memory: Path, tmp_path: Path, args: tuple[str, ...]
) -> None:
    pagers = tmp_path / "pagers"
    env = {"QMEM_PAGER": str(recorder(pagers, "qmem"))}
    run = qmem_on_tty(memory, *args, env=env, stdin_tty=True)
    assert run.code == 0, run.out
    assert paged(pagers, "qmem") is None
    if "-q" not in args:
        assert "edit: deploy" in run.out


def test_no_pager_when_piped_or_when_the_pager_is_cat_or_empty(
    memory: Path, tmp_path: Path
) -> None:
    pagers = tmp_path / "pagers"
    env = {**os.environ, "QMEM_PAGER": str(recorder(pagers, "qmem"))}
    piped = subprocess.run(
        [sys.executable, "-m", "qmem_git", "--memory-dir", str(memory), "log"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert "edit: deploy" in piped.stdout and paged(pagers, "qmem") is None
    for off in ("cat", ""):
        run = qmem_on_tty(
            memory, "log", env={"QMEM_PAGER": off, "PAGER": str(recorder(pagers, "p"))}
        )
        assert "edit: deploy" in run.out and paged(pagers, "p") is None


# --------------------------------------------------------------------------- colour

YELLOW, RED, BOLD = "\x1b[33m", "\x1b[31m", "\x1b[1m"


def test_log_and_show_headings_are_coloured_on_a_terminal_only(memory: Path) -> None:
    commit = git(memory, "rev-parse", "HEAD").strip()
    log = qmem_on_tty(memory, "--no-pager", "log", "-n", "1")
    assert f"{YELLOW}{commit[:10]}\x1b[0m" in log.out
    show = qmem_on_tty(memory, "--no-pager", "show")
    assert f"{YELLOW}commit {commit}\x1b[0m" in show.out
    plain = qmem_on_tty(memory, "--no-pager", "log", "-n", "1", env=NO_COLOR)
    assert plain.out.startswith(commit[:10]) and "\x1b" not in plain.out
    piped = qmem(memory, "log", "-n", "1")
    assert piped.out.startswith(commit[:10]) and YELLOW not in piped.out  # exact, uncoloured


def test_errors_are_red_on_a_terminal_the_same_on_both_paths(tmp_path: Path) -> None:
    import click

    label = click.style("Error:", fg="red", bold=True)
    missing = tmp_path / "missing"
    for args in (("recall", "x"), ("log",), ("remember", "text")):
        run = qmem_on_tty(missing, *args)
        assert run.code == 2 and run.out.startswith(label + " --memory-dir "), run.out
        plain = qmem_on_tty(missing, *args, env=NO_COLOR)
        assert plain.out.startswith("Error: --memory-dir ") and "\x1b" not in plain.out
    store = tmp_path / "store"
    assert qmem(store, "init").code == 0
    fast = qmem_on_tty(store, "remember", "short")  # the click-free path's own error line
    slow = qmem_on_tty(store, "remember", "--dry-run", "short")  # --dry-run: click's path
    assert fast.code == slow.code == 1
    assert fast.out == slow.out and fast.out.startswith(label + " not saved: too short")


def test_validate_colours_severities_on_a_terminal(memory: Path) -> None:
    (memory / "user").mkdir(exist_ok=True)
    (memory / "user" / "bad.md").write_text("no frontmatter here\n")
    for fmt in ("text", "gcc"):
        run = qmem_on_tty(memory, "validate", "--format", fmt)
        assert run.code == 1
        assert f"{RED}{BOLD}error\x1b[0m" in run.out
        plain = qmem_on_tty(memory, "validate", "--format", fmt, env=NO_COLOR)
        assert "error" in plain.out and "\x1b" not in plain.out
