"""Faults found by attacking the landed code (issue 21), each through the real CLI and checked
with C git: nothing lost, nothing leaked, one documented error line per failure."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clihelpers import assert_clean_repo, git, head, one_error_line, qmem, qwen_transcript
from conftest import require_tool
from helpers_git import git_argv, gitdir, init_memory_git


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    root = tmp_path / "state" / "memory"
    assert qmem(root, "init").code == 0
    assert qmem(root, "remember", "I prefer green tea in the morning").code == 0
    return root


# --------------------------------------------------------------------------- MEMORY.md


@pytest.mark.parametrize(
    "content",
    [b"x" * 300_000, b"\xff\xfe\x00" * 100 + b"\n<<<<<<< ours\n"],
    ids=["over-256-KiB", "binary"],
)
@pytest.mark.parametrize("extra", [(), ("--why", "it keeps me awake")], ids=["fast", "click"])
def test_an_oversized_or_malformed_index_is_just_regenerated(
    memory: Path, content: bytes, extra: tuple[str, ...]
) -> None:
    (memory / "MEMORY.md").write_bytes(content)
    result = qmem(memory, "remember", "I prefer black coffee in the afternoon", *extra)
    assert result.code == 0, result.err
    assert "Traceback" not in result.err
    index = (memory / "MEMORY.md").read_text(encoding="utf-8")
    assert index.startswith("- [I prefer black coffee in the afternoon](user/")
    assert "I prefer green tea in the morning" in index
    assert git(memory, "show", "HEAD:MEMORY.md") == index
    assert_clean_repo(memory)


# --------------------------------------------------------------------------- extraction queue

ROUNDS = 3
FACTS = [
    "I prefer tabs over spaces in Makefiles",
    "The on-call rota is https://wiki.internal/oncall",
    "I prefer short commit messages in the imperative mood",
    "I prefer pytest fixtures over unittest setUp methods",
    "The latency dashboard is https://grafana.internal/d/latency",
    "Never force-push to the shared release branches",
    "I prefer British spelling in user-facing documentation",
    "The mobile release freeze starts on the first Monday of March",
    "Our incident runbooks are kept in the ops-handbook wiki space",
    "I prefer rebasing feature branches instead of merge commits",
    "The design documents are at https://docs.internal/design",
    "Integration tests must never call the production payment gateway",
]


def _extract_all(memory: Path, tmp_path: Path, round_number: int) -> list[subprocess.Popen[str]]:
    procs = []
    for number, fact in enumerate(FACTS):
        session = f"round{round_number}-session{number:02d}"
        text = f"{fact} (round {round_number})" if round_number else fact
        path = qwen_transcript(tmp_path / f"{session}.jsonl", session, [text])
        args = ["--memory-dir", str(memory), "--json", "extract", "--transcript", str(path)]
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "qmem_git", *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    return procs


def test_concurrent_extractions_of_different_sessions_all_land(
    memory: Path, tmp_path: Path
) -> None:
    """Issue 21: 12 extract processes of 12 sessions at once, three times; every session's facts are
    committed (before, the latest queued request won across sessions and most were lost)."""
    statuses = []
    for round_number in range(ROUNDS):
        for proc in _extract_all(memory, tmp_path, round_number):
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err
            statuses.append(json.loads(out)["status"])
    assert "queued" in statuses  # they did run at the same time
    log = qmem(memory, "--json", "log", "-n", "1000", "--op", "extract").json()
    sessions = {entry["session"] for entry in log}
    expected = {f"round{r}-session{n:02d}" for r in range(ROUNDS) for n in range(len(FACTS))}
    assert sessions == expected
    tree = git(memory, "grep", "-h", "-i", "-e", "round 1", "HEAD", "--", ":!MEMORY.md")
    assert tree.count("(round 1)") >= len(FACTS)
    assert list((memory.parent / "extract-queue").iterdir()) == []
    assert_clean_repo(memory)


# --------------------------------------------------------------------------- hostile text


def test_terminal_escapes_are_not_stored_and_links_in_titles_are_not_live(memory: Path) -> None:
    text = "\x1b[31mThe wiki](http://evil.example) says `make` builds\x1b[0m the docs"
    result = qmem(memory, "remember", "--why", "\x1b]0;pwned\x07it is fast", text)
    assert result.code == 0, result.err
    stored = git(memory, "grep", "-h", "-e", "wiki", "-e", "fast", "HEAD", "--", ":!MEMORY.md")
    assert "The wiki](http://evil.example) says `make` builds the docs" in stored
    assert "\x1b" not in stored and "[31m" not in stored and "[0m" not in stored
    assert "it is fast" in stored and "pwned" not in stored
    index = (memory / "MEMORY.md").read_text(encoding="utf-8")
    (line,) = [line for line in index.splitlines() if "wiki" in line]
    assert line.count("](") == 1  # only the entry's own link to its file
    assert "] (http://evil.example)" in line and "'make'" in line
    assert_clean_repo(memory)


# --------------------------------------------------------------------------- a lost main


def _history(memory: Path) -> str:
    assert qmem(memory, "remember", "I prefer black coffee after lunch").code == 0
    forgot = qmem(memory, "forget", "--id", "user/i-prefer-green-tea-in-the-morning.md")
    assert forgot.code == 0, forgot.err
    return head(memory)


def _damage(memory: Path, how: str) -> None:
    ref = gitdir(memory) / "refs" / "heads" / "main"
    if how == "missing":
        ref.unlink()
    elif how == "empty":
        ref.write_text("")
    else:
        ref.write_text("hello world\n")


@pytest.mark.parametrize("how", ["missing", "empty", "garbage"])
def test_a_lost_main_is_exit_6_with_the_commit_to_restore_never_a_new_root(
    memory: Path, how: str
) -> None:
    tip = _history(memory)
    remote = memory.parent / "remote.git"
    git(memory.parent, "init", "-q", "--bare", str(remote))
    assert qmem(memory, "remote", "add", "origin", str(remote)).code == 0
    _damage(memory, how)
    objects_before = git(memory, "count-objects", "-v")
    for args in (
        ("remember", "I prefer jasmine tea in the evening"),
        ("remember", "--why", "calm", "I prefer jasmine tea in the evening"),
        ("forget", "--id", "user/i-prefer-black-coffee-after-lunch.md"),
        ("undo",),
        ("log",),
        ("restore", "green tea"),
        ("sync",),
    ):
        result = qmem(memory, *args)
        assert result.code == 6, (args, result.err)
        line = one_error_line(result.err)
        assert "refs/heads/main" in line and tip[:12] in line and "doctor --fix" in line
    assert git(memory, "count-objects", "-v") == objects_before  # nothing was written
    doctor = qmem(memory, "doctor")
    assert doctor.code == 1 and "doctor --fix" in doctor.out
    fixed = qmem(memory, "doctor", "--fix")
    assert f"points at {tip[:12]} again" in fixed.err
    assert head(memory) == tip
    assert qmem(memory, "remember", "I prefer jasmine tea in the evening").code == 0
    assert git(memory, "rev-parse", "HEAD~1").strip() == tip
    restored = qmem(memory, "restore", "--id", "user/i-prefer-green-tea-in-the-morning.md")
    assert restored.code == 0, restored.err  # the forgotten memory is still reachable
    assert (memory / "user" / "i-prefer-green-tea-in-the-morning.md").exists()
    assert qmem(memory, "sync").code == 0
    assert git(remote, "rev-parse", "main").strip() == head(memory)
    assert (
        git(remote, "rev-list", "--count", "main").strip()
        == git(memory, "rev-list", "--count", "HEAD").strip()
    )
    assert_clean_repo(memory)


def test_without_the_index_record_the_newest_commit_of_the_old_history_is_named(
    memory: Path,
) -> None:
    tip = _history(memory)
    (gitdir(memory) / "refs" / "heads" / "main").unlink()
    (gitdir(memory) / "qmem-index").unlink()
    git(memory, "repack", "-a", "-d", "-q")  # packed as well as loose objects are searched
    result = qmem(memory, "remember", "I prefer jasmine tea in the evening")
    assert result.code == 6 and tip in one_error_line(result.err)
    assert qmem(memory, "doctor", "--fix").code == 0
    assert head(memory) == tip
    assert_clean_repo(memory)


def test_a_new_empty_repository_still_makes_its_first_commit(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    init_memory_git(root)
    (root / "user").mkdir()
    result = qmem(root, "remember", "I prefer green tea in the morning")
    assert result.code == 0, result.err
    assert git(root, "rev-list", "--count", "HEAD").strip() in ("1", "2")
    assert_clean_repo(root)


# --------------------------------------------------------------------------- full disk


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs of its own (the tests run as root), unmounted afterwards."""
    require_tool(os.geteuid() == 0 and shutil.which("mount") is not None, "root and mount(8)")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0755", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
    )
    require_tool(mounted.returncode == 0, f"a tmpfs mount ({mounted.stderr.strip()})")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)


