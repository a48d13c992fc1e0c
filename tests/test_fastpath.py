"""The click-free runs of ``recall`` and ``remember`` must be indistinguishable from click's."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from clihelpers import assert_clean_repo, git, git_argv, qmem, qmem_on_tty, trailers

from qmem_git import fastpath
from qmem_git.core.limits import TYPE_NAMES
from qmem_git.errors import QmemError, RepoLocked

TEXT = "The staging cluster deploys from branch release-7"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["remember", TEXT], {"text": TEXT, "type": None, "why": None, "how": None}),
        (
            ["--json", "remember", "--type", "project", TEXT, "--why", "w", "--how", "h"],
            {"json": True, "text": TEXT, "type": "project", "why": "w", "how": "h"},
        ),
        (
            ["--memory-dir", "/m", "-q", "remember", "--why", "a", "--why", "b", TEXT],
            {"memory_dir": "/m", "quiet": True, "text": TEXT, "why": "b", "type": None},
        ),
    ],
)
def test_plain_remember_calls_are_parsed_here(args: list[str], expected: dict[str, object]) -> None:
    parsed = fastpath.parse_remember(args)
    assert parsed is not None
    assert {key: parsed.get(key) for key in expected} == expected


@pytest.mark.parametrize(
    "args",
    [
        ["remember", "--dry-run", TEXT],
        ["remember", "--help"],
        ["remember", "--type=user", TEXT],
        ["remember", "--type", "bogus", TEXT],
        ["remember", TEXT, "extra"],
        ["remember"],
        ["remember", "--why"],
        ["recall", TEXT],
        ["--bogus", "remember", TEXT],
    ],
)
def test_everything_else_is_left_to_click(args: list[str]) -> None:
    assert fastpath.parse_remember(args) is None


def test_recall_shapes() -> None:
    parsed = fastpath.parse_recall(["recall", "q", "--limit", "3", "--exclude", "a.md"])
    assert parsed == {"limit": 3, "exclude": ["a.md"], "query": "q"}
    assert fastpath.parse_recall(["recall", "q", "--limit", "x"]) is None
    assert fastpath.parse_recall(["recall", "--help"]) is None


@pytest.mark.parametrize("value", ["-3", "-0", "\u00b2", "\u0663", "+3", " 3", "3.0", ""])
def test_recall_limits_other_than_ascii_digits_are_left_to_click(value: str) -> None:
    assert fastpath.parse_recall(["recall", "q", "--limit", value]) is None
    assert fastpath.parse_recall(["recall", "q", "--limit", "2", "--limit", value]) is None


@pytest.mark.parametrize("value", ["-3", "\u00b2"])
def test_a_bad_recall_limit_is_a_usage_error(tmp_path: Path, value: str) -> None:
    root = store(tmp_path, "s")
    fast = qmem(root, "recall", "staging", "--limit", value)
    slow = click_path(root, "recall", "staging", "--limit", value)
    assert fast.code == slow.returncode == 2
    assert "Traceback" not in fast.err and "--limit" in fast.err
    assert fast.out == slow.stdout == ""


def test_configured_model_loads_model_settings_only_when_there_may_be_some(
    tmp_path: Path,
) -> None:
    home = str(tmp_path)
    assert fastpath.configured_model({}, home) is None
    env = {"QMEM_LLM_BASE_URL": "http://127.0.0.1:9/v1", "QMEM_LLM_MODEL": "m"}
    config = fastpath.configured_model(env, home)
    assert config is not None and (config.base_url, config.model) == (env["QMEM_LLM_BASE_URL"], "m")
    assert fastpath.configured_model({"QMEM_LLM_MODEL": "m"}, home) is None  # half configured


def test_recall_telemetry_is_recorded_once_and_can_be_switched_off(tmp_path: Path) -> None:
    from qmem_git.core.recall import RecallResult

    result = RecallResult("", [], "heuristic", 7)
    fastpath.record_recall({"QMEM_TELEMETRY": "0"}, str(tmp_path), "query", result, 0.0)
    fastpath.record_recall({}, str(tmp_path / "missing"), "query", result, 0.0)
    assert list(tmp_path.iterdir()) == []
    fastpath.record_recall({}, str(tmp_path), "query", result, 0.0)
    (line,) = (tmp_path / "telemetry.jsonl").read_text().splitlines()
    event = json.loads(line)
    assert (event["query_length"], event["docs_scanned"], event["docs_selected"]) == (5, 7, 0)
    assert event["strategy"] == "heuristic" and "query" not in line.replace("query_length", "")


def test_outcome_notes_are_recovery_first_then_change_notes_under_verbose() -> None:
    recovery = SimpleNamespace(messages=lambda: ["removed stale lock file x"])
    outcome: Any = SimpleNamespace(recovery=recovery, changeset=SimpleNamespace(notes=("n1",)))
    assert fastpath.outcome_notes(outcome, False) == ["removed stale lock file x"]
    assert fastpath.outcome_notes(outcome, True) == ["removed stale lock file x", "n1"]
    outcome.recovery = None
    assert fastpath.outcome_notes(outcome, True) == ["n1"]


def test_remember_types_are_the_format_types() -> None:
    from qmem_git.core.model import MEMORY_TYPES

    assert set(TYPE_NAMES) == set(MEMORY_TYPES)
    for kind in TYPE_NAMES:
        assert fastpath.parse_remember(["remember", "--type", kind, TEXT]) is not None


def click_path(memory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The same command through click (``cli.run``), whatever shape it has."""
    code = "import sys; from qmem_git.cli import run; sys.exit(run(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, "--memory-dir", str(memory), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def store(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name / "memory"
    assert qmem(root, "init").code == 0
    return root


