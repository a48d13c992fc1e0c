"""Bad input through the real CLI: clear messages, documented exit codes, nothing lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clihelpers import assert_clean_repo, git, head, one_error_line, qmem, qwen_transcript
from helpers_git import git_argv, gitdir


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    root = tmp_path / "state" / "memory"
    assert qmem(root, "init").code == 0
    return root


def test_empty_transcript_changes_nothing(memory: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    before = head(memory)
    result = qmem(memory, "--json", "extract", "--transcript", str(empty))
    assert result.code == 0, result.err
    assert result.json()["patches"] == []
    assert head(memory) == before


def test_truncated_and_invalid_lines_are_skipped_counted_and_reported(
    memory: Path, tmp_path: Path
) -> None:
    good = qwen_transcript(tmp_path / "t.jsonl", "s-1", ["I prefer terse responses."])
    text = "not json at all\n" + good.read_text() + '{"uuid": "cut", "type": "us'
    good.write_text(text)
    result = qmem(memory, "--json", "extract", "--transcript", str(good))
    assert result.code == 0, result.err
    data = result.json()
    assert data["bad_lines"] == 2
    assert data["touchedTopics"] == ["user"]
    assert (
        "skipped 2 unreadable transcript line(s)"
        in qmem(memory, "extract", "--transcript", str(good)).err
    )
    assert_clean_repo(memory)


def test_missing_transcript_is_one_error(memory: Path, tmp_path: Path) -> None:
    result = qmem(memory, "extract", "--transcript", str(tmp_path / "nope.jsonl"))
    assert result.code in (1, 2)
    assert "nope.jsonl" in one_error_line(result.err)


def test_huge_transcript_is_streamed_with_bounded_memory(memory: Path, tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    filler = json.dumps(
        {"type": "assistant", "message": {"role": "model", "parts": [{"text": "x" * 1000}]}}
    )
    with path.open("w") as handle:
        line = json.dumps(
            {"type": "user", "message": {"role": "user", "parts": [{"text": "I prefer tabs."}]}}
        )
        handle.write(line + "\n")
        for _ in range(50 * 1024):  # ~50 MB
            handle.write(filler + "\n")
    assert path.stat().st_size > 50 * 1024 * 1024
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys\n"
            "from qmem_git.__main__ import main\n"
            f"args = ['--memory-dir', {str(memory)!r}, 'extract', '--transcript', {str(path)!r}]\n"
            "code = main(args)\n"
            # VmHWM is this process's own peak; ru_maxrss would include the forking parent's
            "peak = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0]\n"
            "print('PEAK', peak.split()[1])\n"
            "sys.exit(code)\n",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    peak_kib = int(proc.stdout.split("PEAK")[1])
    assert peak_kib < 150 * 1024, f"peak RSS {peak_kib} KiB"
    assert (memory / "user" / "i-prefer-tabs.md").exists()


def test_query_of_100_kb(memory: Path) -> None:
    qmem(memory, "remember", "The latency dashboard is https://grafana.internal/d/x")
    query = ("latency " * 12_500)[: 100 * 1024]
    started = time.monotonic()
    result = qmem(memory, "recall", query)
    assert result.code == 0
    assert time.monotonic() - started < 10
    assert "grafana.internal" in result.out


def test_consolidation_lock_with_garbage_is_stale(memory: Path) -> None:
    (memory.parent / "consolidation.lock").write_text("garbage\x00\xff")
    result = qmem(memory, "--json", "dream", "--force")
    assert result.code == 0, result.err
    assert result.json()["status"] in ("noop", "updated")
    assert not (memory.parent / "consolidation.lock").exists()


def test_consolidation_lock_of_another_live_process_blocks(memory: Path) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock = memory.parent / "consolidation.lock"
        lock.write_text(f"{sleeper.pid}\n")
        result = qmem(memory, "--json", "dream", "--force")
        assert result.code == 0
        assert result.json() == {"status": "skipped", "skipped_reason": "locked"}
        assert lock.read_text() == f"{sleeper.pid}\n"  # not ours: left alone
    finally:
        sleeper.kill()
        sleeper.wait()


def test_second_extract_is_queued_and_run_by_the_first(memory: Path, tmp_path: Path) -> None:
    """Spec §7.9 across processes: the busy slot queues the request; the holder runs it."""
    first = qwen_transcript(tmp_path / "a.jsonl", "sess-a", ["I prefer terse responses."])
    second = qwen_transcript(
        tmp_path / "b.jsonl", "sess-b", ["The latency dashboard is https://grafana.internal/d/x"]
    )
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from qmem_git.store.extractqueue import ExtractSlot\n"
            f"slot = ExtractSlot({str(memory.parent)!r})\n"
            "assert slot.acquire_or_queue({'transcript': 'unused'})\n"
            "print('held', flush=True)\n"
            "sys.stdin.readline()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        # a relative path, queued for a process that runs elsewhere
        queued = qmem(memory, "--json", "extract", "--transcript", "b.jsonl", cwd=tmp_path)
        assert queued.code == 0, queued.err
        assert queued.json() == {"status": "queued"}
        (queued_file,) = (memory.parent / "extract-queue").iterdir()
        assert json.loads(queued_file.read_text())["transcript"] == str(second)
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=30)
    # the next extraction runs its own request, then the queued one
    result = qmem(memory, "extract", "--transcript", str(first), cwd=memory)
    assert result.code == 0, result.err
    ops = [e["session"] for e in qmem(memory, "--json", "log", "--op", "extract").json()]
    assert ops == ["sess-b", "sess-a"]
    assert list((memory.parent / "extract-queue").iterdir()) == []
    assert_clean_repo(memory)


def test_memory_root_that_is_a_file(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    result = qmem(target, "remember", "I prefer terse responses")
    assert result.code != 0
    one_error_line(result.err)
    assert target.read_text() == "x"


def test_unwritable_state_is_a_clear_error(memory: Path) -> None:
    if os.geteuid() == 0:
        # root ignores permissions: make the lock file a directory instead
        lock = gitdir(memory) / "qmem.lock"
        if lock.exists():
            lock.unlink()
        lock.mkdir()
    else:
        os.chmod(gitdir(memory), 0o500)
    try:
        result = qmem(memory, "remember", "I prefer terse responses")
        assert result.code != 0
        one_error_line(result.err)
    finally:
        os.chmod(gitdir(memory), 0o755)


# --- a memory dir that is not a memory folder -------------------------------------------------


def _project(tmp_path: Path) -> Path:
    """A software project with its own git repo and Markdown files that are not memories."""
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "README.md").write_text("# the project\n")
    (project / "src" / "notes.md").write_text("design notes\n")
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    return project


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    "command",
    [
        ("init",),
        ("remember", "The build uses gradle eight"),
        ("index",),
        ("snapshot",),
        ("clone", "/nowhere/memory.git"),
        ("sync",),
        ("undo",),
        ("remote", "add", "origin", "/nowhere/memory.git"),
    ],
)
def test_a_project_folder_is_refused_as_memory_dir_and_left_alone(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    project = _project(tmp_path)
    before = _tree(project)
    result = qmem(project, *command)
    assert result.code == 2, result.err
    assert "is not a memory folder: it is another project's git repository" in one_error_line(
        result.err
    )
    assert _tree(project) == before  # no hook, no config change, no lock file, nothing moved
    assert not (tmp_path / "project.git").exists()


def test_whatever_the_agent_adds_to_the_folder_never_refuses_a_writer(memory: Path) -> None:
    """pinned/, a root-level note, logs/ with other files: the agent's folder (issue 18)."""
    assert qmem(memory, "remember", "The build uses gradle eight").code == 0
    (memory / "drafts").mkdir()
    (memory / "drafts" / "idea.md").write_text("not a memory file\n")
    (memory / "logs").mkdir()
    (memory / "logs" / "run.log").write_text("a log\n")
    (memory / "Pinned").mkdir()
    (memory / "Pinned" / "rule.md").write_text(
        "---\nname: Pinned rule\ndescription: by hand\ntype: feedback\n---\n\nAlways.\n"
    )
    for args in (("remember", "The deploy runs on fridays"), ("index",), ("snapshot",)):
        result = qmem(memory, *args)
        assert result.code == 0, (args, result.err)
    tree = subprocess.run(
        [*git_argv(memory), "ls-tree", "-r", "--name-only", "HEAD"],
        capture_output=True,
        text=True,
    ).stdout.split()
    assert "drafts/idea.md" in tree and "Pinned/rule.md" in tree and "logs/run.log" not in tree
    assert (memory / "logs" / "run.log").read_text() == "a log\n"
    assert "Pinned/rule.md" in (memory / "MEMORY.md").read_text()


