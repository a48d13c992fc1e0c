"""The CLI contract (ARCHITECTURE §4): exit codes, one Error: line, --json, --dry-run, help."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from clihelpers import assert_clean_repo, git, head, one_error_line, qmem, qwen_transcript, trailers
from helpers_git import git_argv, gitdir

from qmem_git.cli import main as cli_group
from qmem_git.core.patches import slugify
from qmem_git.store.workdir import render_index

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    root = tmp_path / "state" / "memory"
    assert qmem(root, "init").code == 0
    return root


def test_every_command_has_help_and_is_in_the_readme() -> None:
    readme = (REPO / "docs" / "commands.md").read_text(encoding="utf-8")
    for name, command in cli_group.commands.items():
        assert command.help, f"{name} has no help text"
        assert f"qmem-git {name}" in readme, f"docs/commands.md lacks `qmem-git {name}`"


def test_version_and_help_exit_zero(tmp_path: Path) -> None:
    assert qmem(tmp_path, "--version").out.startswith("qmem-git, version ")
    result = qmem(tmp_path, "remember", "--help")
    assert result.code == 0 and "--why" in result.out


def test_usage_error_is_one_line_exit_2(tmp_path: Path) -> None:
    for args in (("no-such-command",), ("log", "-n", "zero"), ("forget",)):
        result = qmem(tmp_path, *args)
        assert result.code == 2, (args, result.err)
        assert "hint" in one_error_line(result.err)


def test_init_is_idempotent_and_installs_the_hook(memory: Path) -> None:
    first = head(memory)
    again = qmem(memory, "init")
    assert again.code == 0 and "already initialized" in again.out
    assert head(memory) == first
    assert "qmem_git" in (gitdir(memory) / "hooks" / "pre-commit").read_text()
    assert trailers(memory)["Qmem-Op"] == "index"
    assert_clean_repo(memory)


def test_where_reports_layout(memory: Path) -> None:
    data = qmem(memory, "--json", "where").json()
    assert data["memory_root"] == str(memory)
    assert data["state_dir"] == str(memory.parent)
    assert data["mode"] == "explicit"
    assert data["repository"] == f"{memory}.git" and data["initialized"] is True


def test_remember_makes_one_commit_with_trailers(memory: Path) -> None:
    result = qmem(memory, "remember", "I prefer terse responses", "--why", "asked for brevity")
    assert result.code == 0, result.err
    assert re.match(r"^\[[0-9a-f]{12}\] remember: ", result.out)
    found = trailers(memory)
    assert found["Qmem-Op"] == "remember"
    assert found["Qmem-Topics"] == "user"
    assert found["Qmem-Added"] == "1"
    text = (memory / "user" / "i-prefer-terse-responses.md").read_text()
    assert "Why: asked for brevity" in text
    assert (
        "- [I prefer terse responses](user/i-prefer-terse-responses.md)"
        in (memory / "MEMORY.md").read_text()
    )
    assert_clean_repo(memory)


def test_remember_classifies_without_type(memory: Path) -> None:
    assert qmem(memory, "remember", "The deploy runbook lives at https://wiki/x").code == 0
    assert trailers(memory)["Qmem-Topics"] == "reference"


def test_remember_refuses_a_secret_and_writes_nothing(memory: Path) -> None:
    before = head(memory)
    result = qmem(memory, "remember", "our token is ghp_" + "a" * 36)
    assert result.code == 1
    line = one_error_line(result.err)
    assert "github-pat" in line and "ghp_" not in line
    assert head(memory) == before
    assert_clean_repo(memory)


@pytest.mark.parametrize(
    ("text", "reason"),
    [("Too short", "short"), ("Should we use pnpm here?", "question"), ("I am busy today ok", "")],
)
def test_remember_refuses_filtered_text(memory: Path, text: str, reason: str) -> None:
    result = qmem(memory, "remember", text)
    assert result.code == 1
    assert reason in one_error_line(result.err).lower()


def test_dry_run_writes_nothing(memory: Path) -> None:
    before = head(memory)
    listing = sorted(p.name for p in memory.rglob("*") if ".git" not in p.parts)
    result = qmem(memory, "--json", "remember", "--dry-run", "I prefer tabs over spaces always")
    assert result.code == 0
    data = result.json()
    assert data["dry_run"] is True and data["commit"] is None
    assert data["writes"] == ["user/i-prefer-tabs-over-spaces-always.md"]
    assert head(memory) == before
    assert sorted(p.name for p in memory.rglob("*") if ".git" not in p.parts) == listing


def test_log_show_diff_history_undo(memory: Path) -> None:
    qmem(memory, "remember", "I prefer terse responses")
    qmem(memory, "remember", "The latency dashboard is https://grafana.internal/d/x")
    entries = qmem(memory, "--json", "log", "-n", "2").json()
    assert [e["op"] for e in entries] == ["remember", "remember"]
    assert entries[0]["topics"] == ["reference"]
    assert "reference/the-latency-dashboard-is-https-grafana-internal-d-x.md" in entries[0]["paths"]
    assert qmem(memory, "--json", "log", "--op", "index").json()[0]["op"] == "index"
    assert "A user/i-prefer-terse-responses.md" in qmem(memory, "log", "--stat").out
    shown = qmem(memory, "show")
    assert "Qmem-Op: remember" in shown.out and "+++ b/reference/" in shown.out
    assert "+I prefer terse responses" in qmem(memory, "diff", "HEAD~2").out
    history = qmem(memory, "--json", "history", "user/i-prefer-terse-responses.md").json()
    assert len(history) == 1 and history[0]["op"] == "remember"

    undone = qmem(memory, "undo")
    assert undone.code == 0, undone.err
    assert trailers(memory)["Qmem-Op"] == "undo"
    assert not list((memory / "reference").glob("*.md"))
    assert "grafana" not in (memory / "MEMORY.md").read_text()
    assert_clean_repo(memory)


def test_undo_refuses_when_a_later_operation_touched_the_file(memory: Path) -> None:
    qmem(memory, "remember", "I prefer terse responses")
    first = head(memory)
    qmem(memory, "remember", "I prefer terse responses", "--why", "brevity matters")
    result = qmem(memory, "undo", first)
    assert result.code == 1
    assert "--force" in one_error_line(result.err)
    assert qmem(memory, "undo", first, "--force").code == 0
    assert_clean_repo(memory)


def test_reading_commands_outside_a_repository(tmp_path: Path) -> None:
    (tmp_path / "nowhere").mkdir()  # a missing folder is another error (test_cli_behaviour)
    result = qmem(tmp_path / "nowhere", "log")
    assert result.code == 2
    assert "qmem-git init" in one_error_line(result.err)


def test_index_check_and_rebuild(memory: Path) -> None:
    qmem(memory, "remember", "I prefer terse responses")
    assert qmem(memory, "index", "--check").code == 0
    (memory / "MEMORY.md").write_text("stale\n")
    assert qmem(memory, "index", "--check").code == 1
    rebuilt = qmem(memory, "index")
    assert rebuilt.code == 0 and rebuilt.out.strip() == "MEMORY.md is up to date"
    assert "MEMORY.md was edited by hand; it is generated from the memory files" in rebuilt.err
    assert (memory / "MEMORY.md").read_text().startswith("- [I prefer terse responses]")
    (memory / "MEMORY.md").write_text("junk\n")  # a hand commit, then one more hand edit
    git(memory, "commit", "-qam", "hand", "--no-verify")
    (memory / "MEMORY.md").write_text("junk 2\n")
    rebuilt = qmem(memory, "index")
    commit = git(memory, "rev-parse", "HEAD").strip()
    assert rebuilt.code == 0 and rebuilt.out.strip() == f"MEMORY.md rebuilt ({commit[:12]})"
    assert git(memory, "log", "-1", "--format=%s") == "recover: rebuild MEMORY.md, edited by hand\n"
    assert (memory / "MEMORY.md").read_text().startswith("- [I prefer terse responses]")
    assert qmem(memory, "index", "--check").code == 0
    assert_clean_repo(memory)


def test_validate_formats_and_exit_codes(memory: Path) -> None:
    assert qmem(memory, "validate").code == 0
    bad = memory / "user" / "bad.md"
    bad.parent.mkdir(exist_ok=True)
    bad.write_text("---\nname: x\ntype: misc\n---\n\nbody text here\n")
    assert qmem(memory, "validate", "--format", "gcc").code == 0  # style is advice
    bad.write_text("---\nname: x\ntype: misc\n---\n\nkey ghp_" + "Q" * 36 + "\n")
    result = qmem(memory, "validate", "--format", "gcc")
    assert result.code == 1
    pattern = re.compile(r"^(.+?):(\d+):(\d+):\s+(error|warning|info):\s+(.*)$")
    lines = result.out.strip().splitlines()
    assert lines and all(pattern.match(line) for line in lines)
    assert any("user/bad.md" in line and "[type-invalid]" in line for line in lines)
    data = qmem(memory, "--json", "validate", "user/bad.md").json()
    assert {item["rule"] for item in data} >= {"type-invalid"}


def test_writer_lock_busy_exits_3(memory: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from qmem_git.core.paths import explicit_layout\n"
            "from qmem_git.store.locks import writer_lock\n"
            f"layout = explicit_layout({str(memory)!r}, '/', '/')\n"
            "with writer_lock(layout, 5):\n"
            "    print('held', flush=True)\n"
            "    time.sleep(30)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        result = qmem(
            memory, "remember", "I prefer terse responses", env={"QMEM_LOCK_TIMEOUT": "0.3"}
        )
        assert result.code == 3
        one_error_line(result.err)
    finally:
        holder.kill()
        holder.wait()


def test_corrupt_object_exits_6_and_overwrites_nothing(memory: Path) -> None:
    qmem(memory, "remember", "I prefer terse responses")
    tree = git(memory, "rev-parse", "HEAD^{tree}").strip()
    obj = gitdir(memory) / "objects" / tree[:2] / tree[2:]
    os.chmod(obj, 0o644)
    obj.write_bytes(obj.read_bytes()[:10])
    before = head(memory)
    result = qmem(memory, "remember", "The release freeze starts 2026-03-05")
    assert result.code == 6
    assert "corrupt" in one_error_line(result.err)
    assert head(memory) == before
    assert obj.read_bytes() and len(obj.read_bytes()) == 10


def test_extract_reports_skips_and_is_incremental(memory: Path, tmp_path: Path) -> None:
    transcript = qwen_transcript(tmp_path / "t.jsonl", "s-1", ["I prefer terse responses."])
    assert qmem(memory, "extract", "--transcript", str(transcript)).code == 0
    again = qmem(memory, "--json", "extract", "--transcript", str(transcript)).json()
    assert again["commit"] is None and again["patches"] == []
    missing = qmem(memory, "extract", "--transcript", str(tmp_path / "missing.jsonl"))
    assert missing.code in (1, 2)
    one_error_line(missing.err)


def test_recall_fast_path_matches_click_path(memory: Path) -> None:
    qmem(memory, "remember", "The latency dashboard is https://grafana.internal/d/x")
    fast = qmem(memory, "recall", "latency dashboard")
    slow = qmem(memory, "recall", "--limit", "5", "latency dashboard")
    assert fast.out == slow.out and fast.out.startswith("## Relevant memory")
    data = qmem(memory, "--json", "recall", "latency dashboard").json()
    assert data["strategy"] == "heuristic"


def test_recall_on_a_plain_folder(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    (plain / "user").mkdir(parents=True)
    (plain / "user" / "a.md").write_text(
        "---\nname: Vault paths\ndescription: Staging credentials\ntype: user\n---\n\nIn vault.\n"
    )
    result = qmem(plain, "recall", "vault")
    assert result.code == 0 and "### Vault paths (user/a.md)" in result.out
    assert not gitdir(plain).exists()


def test_stats_summarises_telemetry(memory: Path) -> None:
    env = {"QMEM_TELEMETRY": "1"}
    qmem(memory, "remember", "I prefer terse responses", env=env)
    qmem(memory, "recall", "terse", env=env)
    qmem(memory, "dream", "--force", env=env)
    data = qmem(memory, "--json", "stats").json()
    assert data["qwen-code.memory.recall"]["count"] == 1
    assert data["qwen-code.memory.dream"]["statuses"] == {"noop": 1}
    log = (memory.parent / "telemetry.jsonl").read_text()
    assert "terse" not in log


def test_telemetry_off_by_env(memory: Path) -> None:
    qmem(memory, "recall", "terse", env={"QMEM_TELEMETRY": "0"})
    assert not (memory.parent / "telemetry.jsonl").exists()


def test_hand_commit_runs_the_validation_hook(memory: Path) -> None:
    bad = memory / "user" / "bad.md"
    bad.parent.mkdir(exist_ok=True)
    bad.write_text("no frontmatter here\nkey ghp_" + "Q" * 36 + "\n")
    git(memory, "add", "user/bad.md")
    proc = subprocess.run(
        [*git_argv(str(memory)), "commit", "-q", "-m", "by hand"], capture_output=True, text=True
    )
    assert proc.returncode != 0
    assert "(secret)" in proc.stdout + proc.stderr
    assert "frontmatter-missing" in proc.stdout + proc.stderr  # shown, as advice


def test_hand_commit_is_judged_by_what_it_stages(memory: Path) -> None:
    """An invalid draft that is not staged does not block a commit of a valid file."""
    (memory / "user").mkdir(exist_ok=True)
    (memory / "user" / "draft.md").write_text("a draft, not staged: ghp_" + "Q" * 36 + "\n")
    good = memory / "user" / "tabs.md"
    good.write_text("---\nname: Tabs\ndescription: Tabs\ntype: user\n---\n\n- Tabs, always.\n")
    (memory / "MEMORY.md").write_text(render_index(str(memory)).text)
    git(memory, "add", "user/tabs.md", "MEMORY.md")
    proc = subprocess.run(
        [*git_argv(str(memory)), "commit", "-q", "-m", "by hand"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert qmem(memory, "validate").code == 1  # the whole folder still has the draft


SECRET_LINE = "- the deploy key is AKIAIOSFODNN7EXAMPLQ\n"


def hand_commit(memory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*git_argv(str(memory)), "commit", "-q", "-m", "by hand", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("how", [["-a"], ["--", "user/fact.md"]])
def test_hook_checks_the_index_git_commits_from(memory: Path, how: list[str]) -> None:
    """``commit -a`` and ``commit PATH`` give the hook a temporary index (GIT_INDEX_FILE)."""
    assert qmem(memory, "remember", "--type", "user", "User wants the fact file kept").code == 0
    fact = next((memory / "user").glob("*.md"))
    fact.rename(memory / "user" / "fact.md")
    (memory / "MEMORY.md").write_text(render_index(str(memory)).text)
    git(memory, "add", "-A")
    git(memory, "commit", "-q", "--no-verify", "-m", "rename")
    with (memory / "user" / "fact.md").open("a") as handle:
        handle.write(SECRET_LINE)
    proc = hand_commit(memory, *how)
    assert proc.returncode != 0 and "secret" in proc.stdout + proc.stderr
    assert git(memory, "log", "-1", "--format=%s").strip() == "rename"


def test_hook_checks_the_first_commit_of_an_unborn_branch(memory: Path) -> None:
    assert qmem(memory, "remember", "--type", "user", "User keeps one memory here").code == 0
    git(memory, "checkout", "-q", "--orphan", "fresh")
    fact = next((memory / "user").glob("*.md"))
    with fact.open("a") as handle:
        handle.write(SECRET_LINE)
    git(memory, "add", "-A")
    proc = hand_commit(memory)
    assert proc.returncode != 0 and "secret" in proc.stdout + proc.stderr


def test_hook_ignores_what_is_not_committed(memory: Path) -> None:
    """An unstaged draft (even one `git add -N` announced) changes neither the staged files
    nor the MEMORY.md they need."""
    assert qmem(memory, "remember", "--type", "user", "User keeps one memory here").code == 0
    draft = memory / "user" / "draft.md"
    draft.write_text("---\nname: Draft\ndescription: Draft\ntype: user\n---\n\n- Draft.\n")
    git(memory, "add", "-N", "user/draft.md")
    proc = hand_commit(memory, "--allow-empty")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_hook_falls_back_to_the_whole_folder_for_an_index_it_cannot_read(memory: Path) -> None:
    git(memory, "config", "core.splitIndex", "true")
    good = memory / "user" / "tabs.md"
    good.parent.mkdir(exist_ok=True)
    good.write_text("---\nname: Tabs\ndescription: Tabs\ntype: user\n---\n\n- Tabs, always.\n")
    (memory / "MEMORY.md").write_text(render_index(str(memory)).text)
    git(memory, "add", "-A")
    proc = hand_commit(memory)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "checking the whole folder instead" in proc.stderr


def test_validate_staged_takes_no_paths(memory: Path) -> None:
    result = qmem(memory, "validate", "--staged", "user")
    assert result.code == 2 and "--staged" in result.err and "hint:" in result.err


def test_demo_runs_end_to_end_without_network(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "qmem_git", "demo"],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Error" not in proc.stderr
    for marker in (
        "hookSpecificOutput.additionalContext",
        "extract: 3 memories from session 9e1d7c3b",  # the Claude Stop hook's background run
        "extract: 3 memories from session 5f0c2a9e",
        "### The latency dashboard is https://grafana.internal/d/api-latency",
        "forget: forgot 1 entry",
        "restore: 1 memory",
        "edit: add user/terse.md",
        "dream: deduplicated 1 entry (user)",
        "MEMORY.md is up to date",
        "Pushed ",
        "Cloned origin",
    ):
        assert marker in proc.stdout, marker
    assert list(tmp_path.iterdir()) == []  # the demo folder is removed
    assert not (Path(os.environ["HOME"]) / ".qwen").exists()
    kept = subprocess.run(
        [sys.executable, "-m", "qmem_git", "demo", "--keep"],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    [folder] = list(tmp_path.iterdir())
    assert kept.returncode == 0 and f"Demo folder kept: {folder}" in kept.stdout


def test_doctor_reports_and_fails_on_problems(memory: Path, tmp_path: Path) -> None:
    healthy = qmem(memory, "--json", "doctor")
    assert healthy.code == 0, healthy.out
    assert {c["check"] for c in healthy.json()} >= {"history", "index", "validate", "git hook"}
    (memory / "MEMORY.md").write_text("stale")
    broken = qmem(memory, "doctor")
    assert broken.code == 1
    assert "[FAIL] index: MEMORY.md is stale" in broken.out
    assert "fix: qmem-git index" in broken.out
    (tmp_path / "none").mkdir()
    assert qmem(tmp_path / "none", "doctor").code == 1


def test_doctor_tells_an_outdated_hook_and_init_rewrites_it(memory: Path) -> None:
    hook = gitdir(memory) / "hooks" / "pre-commit"
    old = hook.read_text().replace("validate --staged", "validate")  # an older version's hook
    hook.write_text(old.replace(sys.executable, "/gone/python"))
    checks = {c["check"]: c for c in qmem(memory, "--json", "doctor").json()}
    assert checks["git hook"]["ok"] is False and "another qmem-git" in checks["git hook"]["detail"]
    assert qmem(memory, "init").code == 0
    assert "validate --staged" in hook.read_text() and "/gone/python" not in hook.read_text()
    checks = {c["check"]: c for c in qmem(memory, "--json", "doctor").json()}
    assert checks["git hook"]["ok"] is True


def test_review_suggests_without_changing_anything(memory: Path) -> None:
    qmem(memory, "remember", "The legacy billing service is frozen", "--type", "project")
    before = head(memory)
    data = qmem(memory, "--json", "review").json()
    assert data["strategy"] == "heuristic"
    assert {k: v for k, v in data["suggestions"][0].items() if k != "reason"} == {
        "kind": "outdated",
        "id": "project:The legacy billing service is frozen",
    }
    assert head(memory) == before


def test_global_options_may_follow_the_command(memory: Path, tmp_path: Path) -> None:
    assert qmem(memory, "remember", "--type", "user", "I prefer terse responses").code == 0
    after = subprocess.run(
        [sys.executable, "-m", "qmem_git", "log", "-n", "1", "--json", "--memory-dir", str(memory)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert after.returncode == 0, after.stderr
    assert json.loads(after.stdout)[0]["op"] == "remember"
    quiet = qmem(memory, "remember", "I prefer terse responses", "-q")
    assert quiet.code == 0 and quiet.out == "" and quiet.err == ""
    for args in (("remote", "--json", "list"), ("remote", "list", "--json")):
        listed = qmem(memory, *args)
        assert listed.code == 0 and listed.json() == [], args


def test_log_path_accepts_absolute_and_unnormalised_paths(memory: Path) -> None:
    assert qmem(memory, "remember", "--type", "user", "I prefer terse responses").code == 0
    for given in (str(memory / "user"), "user/../user", str(memory), "./user/"):
        run = qmem(memory, "--json", "log", "--path", given)
        assert run.code == 0 and [e["op"] for e in run.json()][:1] == ["remember"], given
    assert qmem(memory, "--json", "log", "--path", "project").json() == []


def test_doctor_finds_a_damaged_or_missing_object(memory: Path) -> None:
    assert qmem(memory, "remember", "--type", "user", "I prefer terse responses").code == 0
    healthy = qmem(memory, "--json", "doctor")
    objects = next(c for c in healthy.json() if c["check"] == "objects")
    assert objects["ok"] and "files of HEAD are readable" in objects["detail"]
    blob = git(memory, "rev-parse", "HEAD:user/i-prefer-terse-responses.md").strip()
    path = gitdir(memory) / "objects" / blob[:2] / blob[2:]
    path.chmod(0o644)
    path.write_bytes(b"garbage")
    damaged = qmem(memory, "doctor")
    assert damaged.code == 1
    assert f"[FAIL] objects: memory repository is corrupt: object {blob} is damaged" in damaged.out
    path.unlink()
    missing = qmem(memory, "doctor")
    assert missing.code == 1 and f"object {blob} is missing" in missing.out


@pytest.mark.parametrize("command", [("show",), ("undo",), ("diff",)])
def test_reading_a_damaged_blob_exits_6(memory: Path, command: tuple[str, ...]) -> None:
    """Garbage where a blob should be: dulwich raises ObjectFormatException, not KeyError."""
    assert qmem(memory, "remember", "--type", "user", "I prefer terse responses").code == 0
    blob = git(memory, "rev-parse", "HEAD:user/i-prefer-terse-responses.md").strip()
    path = gitdir(memory) / "objects" / blob[:2] / blob[2:]
    path.chmod(0o644)
    path.write_bytes(b"garbage")
    before = head(memory)
    result = qmem(memory, *command)
    assert result.code == 6, result.err
    assert f"object {blob} is damaged" in one_error_line(result.err)
    assert head(memory) == before and path.read_bytes() == b"garbage"


def _files_under(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize(
    "command",
    [
        ("show", "{short}"),
        ("show", "{full}"),
        ("diff", "{short}"),
        ("diff", "{short}", "{full}"),
        ("undo", "--dry-run", "{short}"),
        ("undo", "--dry-run"),
        ("undo", "{short}"),
        ("restore", "--dry-run", "--from", "{short}", "terse"),
        ("restore", "--from", "{short}", "terse"),
    ],
)
def test_a_damaged_pack_index_exits_6_and_writes_nothing(
    memory: Path, command: tuple[str, ...]
) -> None:
    """A truncated .idx makes dulwich raise struct.error: exit 6 with one Error line."""
    assert qmem(memory, "remember", "--type", "user", "I prefer terse responses").code == 0
    assert qmem(memory, "forget", "terse").code == 0
    full = head(memory)
    git(memory, "gc", "-q")
    (idx,) = (gitdir(memory) / "objects" / "pack").glob("pack-*.idx")
    idx.chmod(0o644)
    os.truncate(idx, 100)
    before = _files_under(memory)
    args = [arg.format(short=full[:8], full=full) for arg in command]
    result = qmem(memory, *args)
    assert result.code == 6, result.err
    assert "damaged" in one_error_line(result.err)
    assert _files_under(memory) == before


def test_a_redirecting_model_endpoint_falls_back_and_records_why(tmp_path: Path) -> None:
    """The transcript is not re-POSTed to the Location; extract falls back and says why."""
    from integrations.model_server import API_KEY, ModelServer, Reply, chat

    memory = tmp_path / "state" / "memory"
    assert qmem(memory, "init").code == 0
    transcript = qwen_transcript(tmp_path / "t.jsonl", "s-1", ["I prefer terse responses."])
    with ModelServer() as server:
        moved = {"Location": server.base_url + "/moved/chat/completions"}
        server.script(Reply(307, b"", moved, padding=32 * 1024 * 1024), chat({"patches": []}))
        env = {
            "QMEM_LLM_BASE_URL": server.base_url,
            "QMEM_LLM_MODEL": "qwen-test",
            "DASHSCOPE_API_KEY": API_KEY,
            "QMEM_LLM_TIMEOUT": "5",
        }
        run = qmem(
            memory, "extract", "--planner", "model", "--transcript", str(transcript), env=env
        )
        paths = [r.path for r in server.requests]
    assert run.code == 0, run.err
    assert "model not used (redirect)" in run.err
    assert trailers(memory)["Qmem-Model-Fallback"] == "redirect"
    assert paths == ["/v1/chat/completions"]


def test_log_says_which_filter_matched_nothing(memory: Path) -> None:
    assert qmem(memory, "remember", "--type", "user", "I prefer terse responses").code == 0
    assert (
        qmem(memory, "log", "--path", "nonexist").out.strip() == "No operations touched nonexist."
    )
    assert qmem(memory, "log", "--op", "dream").out.strip() == "No dream operations."
    both = qmem(memory, "log", "--op", "dream", "--path", "user")
    assert both.out.strip() == "No dream operations touched user."
    assert qmem(memory, "--json", "log", "--path", "nonexist").json() == []
    assert "remember: add" in qmem(memory, "log", "--path", "user").out


def test_demo_refuses_json_as_a_usage_error(tmp_path: Path) -> None:
    for args, said in ((("demo", "--json"), "No such option"), (("--json", "demo"), "text only")):
        result = qmem(tmp_path, *args, env={"TMPDIR": str(tmp_path)})
        assert result.code == 2, result.err
        assert said in one_error_line(result.err)
    assert [p for p in tmp_path.iterdir() if p.name.startswith("qmem-demo-")] == []


def test_doctor_hints_point_at_real_fixes(memory: Path) -> None:
    """A corrupt history is not fixed by running doctor again; there is no docs-models.md."""
    assert qmem(memory, "remember", "--type", "user", "I prefer terse responses").code == 0
    commit = head(memory)
    path = gitdir(memory) / "objects" / commit[:2] / commit[2:]
    path.chmod(0o644)
    path.write_bytes(b"garbage")
    checks = {c["check"]: c for c in qmem(memory, "--json", "doctor").json()}
    assert not checks["history"]["ok"]
    assert "doctor" not in checks["history"]["hint"]
    assert checks["history"]["hint"] == checks["objects"]["hint"]
    config = memory.parent / "config.json"
    config.write_text("{not json")
    run = qmem(memory, "--json", "doctor", env={"QMEM_CONFIG": str(config)})
    model = next(c for c in run.json() if c["check"] == "model")
    assert not model["ok"] and "README" in model["hint"] and "docs-models" not in model["hint"]
    (memory.parent / "fresh").mkdir()
    planner = qmem(memory.parent / "fresh", "dream", "--force", "--planner", "model")
    assert planner.code == 2
    assert "docs-models.md" not in planner.err and "README" in one_error_line(planner.err)


def test_undo_of_an_operation_a_later_one_already_reverted_names_it(memory: Path) -> None:
    assert qmem(memory, "remember", "--type", "user", "I prefer terse responses").code == 0
    added = head(memory)
    assert qmem(memory, "forget", "terse").code == 0
    forgot = head(memory)
    undone = qmem(memory, "undo", added)
    assert undone.code == 0 and head(memory) == forgot
    assert "Nothing to change." in undone.out
    assert f"already as before {added[:7]}: changed by {forgot[:7]}" in undone.err


def test_new_names_never_merge_with_another_spelling_on_a_case_insensitive_disk(
    memory: Path,
) -> None:
    """A memory renamed by hand to other capitals keeps its name; remember, restore and undo
    never add a second spelling of it (every other machine's sync would refuse the history)."""
    assert qmem(memory, "remember", "I prefer terse responses").code == 0
    (memory / "user" / "i-prefer-terse-responses.md").rename(memory / "user" / "Notes.md")
    assert qmem(memory, "snapshot").code == 0
    assert qmem(memory, "forget", "--id", "user/Notes.md").code == 0
    forgot = head(memory)
    assert qmem(memory, "remember", "I prefer light themes everywhere").code == 0
    (memory / "user" / "i-prefer-light-themes-everywhere.md").rename(memory / "user" / "notes.md")
    assert qmem(memory, "snapshot").code == 0

    restored = qmem(memory, "restore", "terse")
    assert restored.code == 0, restored.err
    assert (memory / "user" / "Notes-2.md").exists()  # not user/Notes.md beside user/notes.md
    assert qmem(memory, "remember", "I prefer dark mode").code == 0
    (memory / "user" / "i-prefer-dark-mode.md").rename(memory / "user" / "I-Prefer-Dark-Mode.md")
    assert qmem(memory, "snapshot").code == 0
    assert qmem(memory, "remember", "I prefer dark mode, always").code == 0  # the same fact
    assert not (memory / "user" / "i-prefer-dark-mode-always.md").exists()  # #23: no near-dup
    # two different facts whose slugs agree in their first 80 characters
    first = (
        "I prefer dark mode in the editor, the terminal, the browser and every chat client at home"
    )
    slug = slugify(first)
    assert qmem(memory, "remember", first).code == 0
    (memory / "user" / f"{slug}.md").rename(memory / "user" / f"{slug.upper()}.md")
    assert qmem(memory, "snapshot").code == 0
    second = (
        first[:81].rstrip() + " except the one whose light theme has better contrast on projectors"
    )
    assert slugify(second) == slug
    assert qmem(memory, "remember", second).code == 0
    assert (memory / "user" / f"{slug}-2.md").exists()
    names = sorted(p.name for p in (memory / "user").iterdir())
    assert len({name.lower() for name in names}) == len(names), names

    undone = qmem(memory, "undo", forgot)  # would write user/Notes.md back
    assert undone.code == 1
    assert "'user/Notes.md' and 'user/notes.md' are one path" in one_error_line(undone.err)
    assert qmem(memory, "validate").code == 0
    assert_clean_repo(memory)


@pytest.mark.parametrize("command", [["snapshot"], ["undo"]])
def test_a_stale_index_committed_by_hand_is_rebuilt_as_an_index_commit(
    memory: Path, command: list[str]
) -> None:
    """A command with nothing of its own to change still regenerates MEMORY.md; when that
    makes a commit, it is an ``index`` commit and the output says so."""
    assert qmem(memory, "remember", "I prefer terse responses").code == 0
    with (memory / "MEMORY.md").open("a") as handle:
        handle.write("\n- stray line\n")
    git(memory, "commit", "-q", "--no-verify", "-am", "hand: edit index")
    run = qmem(memory, *command)
    assert run.code == 0, run.err
    assert re.fullmatch(r"\[[0-9a-f]{12}\] index: rebuild MEMORY\.md\n", run.out), run.out
    assert git(memory, "log", "-1", "--format=%s").strip() == "index: rebuild MEMORY.md"
    assert "stray" not in (memory / "MEMORY.md").read_text()
    assert_clean_repo(memory)


@pytest.mark.parametrize("path", ["", "/", ".", "user/.."])
def test_history_of_the_memory_root_itself_is_a_usage_error(memory: Path, path: str) -> None:
    run = qmem(memory, "history", path, cwd=memory)
    assert run.code == 2
    assert "history needs a memory file path" in one_error_line(run.err)


def test_restore_dry_run_predicts_a_memory_deleted_by_hand(memory: Path) -> None:
    """The real run first commits the deletion (recovery), then restores it: the dry run,
    which plans without recovery, must see the same memory."""
    assert qmem(memory, "remember", "I prefer terse responses").code == 0
    assert qmem(memory, "remember", "--type", "project", "The CI runs on GitHub Actions").code == 0
    rel = "project/the-ci-runs-on-github-actions.md"
    (memory / rel).unlink()
    before = head(memory)
    predicted = qmem(memory, "restore", "GitHub", "--dry-run")
    assert predicted.code == 0, predicted.err
    assert f"  write  {rel}" in predicted.out and "from the work tree" in predicted.out
    assert head(memory) == before and not (memory / rel).exists()
    real = qmem(memory, "restore", "GitHub")
    assert real.code == 0, real.err
    assert (memory / rel).exists()
    assert git(memory, "log", "-2", "--format=%s").split("\n")[1].startswith("recover: ")
    assert_clean_repo(memory)


def test_diff_json_names_a_mode_change(memory: Path) -> None:
    assert qmem(memory, "remember", "--type", "user", "User keeps one memory here").code == 0
    rel = git(memory, "ls-files", "user").split()[0]
    (memory / rel).chmod(0o755)
    git(memory, "-c", "core.hooksPath=/dev/null", "commit", "-qam", "chmod by hand")
    result = qmem(memory, "diff", "--json")
    assert result.code == 0
    files = json.loads(result.out)["files"]
    assert files == [
        {"path": rel, "status": "M", "old_mode": "100644", "new_mode": "100755", "binary": False}
    ]