@pytest.mark.parametrize("flags", [[], ["--json"], ["-q"], ["-v"]])
def test_remember_prints_and_commits_what_click_would(tmp_path: Path, flags: list[str]) -> None:
    fast_root, click_root = store(tmp_path, "fast"), store(tmp_path, "click")
    args = [*flags, "remember", TEXT, "--why", "ops asked"]
    fast = qmem(fast_root, *args)
    slow = click_path(click_root, *args)
    assert fast.code == slow.returncode == 0, (fast.err, slow.stderr)
    ours, theirs = (git(root, "rev-parse", "HEAD").strip() for root in (fast_root, click_root))

    def same(text: str, commit: str) -> str:
        return text.replace(commit, "C").replace(commit[:12], "C")

    assert same(fast.out, ours) == same(slow.stdout, theirs)
    assert same(fast.err, ours) == same(slow.stderr, theirs)
    assert git(fast_root, "ls-files", "-s") == git(click_root, "ls-files", "-s")
    assert trailers(fast_root) == trailers(click_root)
    assert_clean_repo(fast_root)


def test_remember_on_a_store_not_set_up_yet_goes_through_click(tmp_path: Path) -> None:
    root = tmp_path / "state" / "memory"
    root.mkdir(parents=True)  # an empty folder given as --memory-dir; a missing one is refused
    result = qmem(root, "remember", TEXT)
    assert result.code == 0, result.err
    assert trailers(root)["Qmem-Op"] == "remember"
    assert_clean_repo(root)


def test_remember_recreates_missing_scaffold_files(tmp_path: Path) -> None:
    root = store(tmp_path, "s")
    for path in (
        root / "MEMORY.md",
        root.parent / "meta.json",
        root.parent / "extract-cursor.json",
    ):
        path.unlink()
    result = qmem(root, "remember", TEXT)
    assert result.code == 0, result.err
    assert (root.parent / "meta.json").exists() and (root.parent / "extract-cursor.json").exists()
    assert "the-staging-cluster" in (root / "MEMORY.md").read_text()
    assert_clean_repo(root)


def test_remember_recovers_a_hand_edit_first(tmp_path: Path) -> None:
    root = store(tmp_path, "s")
    assert qmem(root, "remember", "I prefer terse responses").code == 0
    edited = root / "user" / "i-prefer-terse-responses.md"
    edited.write_text(edited.read_text().replace("terse", "short"))
    result = qmem(root, "remember", TEXT)
    assert result.code == 0
    assert "(op recover)" in result.err
    ops = [entry["op"] for entry in qmem(root, "--json", "log").json()]
    assert ops[:2] == ["remember", "recover"]
    assert_clean_repo(root)