@pytest.mark.parametrize("memory_dir", ["/", "~", "~/.."])
def test_the_root_and_home_folders_are_never_a_memory_dir(memory_dir: str) -> None:
    result = qmem(Path(memory_dir), "recall", "anything")
    assert result.code == 2
    assert "is not a memory folder" in one_error_line(result.err)


# --- text that must never reach a memory file --------------------------------------------------


def test_remember_refuses_a_conflict_marker_and_a_fact_too_long(memory: Path) -> None:
    before = head(memory)
    marker = qmem(memory, "remember", "<<<<<<< HEAD\nWe always use conflict markers here")
    assert marker.code == 1
    assert "conflict marker" in one_error_line(marker.err) and "remove the conflict" in marker.err
    long = qmem(memory, "remember", "We deploy with helm " + "x" * 20_000)
    assert long.code == 1
    assert "too long (20,020 characters, at most 16,384)" in one_error_line(long.err)
    assert head(memory) == before


def test_control_characters_and_undecodable_bytes_are_cleaned_not_crashed_on(
    memory: Path,
) -> None:
    """ESC sequences would retitle a terminal on `log`; \\xff in argv or env made commits fail
    half-way and left files behind."""
    text = "We always use \x1b]0;pwned\x07 \udcff tools here"  # \udcff: the byte 0xff in argv
    env = {"QMEM_HOST": "host\udcff", "GIT_AUTHOR_NAME": "Ana \udcff"}
    result = qmem(memory, "remember", text, env=env)
    assert result.code == 0, result.err
    (saved,) = [p for p in memory.rglob("*.md") if p.name != "MEMORY.md"]
    content = saved.read_text(encoding="utf-8")
    assert "We always use \ufffd tools here" in content and "\x1b" not in content  # all of it
    assert (
        "Qmem-Host: host\ufffd"
        in subprocess.run(
            [*git_argv(str(memory)), "log", "-1", "--format=%B"], capture_output=True, text=True
        ).stdout
    )
    assert qmem(memory, "validate").code == 0
    assert_clean_repo(memory)


