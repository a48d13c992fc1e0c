"""Behaving like git: folders named on the command line must exist, ``-q``/``-v`` mean the
same everywhere and refuse each other, "nothing matched" is exit 1 in every command, errors
are one line, and the help teaches."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest
from clihelpers import git, head, one_error_line, qmem, qwen_transcript
from helpers_git import gitdir

from qmem_git.cli import main as cli_group

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    root = tmp_path / "state" / "memory"
    assert qmem(root, "init").code == 0
    fact = "The release freeze starts in March"
    assert qmem(root, "remember", "--type", "project", fact).code == 0
    return root


def qmem_project(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qmem_git", "--project", str(project), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


# --------------------------------------------------------------------------- missing folders


@pytest.mark.parametrize("args", [("init",), ("where",), ("remember", "The API runs on Node 22")])
def test_a_missing_project_folder_is_a_usage_error_and_is_not_created(
    tmp_path: Path, isolated_home: Path, args: tuple[str, ...]
) -> None:
    typo = tmp_path / "typo"
    proc = qmem_project(typo, *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"--project {typo}: no such folder" in one_error_line(proc.stderr)
    assert not typo.exists()
    assert not (isolated_home / ".qwen").exists()  # no memory folder made for it either


@pytest.mark.parametrize(
    "args",
    [
        ("remember", "The API runs on Node 22"),  # the click-free path
        ("remember", "--dry-run", "The API runs on Node 22"),
        ("recall", "node"),  # the click-free path
        ("recall", "--limit", "3", "node"),
        ("log",),
        ("validate",),
        ("where",),
        ("doctor",),
        ("stats",),
        ("snapshot",),
    ],
)
def test_a_missing_memory_dir_is_a_usage_error_and_is_not_created(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    missing = tmp_path / "missing" / "path"
    result = qmem(missing, *args)
    assert result.code == 2, result.out + result.err
    assert f"--memory-dir {missing}: no such folder" in one_error_line(result.err)
    assert not (tmp_path / "missing").exists()


def test_init_and_clone_make_a_fresh_memory_dir(tmp_path: Path, memory: Path) -> None:
    fresh = tmp_path / "fresh" / "memory"
    assert qmem(fresh, "init").code == 0 and gitdir(fresh).is_dir()
    bare = tmp_path / "shared.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    assert qmem(memory, "remote", "add", "origin", str(bare)).code == 0
    assert qmem(memory, "sync").code == 0
    cloned = tmp_path / "second" / "memory"
    result = qmem(cloned, "clone", str(bare))
    assert result.code == 0, result.err
    assert head(cloned) == head(memory)


def test_an_existing_project_still_works(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    proc = qmem_project(project, "init")
    assert proc.returncode == 0, proc.stderr


def test_folder_arguments_of_commands_must_exist_too(memory: Path, tmp_path: Path) -> None:
    for args in (
        ("install-tasks", str(tmp_path / "nope")),
        ("dream", "--transcripts-dir", str(tmp_path / "nope")),
    ):
        result = qmem(memory, *args)
        assert result.code == 2 and "does not exist" in one_error_line(result.err)
    assert not (tmp_path / "nope").exists()


# --------------------------------------------------------------------------- -q and -v


@pytest.mark.parametrize(
    "args",
    [
        ("-q", "-v", "log"),
        ("-q", "log", "-v"),
        ("log", "--quiet", "--verbose"),
        ("-q", "-v", "recall", "freeze"),  # the click-free path gives way to click
        ("-v", "-q", "remember", "The API runs on Node 22"),
        ("-q", "-v", "remote"),
        ("remote", "list", "-q", "-v"),
        ("-q", "validate", "-v"),
    ],
)
def test_quiet_and_verbose_refuse_each_other(memory: Path, args: tuple[str, ...]) -> None:
    before = head(memory)
    result = qmem(memory, *args)
    assert result.code == 2, result.out + result.err
    assert "-q/--quiet and -v/--verbose cannot be used together" in one_error_line(result.err)
    assert result.out == "" and head(memory) == before


def test_quiet_prints_only_errors_in_validate_and_recall(memory: Path) -> None:
    clean = qmem(memory, "-q", "validate")
    assert clean.code == 0 and clean.out == "" and clean.err == ""
    (memory / "user").mkdir(exist_ok=True)
    (memory / "user" / "bad.md").write_text("no frontmatter, a key: ghp_" + "Q" * 36 + "\n")
    dirty = qmem(memory, "validate", "-q", "--format", "gcc")
    assert dirty.code == 1 and dirty.err == ""
    assert dirty.out.strip() and all(": error: " in line for line in dirty.out.splitlines())
    found = qmem(memory, "-q", "recall", "release freeze")
    assert found.code == 0 and found.out == found.err == ""
    missed = qmem(memory, "-q", "recall", "kubernetes helm charts")
    assert missed.code == 1 and missed.out == missed.err == ""


def test_global_options_may_follow_any_command_name(memory: Path) -> None:
    for args in (("stats", "--no-pager"), ("where", "--no-pager", "-q"), ("remote", "--no-pager")):
        result = qmem(memory, *args)
        assert result.code == 0, (args, result.err)


def test_quiet_and_verbose_read_the_same_in_every_help() -> None:
    texts = {
        name: [p.help for p in command.params if isinstance(p, click.Option)]
        for name, command in cli_group.commands.items()
        if name != "hook"
    }
    for name, helps in texts.items():
        assert any(h and h.startswith("Print only errors") for h in helps), name
        assert any(h and h.startswith("More detail") for h in helps), name


# --------------------------------------------------------------------------- nothing matched


@pytest.mark.parametrize(
    "args",
    [
        ("history", "user/never-there.md"),
        ("log", "--op", "forget"),
        ("log", "--path", "reference"),
        ("recall", "kubernetes helm charts"),
        ("recall", "--limit", "2", "kubernetes helm charts"),
        ("forget", "kubernetes helm charts"),
        ("forget", "--dry-run", "kubernetes helm charts"),
        ("restore", "kubernetes helm charts"),
    ],
)
def test_nothing_matched_is_exit_1_in_every_command(memory: Path, args: tuple[str, ...]) -> None:
    before = head(memory)
    result = qmem(memory, *args)
    assert result.code == 1, result.out + result.err
    assert "Traceback" not in result.err
    assert head(memory) == before


def test_exit_status_rule_is_in_the_help(tmp_path: Path) -> None:
    shown = qmem(tmp_path, "--help").out
    assert "1 nothing matched" in " ".join(shown.split())


# --------------------------------------------------------------------------- smaller defects


@pytest.mark.parametrize("command", ["forget", "restore"])
def test_forget_and_restore_refuse_a_query_with_an_id_the_same_way(
    memory: Path, command: str
) -> None:
    both = qmem(memory, command, "freeze", "--id", "project/x.md")
    assert both.code == 2
    assert "give a QUERY or --id, not both" in one_error_line(both.err)
    neither = qmem(memory, command)
    assert neither.code == 2 and "give a QUERY or --id" in one_error_line(neither.err)


def test_demo_help_offers_no_json_and_every_option_has_help() -> None:
    demo = cli_group.commands["demo"]
    assert "--json" not in {opt for p in demo.params for opt in getattr(p, "opts", [])}

    def check(group: click.Group, prefix: str) -> None:
        for name, command in group.commands.items():
            for param in command.params:
                if isinstance(param, click.Option):
                    assert param.help, f"{prefix}{name} {param.opts[0]} has no help"
            if isinstance(command, click.Group):
                check(command, f"{prefix}{name} ")

    check(cli_group, "")


def test_install_hooks_agent_is_explained(tmp_path: Path) -> None:
    shown = qmem(tmp_path, "install-hooks", "--help").out
    assert "--agent [qwen|claude]" in shown and "Whose settings to edit" in shown


def test_errors_click_spreads_over_lines_are_one_line(memory: Path) -> None:
    missing = qmem(memory, "install-hooks")
    assert missing.code == 2
    assert "Missing option '--agent'. Choose from: qwen, claude" in one_error_line(missing.err)
    assert len(missing.err.splitlines()) == 1
    alone = qmem(memory, "remote")  # was the whole help as an "Error:"; now lists, as git does
    assert alone.code == 0 and alone.err == "" and "No remotes" in alone.out


def test_sync_dry_run_without_push_does_not_say_it_would_push(memory: Path, tmp_path: Path) -> None:
    bare = tmp_path / "shared.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    assert qmem(memory, "remote", "add", "origin", str(bare)).code == 0
    assert qmem(memory, "sync").code == 0
    assert qmem(memory, "remember", "The staging cluster is in Frankfurt").code == 0
    dry = qmem(memory, "sync", "--dry-run", "--no-push")
    assert dry.code == 0, dry.err
    assert "Would push" not in dry.out and "would not push (--no-push)" in dry.out
    assert qmem(memory, "--json", "sync", "--dry-run", "--no-push").json()["action"] == "ahead"
    assert "Would push" in qmem(memory, "sync", "--dry-run").out


def test_extract_of_a_file_that_is_not_a_transcript_is_an_error(
    memory: Path, tmp_path: Path
) -> None:
    before = head(memory)
    result = qmem(memory, "extract", "--transcript", str(REPO / "Makefile"))
    assert result.code == 2
    line = one_error_line(result.err)
    assert "Makefile is not a transcript" in line and "JSONL" in line
    assert head(memory) == before
    empty = tmp_path / "empty.jsonl"  # a session that has not written yet is not an error
    empty.write_text("")
    assert qmem(memory, "extract", "--transcript", str(empty)).code == 0
    good = qwen_transcript(tmp_path / "t.jsonl", "s-1", ["I prefer terse responses."])
    assert qmem(memory, "extract", "--transcript", str(good)).code == 0


def test_a_skipped_dream_says_why_in_words_and_what_to_do(memory: Path) -> None:
    result = qmem(memory, "dream")
    assert result.code == 0
    assert "min_sessions" not in result.out
    assert "fewer than 5 agent sessions since the last dream" in result.out
    assert "qmem-git dream --force" in result.out
    assert qmem(memory, "--json", "dream").json()["skipped_reason"] == "min_sessions"


def test_forget_interactive_lists_then_asks(memory: Path) -> None:
    before = head(memory)
    declined = qmem(memory, "forget", "-i", "release freeze", stdin="n\n")
    assert declined.code == 0, declined.err
    assert "Would forget 1 entry" in declined.out and "Forget these?" in declined.err
    assert head(memory) == before
    no_answer = qmem(memory, "forget", "-i", "release freeze")  # stdin at its end: no
    assert no_answer.code == 1 and head(memory) == before
    accepted = qmem(memory, "forget", "--interactive", "release freeze", stdin="y\n")
    assert accepted.code == 0, accepted.err
    assert head(memory) != before
    assert "forget:" in git(memory, "log", "-1", "--format=%s")
    refused = qmem(memory, "forget", "-i", "--dry-run", "x")
    assert refused.code == 2 and "--interactive" in one_error_line(refused.err)