def test_failures_map_to_one_message_and_the_documented_codes() -> None:
    assert fastpath.failure(RepoLocked("busy", "wait")) == ("busy (hint: wait)", 3, False)
    assert fastpath.failure(KeyboardInterrupt()) == ("", 130, False)  # silent
    denied = PermissionError(13, "Permission denied", "/m/.git/index")
    message, code, unexpected = fastpath.failure(denied)
    assert message.startswith("permission denied: /m/.git/index (hint: make /m/.git writable")
    assert (code, unexpected) == (4, False)
    full = OSError(errno.ENOSPC, "No space left on device", "/m/user/a.md")
    message, code, _ = fastpath.failure(full)
    assert message.startswith("no space left on the device for /m/user/a.md (hint: free some")
    assert code == 4
    try:  # a QmemError raised from a full disk keeps its words and gets code 4 and the hint
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as exc:
            raise QmemError("cannot write MEMORY.md") from exc
    except QmemError as wrapped:
        message, code, _ = fastpath.failure(wrapped)
    assert message.startswith("cannot write MEMORY.md (hint: free some disk space") and code == 4
    message, code, unexpected = fastpath.failure(RecursionError("maximum recursion depth"))
    assert "too deep" in message and (code, unexpected) == (6, False)
    message, code, unexpected = fastpath.failure(ValueError("boom"))
    assert message.startswith("internal error: ValueError: boom") and "-v" in message
    assert (code, unexpected) == (1, True)


def test_remember_forks_its_survey_before_any_costly_import() -> None:
    """What ``remember`` runs before the fork (lock, tenure, survey start) loads nothing that
    takes milliseconds, so the survey starts ~20 ms into the process."""
    code = (
        "import sys\n"
        "from qmem_git import __main__, fastpath\n"
        "from qmem_git.core.paths import layout_for\n"
        "from qmem_git.envvalues import lock_timeout\n"
        "from qmem_git.store.writer import WriterStart\n"
        "costly = ('contextlib', 'dataclasses', 'datetime', 'dulwich', 'enum', 'hashlib',\n"
        "          'inspect', 're', 'typing')\n"
        "print(sorted(name for name in costly if name in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_remember_reads_no_model_config_and_no_pack_code(tmp_path: Path) -> None:
    """``remember`` never calls a model, and commits loose objects only: neither the model
    config module nor dulwich's pack machinery is worth its import on every call."""
    root = store(tmp_path, "fast")
    code = (
        "import sys\n"
        "from qmem_git.__main__ import main\n"
        f"main(['--memory-dir', {str(root)!r}, 'remember', {TEXT!r}])\n"
        "costly = ('qmem_git.modelconfig', 'dulwich.object_store', 'dulwich.pack', 'click')\n"
        "print(sorted(name for name in costly if name in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"
    assert "remember:" in git(root, "log", "-1", "--format=%s")


def test_remember_defines_no_dataclass_and_compiles_only_the_patterns_it_types_with(
    tmp_path: Path,
) -> None:
    """Issue 18 item 10 (``remember`` on 10,000 files <= 2.5x git): a dataclass costs ~1 ms
    to define and core.sentences' 20 patterns ~13 ms to compile, on every call. ``remember``
    defines none of qmem-git's dataclasses (ChangeSet, PatchPlan, Settings are NamedTuples;
    ``dataclasses`` itself loads only under dulwich) and compiles only the patterns that type
    one fact (lead-ins and Qwen's type rules)."""
    root = store(tmp_path, "fast")
    code = (
        "import dataclasses, sys\n"
        "from qmem_git.__main__ import main\n"
        f"code = main(['--memory-dir', {str(root)!r}, 'remember', {TEXT!r}])\n"
        "ours = [m for n, m in list(sys.modules.items()) if n.startswith('qmem_git')]\n"
        "made = sorted(f'{m.__name__}.{k}' for m in ours for k, v in vars(m).items()\n"
        "              if isinstance(v, type) and v.__module__ == m.__name__\n"
        "              and dataclasses.is_dataclass(v))\n"
        "from qmem_git.core import sentences\n"
        "lazy = {k: v for k, v in vars(sentences).items() if hasattr(v, 'cache_info')}\n"
        "compiled = sorted(k for k, v in lazy.items() if v.cache_info().currsize)\n"
        "import json\n"
        "print(json.dumps([code, made, len(lazy), compiled]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    status, made, count, compiled = json.loads(done.stdout.strip().splitlines()[-1])
    assert (status, made) == (0, [])
    assert count == 20  # the test sees every pattern of core.sentences
    typing_patterns = {"_BARE_LEAD_IN", "_LEAD_IN", "_NAMED", "_PLACE", "_PROJECT"}
    assert compiled and set(compiled) <= typing_patterns | {"_REFERENCE", "_RULE", "_USER"}
    assert "remember:" in git(root, "log", "-1", "--format=%s")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["sync"], {"remote": None}),
        (
            ["-q", "sync", "backup", "--no-push"],
            {"quiet": True, "remote": "backup", "no_push": True},
        ),
        (["sync", "--force", "--dry-run"], {"remote": None, "force": True, "dry_run": True}),
    ],
)
def test_plain_sync_calls_are_parsed_here(args: list[str], expected: dict[str, object]) -> None:
    parsed = fastpath.parse_sync(args)
    assert parsed is not None
    assert {key: parsed.get(key) for key in expected} == expected