def test_extract_of_half_an_emoji_saves_the_memory_cleanly(memory: Path, tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    record = {"type": "user", "message": {"role": "user", "parts": [{"text": "PLACEHOLDER"}]}}
    line = json.dumps(record).replace("PLACEHOLDER", "We always use the \\ud83d tool here")
    path.write_text(line + "\n")
    result = qmem(memory, "extract", "--transcript", str(path), "--session-id", "s")
    assert result.code == 0, result.err
    saved = [p.read_text() for p in memory.rglob("*.md") if p.name != "MEMORY.md"]
    assert any("We always use the \ufffd tool here" in text for text in saved)
    assert qmem(memory, "validate").code == 0
    assert_clean_repo(memory)


def test_recall_from_a_removed_folder_or_through_a_link_loop_is_one_error(
    memory: Path, tmp_path: Path
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    script = (
        "import os, subprocess, sys; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); "
        "sys.exit(subprocess.run([sys.executable, '-m', 'qmem_git', *sys.argv[2:]]).returncode)"
    )
    for args in (("recall", "x"), ("log", "-n", "1")):
        proc = subprocess.run(
            [sys.executable, "-c", script, str(gone), "--project", str(tmp_path), *args],
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 2
        assert "the current folder no longer exists" in one_error_line(proc.stderr)
        gone.mkdir()
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    result = qmem(loop, "recall", "x")
    assert result.code == 2  # a --memory-dir that is not a folder is a usage error
    assert "Too many levels of symbolic links" in one_error_line(result.err)


def test_a_forgotten_memory_stays_forgotten_when_two_sessions_take_turns(
    memory: Path, tmp_path: Path
) -> None:
    """extract-cursor.json holds one session; reading session A again after B must not start
    over and bring back what was forgotten in between."""
    helm = "We always deploy the services with helm charts"
    a_path = qwen_transcript(tmp_path / "a.jsonl", "sess-a", [helm])
    b_path = qwen_transcript(tmp_path / "b.jsonl", "sess-b", ["I prefer terse responses."])
    assert qmem(memory, "extract", "--transcript", str(a_path)).code == 0
    assert qmem(memory, "forget", "helm").code == 0
    assert qmem(memory, "extract", "--transcript", str(b_path)).code == 0
    qwen_transcript(
        a_path, "sess-a", [helm, "The latency dashboard is https://grafana.internal/d/x"]
    )
    result = qmem(memory, "--json", "extract", "--transcript", str(a_path))
    assert result.code == 0, result.err
    texts = "".join(p.read_text() for p in memory.rglob("*.md") if p.name != "MEMORY.md")
    assert "helm" not in texts and "grafana.internal" in texts
    cursor = json.loads((memory.parent / "extract-cursor.json").read_text())
    assert cursor["sessionId"] == "sess-a" and cursor["processedOffset"] == 4
    assert_clean_repo(memory)


def test_a_project_repository_is_not_adopted_but_a_store_may_keep_other_files(
    memory: Path, tmp_path: Path
) -> None:
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "main.py").write_text("print('hi')\n")
    subprocess.run(["git", "init", "-q", str(flat)], check=True)
    before = _tree(flat)
    result = qmem(flat, "remember", "The build uses gradle eight")
    assert result.code == 2 and "another project's git repository" in one_error_line(result.err)
    assert _tree(flat) == before
    (memory / "notes.txt").write_text("kept by hand\n")  # an existing store keeps working
    assert qmem(memory, "remember", "The build uses gradle eight").code == 0


def test_a_dry_run_refuses_what_the_real_run_refuses(memory: Path, tmp_path: Path) -> None:
    (memory / "drafts").mkdir()  # the agent's: never a reason to refuse
    assert qmem(memory, "remember", "The deploy runs on fridays", "--dry-run").code == 0
    project = tmp_path / "project"
    project.mkdir()
    (project / "Makefile").write_text("all:\n")
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    for args in (("remember", "The deploy runs on fridays"), ("forget", "deploy")):
        result = qmem(project, *args, "--dry-run")
        assert result.code == 2 and "another project's" in one_error_line(result.err)


def test_a_hostile_session_id_is_cleaned_in_the_commit_and_the_cursor(
    memory: Path, tmp_path: Path
) -> None:
    path = qwen_transcript(tmp_path / "t.jsonl", "unused", ["I prefer terse responses."])
    session = "s\x1b]0;pwned\x07-\udcff"  # ESC sequence and an undecodable argv byte
    result = qmem(memory, "extract", "--transcript", str(path), "--session-id", session)
    assert result.code == 0, result.err
    message = subprocess.run(
        [*git_argv(str(memory)), "log", "-1", "--format=%B"], capture_output=True, text=True
    ).stdout
    assert "Qmem-Session: s-\ufffd" in message and "\x1b" not in message  # the whole escape
    cursor = json.loads((memory.parent / "extract-cursor.json").read_text(encoding="utf-8"))
    assert cursor["sessionId"] == "s-\ufffd"
    assert_clean_repo(memory)


@pytest.mark.parametrize("checkout", [["switch", "-q", "-c", "exp"], ["switch", "-q", "--detach"]])
@pytest.mark.parametrize(
    "command",
    [["remember", "I prefer dark mode everywhere"], ["undo"], ["forget", "terse"], ["snapshot"]],
)
def test_writers_refuse_a_work_tree_not_on_main(
    memory: Path, checkout: list[str], command: list[str]
) -> None:
    """On another branch or a detached HEAD, a writer would commit that checkout onto main."""
    assert qmem(memory, "remember", "I prefer terse responses").code == 0
    git(memory, *checkout)
    (memory / "user" / "by-hand.md").write_text(
        "---\nname: by hand\ndescription: by hand\ntype: user\n---\n\nBy hand.\n"
    )
    main_before, head_before = git(memory, "rev-parse", "main"), git(memory, "rev-parse", "HEAD")
    run = qmem(memory, *command)
    assert run.code == 1
    where = "on branch 'exp', not" if "-c" in checkout else "at a detached HEAD ("
    line = one_error_line(run.err)
    assert f"memory is {where}" in line and "not on main: qmem-git commits only to main" in line
    assert git(memory, "rev-parse", "main") == main_before
    assert git(memory, "rev-parse", "HEAD") == head_before
    assert (memory / "user" / "by-hand.md").exists()  # not committed, not quarantined
    git(memory, "switch", "-q", "main")
    assert qmem(memory, *command).code in (0, 1)  # back on main, the writer runs
    assert "not on main" not in qmem(memory, "remember", "I prefer dark mode everywhere").err