def _fill(disk: Path, leave_bytes: int) -> Path:
    """Fill ``disk`` until ``leave_bytes`` (rounded to its blocks) are free."""
    filler = disk / "filler"
    filler.unlink(missing_ok=True)
    fs = os.statvfs(disk)
    size = max(fs.f_bavail * fs.f_frsize - leave_bytes, 0)
    with open(filler, "wb") as handle:
        handle.write(b"\0" * size)
    return filler


def test_a_full_disk_is_exit_4_with_a_hint_and_loses_nothing_acknowledged(
    small_disk: Path,
) -> None:
    memory = small_disk / "state" / "memory"
    assert qmem(memory, "init").code == 0
    saved = []
    codes = set()
    for number, free_kib in enumerate(range(0, 68, 4)):
        fact = f"I prefer build number {number} to run on the fast queue"
        _fill(small_disk, free_kib * 1024)
        result = qmem(memory, "remember", "--why", "speed" if number % 2 else "", fact)
        codes.add(result.code)
        assert result.code in (0, 4), (free_kib, result.err)
        if result.code == 0:
            saved.append(fact)
        else:
            line = one_error_line(result.err)
            assert "(hint: free some disk space" in line, line
        (small_disk / "filler").unlink()
        check = qmem(memory, "log")  # a reader after the failure: no internal error
        assert check.code == 0, check.err
    assert 4 in codes and 0 in codes  # the sweep did cross the point where writes fail
    after = qmem(memory, "remember", "I prefer the disk to have room again")
    assert after.code == 0, after.err
    tree = git(memory, "grep", "-h", "-e", "build number", "HEAD", "--", ":!MEMORY.md")
    for fact in saved:
        assert fact in tree  # every acknowledged memory is committed
    assert_clean_repo(memory)