@pytest.mark.parametrize(
    "args",
    [
        ["sync", "--help"],
        ["sync", "-q"],
        ["sync", "a", "b"],
        ["sync", "--push"],
        ["--no-pager", "sync"],
    ],
)
def test_other_sync_shapes_are_left_to_click(args: list[str]) -> None:
    assert fastpath.parse_sync(args) is None


def synced_store(tmp_path: Path) -> Path:
    """A store with one memory and an empty bare remote ``origin``."""
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    root = store(tmp_path, "s")
    assert qmem(root, "remote", "add", "origin", str(bare)).code == 0
    assert qmem(root, "remember", TEXT).code == 0
    return root


@pytest.mark.parametrize(
    "args",
    [
        ["sync"],
        ["--json", "sync"],
        ["-q", "sync"],
        ["sync", "--dry-run"],
        ["sync", "--no-push"],
        ["sync", "nowhere"],
        ["-v", "sync", "origin", "--force"],
    ],
)
def test_sync_prints_and_pushes_what_click_would(tmp_path: Path, args: list[str]) -> None:
    fast_root, click_root = synced_store(tmp_path / "a"), synced_store(tmp_path / "b")
    fast = qmem(fast_root, *args)
    slow = click_path(click_root, *args)
    assert fast.code == slow.returncode, (fast.err, slow.stderr)

    def same(text: str, root: Path) -> str:
        head = git(root, "rev-parse", "HEAD").strip()
        return text.replace(head, "C").replace(head[:12], "C").replace(str(root.parent.parent), "T")

    assert same(fast.out, fast_root) == same(slow.stdout, click_root)
    assert same(fast.err, fast_root) == same(slow.stderr, click_root)
    pushed = slow.returncode == 0 and not {"--dry-run", "--no-push"} & set(args)
    for root in (fast_root, click_root):
        remote = git(root.parent.parent / "remote.git", "for-each-ref")
        assert ("refs/heads/main" in remote) == pushed
        assert_clean_repo(root)


def test_sync_on_a_terminal_goes_through_click_for_its_progress_lines(tmp_path: Path) -> None:
    root = synced_store(tmp_path)
    result = qmem_on_tty(root, "sync")
    assert result.code == 0, result.out
    assert "qmem-git: fetching from origin" in result.out


@pytest.mark.parametrize("args", [["sync"], ["-q", "sync"]])
def test_sync_warns_of_a_held_back_file_as_click_does(tmp_path: Path, args: list[str]) -> None:
    """A file the sync's recovery leaves uncommitted (here a credential) is named on stderr
    even under -q, by both paths."""
    roots = synced_store(tmp_path / "a"), synced_store(tmp_path / "b")
    for root in roots:
        (root / "project").mkdir(exist_ok=True)
        (root / "project" / "key.md").write_text(
            "---\nname: key\ndescription: d\ntype: project\n---\n\n"
            "token ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8\n"
        )
    fast, slow = qmem(roots[0], *args), click_path(roots[1], *args)
    assert fast.code == slow.returncode == 0, (fast.err, slow.stderr)
    line = next(text for text in fast.err.splitlines() if "project/key.md" in text)
    assert line.startswith("warning: project/key.md: ") and line.endswith("; not committed")
    assert line in slow.stderr.splitlines()
    for root in roots:
        assert "project/key.md" not in git(root, "ls-files")
        assert (root / "project" / "key.md").exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["snapshot"], {"op": None}),
        (["-q", "snapshot", "--dry-run"], {"op": None, "quiet": True, "dry_run": True}),
        (["snapshot", "--op", "edit", "--op", "dream"], {"op": "dream"}),
    ],
)
def test_plain_snapshot_calls_are_parsed_here(args: list[str], expected: dict[str, object]) -> None:
    assert fastpath.parse_snapshot(args) == expected


@pytest.mark.parametrize(
    "args",
    [
        ["snapshot", "--help"],
        ["snapshot", "--op", "nonsense"],
        ["snapshot", "--op"],
        ["snapshot", "--op=edit"],
        ["snapshot", "extra"],
        ["snapshot", "-q"],
        ["--no-pager", "snapshot"],
    ],
)
def test_other_snapshot_shapes_are_left_to_click(args: list[str]) -> None:
    assert fastpath.parse_snapshot(args) is None