# --------------------------------------------------------------------------- hostile history


def _deep_commit(repo: Path, depth: int) -> str:
    """A commit on top of ``repo``'s HEAD adding ``user/d/d/…/x.md`` ``depth`` folders deep
    (built with C git's plumbing: no file system can hold that path)."""

    def plumb(*args: str, stdin: str = "") -> str:
        done = subprocess.run(
            [*git_argv(str(repo)), *args], input=stdin, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    blob = plumb("hash-object", "-w", "--stdin", stdin="---\nname: x\n---\n\nx\n")
    tree = plumb("mktree", stdin=f"100644 blob {blob}\tx.md\n")
    for _ in range(depth):
        tree = plumb("mktree", stdin=f"040000 tree {tree}\td\n")
    user = plumb("rev-parse", "HEAD:user")
    listing = plumb("ls-tree", user) + f"\n040000 tree {tree}\td\n"
    user = plumb("mktree", stdin=listing)
    root = plumb("ls-tree", "HEAD").replace(plumb("rev-parse", "HEAD:user"), user)
    root_tree = plumb("mktree", stdin=root + "\n")
    return plumb("commit-tree", root_tree, "-p", "HEAD", "-m", "deep")


@pytest.mark.parametrize("transport", ["git-daemon", "path"])
def test_a_5000_deep_tree_from_a_remote_is_refused_with_a_reason(
    memory: Path, tmp_path: Path, served: Path, daemon: Any, transport: str
) -> None:
    remote = served / "mem.git"
    url = daemon.url("mem.git") if transport == "git-daemon" else str(remote)
    assert qmem(memory, "remote", "add", "origin", url).code == 0
    assert qmem(memory, "sync").code == 0
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", "-b", "main", str(remote), str(other))
    deep = _deep_commit(other, 5000)
    git(other, "push", "-q", "origin", f"{deep}:refs/heads/main")
    before = head(memory)
    result = qmem(memory, "sync")
    line = one_error_line(result.err)
    # C git sends it over git://, and a path remote's objects are walked with a stack, not
    # recursion: either way the incoming check refuses it, naming the path
    assert result.code == 1, result.err
    assert "refusing the remote's history" in line and "nested deeper than 32" in line
    assert head(memory) == before
    for args in (("log",), ("doctor",), ("validate",)):
        assert "Traceback" not in qmem(memory, *args).err
    assert_clean_repo(memory)


# --------------------------------------------------------------------------- Ctrl-C


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupted(args: list[str], after: float, cwd: Path | None = None) -> tuple[int, str]:
    # the console script, as people run it: it leaves through os._exit once done, so a
    # signal that lands after the work cannot hit the interpreter's teardown
    script = Path(sys.executable).with_name("qmem-git")
    proc = subprocess.Popen(
        [str(script), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        # as from a terminal: a suite started in the background inherits SIGINT ignored
        preexec_fn=_default_sigint,
    )
    time.sleep(after)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err


@pytest.mark.parametrize("after", [0.08, 0.15, 0.25, 0.4])
def test_ctrl_c_during_start_up_exits_130_without_a_word(memory: Path, after: float) -> None:
    args = ["--memory-dir", str(memory), "remember", "--why", "calm", "I prefer mint tea at noon"]
    code, err = _interrupted(args, after)
    assert "Traceback" not in err and "Error" not in err, err
    assert code in (0, 130), err  # 0: it finished before the signal came
    subprocess.run([*git_argv(str(memory)), "fsck", "--strict"], check=True, capture_output=True)
    after = qmem(memory, "remember", "I prefer rooibos tea before bed")  # repairs what was left
    assert after.code == 0, after.err
    assert_clean_repo(memory)


def test_an_interrupted_clone_exits_130_and_can_be_retried(tmp_path: Path) -> None:
    from servers import silent_server

    with silent_server() as port:
        target = tmp_path / "clone"
        args = ["--memory-dir", str(target), "clone", f"git://127.0.0.1:{port}/mem.git"]
        code, err = _interrupted(args, 1.5)
    assert code == 130, err
    assert "Traceback" not in err and "Error" not in err, err
    assert qmem(target, "log").code in (0, 2)  # no lost-branch or internal error left behind


# --------------------------------------------------------------------------- refused writes


def test_a_read_only_disk_is_exit_4_with_a_hint(small_disk: Path) -> None:
    memory = small_disk / "state" / "memory"
    assert qmem(memory, "init").code == 0
    assert qmem(memory, "remember", "I prefer green tea in the morning").code == 0
    before = head(memory)
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    try:
        for args in (
            ("remember", "I prefer black coffee after lunch"),
            ("remember", "--why", "taste", "I prefer black coffee after lunch"),
            ("forget", "--id", "user/i-prefer-green-tea-in-the-morning.md"),
        ):
            result = qmem(memory, *args)
            assert result.code == 4, (args, result.err)
            line = one_error_line(result.err)
            assert "(hint: make " in line and "writable" in line, line
        assert qmem(memory, "log").code == 0  # reading needs no write
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(small_disk)], check=True)
    assert head(memory) == before
    assert qmem(memory, "remember", "I prefer black coffee after lunch").code == 0
    assert_clean_repo(memory)


# --------------------------------------------------------------------------- damaged repository


def _damage_pack(memory: Path) -> None:
    git(memory, "repack", "-a", "-d", "-q")
    git(memory, "prune-packed")
    (pack,) = (gitdir(memory) / "objects" / "pack").glob("*.pack")
    pack.chmod(0o644)
    data = bytearray(pack.read_bytes())
    data[len(data) // 3] ^= 0x01  # one flipped bit, in an object no writer needs to read
    pack.write_bytes(bytes(data))


def test_a_damaged_pack_stops_writers_and_readers_with_exit_6(memory: Path) -> None:
    for text in ("I prefer black coffee after lunch", "I prefer oolong tea at night"):
        assert qmem(memory, "remember", text).code == 0
    remote = memory.parent / "remote.git"
    git(memory.parent, "init", "-q", "--bare", str(remote))
    assert qmem(memory, "remote", "add", "origin", str(remote)).code == 0
    _damage_pack(memory)
    before = head(memory)
    for args in (
        ("remember", "I prefer jasmine tea in the evening"),
        ("remember", "--why", "calm", "I prefer jasmine tea in the evening"),
        ("forget", "--id", "user/i-prefer-oolong-tea-at-night.md"),
        ("sync",),
        ("log",),
    ):
        result = qmem(memory, *args)
        assert result.code == 6, (args, result.err)
        assert "internal error" not in one_error_line(result.err)
    assert head(memory) == before  # no writer committed on top of the damage
    doctor = qmem(memory, "doctor")
    assert doctor.code == 1 and ".pack is damaged" in doctor.out


def test_a_garbled_git_config_is_exit_6_naming_the_file(memory: Path) -> None:
    config = gitdir(memory) / "config"
    good = config.read_bytes()
    config.write_bytes(b"[core\n\tbare = what\n[[[\n")
    ref = gitdir(memory) / "refs" / "heads" / "main"
    before = ref.read_text()  # C git itself refuses to run with this config
    for args in (
        ("remember", "I prefer jasmine tea in the evening"),
        ("remember", "--why", "calm", "I prefer jasmine tea in the evening"),
        ("log",),
        ("sync",),
        ("remote", "list"),
        ("where",),
    ):
        result = qmem(memory, *args)
        assert result.code == 6, (args, result.err)
        line = one_error_line(result.err)
        assert str(config) in line and "internal error" not in line, line
    assert ref.read_text() == before
    config.write_bytes(good)
    assert qmem(memory, "remember", "I prefer jasmine tea in the evening").code == 0
    assert_clean_repo(memory)