def agent_wrote(root: Path, secret: bool = False, settled: float = 0.0) -> None:
    """What an agent leaves for a snapshot: one memory edited, one added (a credential in it
    with ``secret``), each settled 10 s ago (newer files are held back as being written), or
    at ``settled``."""
    import os
    import time

    project = root / "project"
    project.mkdir(exist_ok=True)
    body = "token ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8\n" if secret else "Deploys on Fridays.\n"
    files = {
        project / "deploys.md": "---\nname: deploys\ndescription: d\ntype: project\n---\n\n" + body,
        project / "the-staging-cluster-deploys-from-branch-release-7.md": None,
    }
    settled = settled or time.time() - 10
    for path, text in files.items():
        if text is None:
            text = path.read_text().replace("release-7", "release-8")
        path.write_text(text)
        os.utime(path, (settled, settled))


@pytest.mark.parametrize(
    "args",
    [
        ["snapshot"],
        ["--json", "snapshot"],
        ["-q", "snapshot"],
        ["-v", "snapshot", "--op", "extract"],
        ["snapshot", "--dry-run"],
        ["--json", "snapshot", "--dry-run"],
    ],
)
@pytest.mark.parametrize("secret", [False, True])
def test_snapshot_prints_and_commits_what_click_would(
    tmp_path: Path, args: list[str], secret: bool
) -> None:
    """Both paths print the same lines (a held-back file's warning even under -q) and make
    the same commit; a second snapshot finds nothing to change."""
    import time

    roots = store(tmp_path, "fast"), store(tmp_path, "click")
    settled = time.time() - 10
    for root in roots:
        assert qmem(root, "remember", TEXT).code == 0
        agent_wrote(root, secret, settled)
    fast, slow = qmem(roots[0], *args), click_path(roots[1], *args)
    assert fast.code == slow.returncode == 0, (fast.err, slow.stderr)
    heads = [git(root, "rev-parse", "HEAD").strip() for root in roots]

    def same(text: str, head: str) -> str:
        return text.replace(head, "C").replace(head[:12], "C")

    assert same(fast.out, heads[0]) == same(slow.stdout, heads[1])
    assert same(fast.err, heads[0]) == same(slow.stderr, heads[1])
    warned = [line for line in fast.err.splitlines() if "project/deploys.md" in line]
    assert len(warned) == int(secret)
    assert all(line.endswith("; not committed") for line in warned)
    assert git(roots[0], "ls-files", "-s") == git(roots[1], "ls-files", "-s")
    assert ("deploys.md" in git(roots[0], "ls-files")) == (not secret and "--dry-run" not in args)
    if "--dry-run" not in args:
        assert trailers(roots[0]) == trailers(roots[1])
        again = qmem(roots[0], "snapshot")
        assert again.out == "Nothing to change.\n", again.err
    left = {"?? project/deploys.md"} if secret or "--dry-run" in args else set()
    if "--dry-run" in args:
        left.add(" M project/the-staging-cluster-deploys-from-branch-release-7.md")
    for root in roots:
        assert set(git(root, "status", "--porcelain").splitlines()) == left
        subprocess.run([*git_argv(str(root)), "fsck", "--strict"], check=True, capture_output=True)


def test_snapshot_on_a_store_not_set_up_yet_goes_through_click(tmp_path: Path) -> None:
    root = tmp_path / "state" / "memory"
    (root / "user").mkdir(parents=True)
    (root / "user" / "a.md").write_text("---\nname: a\ndescription: d\ntype: user\n---\n\nA.\n")
    result = qmem(root, "snapshot")
    assert result.code == 0, result.err
    assert "user/a.md" in git(root, "ls-files")
    assert_clean_repo(root)


def test_snapshot_loads_neither_click_nor_the_history_reader_nor_pack_code(
    tmp_path: Path,
) -> None:
    """A snapshot reads HEAD's loose objects with ``store.repo``, as a commit does: dulwich's
    object store and pack modules, the log reader and click are not worth their imports."""
    root = store(tmp_path, "fast")
    assert qmem(root, "remember", TEXT).code == 0
    agent_wrote(root)
    code = (
        "import sys\n"
        "from qmem_git.__main__ import main\n"
        f"code = main(['--memory-dir', {str(root)!r}, 'snapshot'])\n"
        "costly = ('click', 'dulwich.object_store', 'dulwich.pack', 'qmem_git.store.history')\n"
        "print(code, sorted(name for name in costly if name in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "0 []"
    assert "(snapshot)" in git(root, "log", "-1", "--format=%s")
