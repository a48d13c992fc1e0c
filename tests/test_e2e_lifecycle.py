"""extract, recall, forget, restore and dream as real processes; each commit checked by C git."""

from __future__ import annotations

import json
from pathlib import Path

from clihelpers import (
    assert_clean_repo,
    claude_transcript,
    git,
    head,
    qmem,
    qwen_transcript,
    trailers,
)

QWEN_PROMPTS = [
    "hello there",
    "I prefer terse responses.",
    "The latency dashboard is https://grafana.internal/d/api-latency",
    "What is the build command?",
    "Please remember that the release freeze starts 2026-03-05",
]
CLAUDE_PROMPTS = [
    "We always run the focused vitest suites, never the full build.",
    "I prefer terse responses.",
]


def test_lifecycle_as_commits(tmp_path: Path) -> None:
    memory = tmp_path / "state" / "memory"
    assert qmem(memory, "init").code == 0

    qwen = qwen_transcript(tmp_path / "qwen.jsonl", "qwen-session-1", QWEN_PROMPTS)
    result = qmem(memory, "--json", "extract", "--transcript", str(qwen))
    assert result.code == 0, result.err
    data = result.json()
    assert data["touchedTopics"] == ["user", "reference", "project"]
    assert data["systemMessage"] == "Managed auto-memory updated: user.md, reference.md, project.md"
    assert trailers(memory)["Qmem-Op"] == "extract"
    assert trailers(memory)["Qmem-Session"] == "qwen-session-1"
    assert trailers(memory)["Qmem-Added"] == "3"
    assert_clean_repo(memory)

    # the same transcript again: nothing new, no commit
    before = head(memory)
    assert qmem(memory, "extract", "--transcript", str(qwen)).code == 0
    assert head(memory) == before

    claude = claude_transcript(tmp_path / "claude.jsonl", "claude-session-1", CLAUDE_PROMPTS)
    result = qmem(memory, "--json", "extract", "--transcript", str(claude))
    assert result.code == 0, result.err
    assert result.json()["touchedTopics"] == ["feedback"]  # the terse preference already exists
    assert trailers(memory)["Qmem-Session"] == "claude-session-1"
    assert_clean_repo(memory)

    recalled = qmem(memory, "recall", "latency dashboard")
    assert recalled.code == 0
    assert recalled.out.startswith("## Relevant memory\n")
    assert "grafana.internal/d/api-latency" in recalled.out
    assert recalled.out.endswith("\n") and not recalled.out.endswith("\n\n")

    forgot = qmem(memory, "--json", "forget", "latency dashboard")
    assert forgot.code == 0, forgot.err
    assert forgot.json()["systemMessage"] == "Managed auto-memory forgot 1 entry from: reference/"
    assert trailers(memory)["Qmem-Op"] == "forget"
    assert trailers(memory)["Qmem-Removed"] == "1"
    assert "grafana" not in (memory / "MEMORY.md").read_text()
    assert qmem(memory, "recall", "latency dashboard").out == ""
    assert_clean_repo(memory)

    restored = qmem(memory, "restore", "latency dashboard")
    assert restored.code == 0, restored.err
    assert trailers(memory)["Qmem-Op"] == "restore"
    assert "grafana.internal" in qmem(memory, "recall", "latency dashboard").out
    assert_clean_repo(memory)

    # a hand-made duplicate for dream to fold away
    duplicate = memory / "user" / "terse-again.md"
    duplicate.write_text(
        "---\nname: Terse\ndescription: terse\ntype: user\n---\n\nI prefer terse responses.\n"
    )
    git(memory, "add", "user/terse-again.md")
    git(memory, "commit", "-q", "--no-verify", "-m", "hand edit")
    dreamt = qmem(memory, "--json", "dream", "--force")
    assert dreamt.code == 0, dreamt.err
    assert dreamt.json()["deduped_entries"] == 1
    assert trailers(memory)["Qmem-Op"] == "dream"
    assert_clean_repo(memory)

    ops = git(memory, "log", "--format=%(trailers:key=Qmem-Op,valueonly)").split()
    assert ops == ["dream", "restore", "forget", "extract", "extract", "index"]
    log = qmem(memory, "--json", "log")
    assert [entry["op"] for entry in log.json()][:5] == [
        "dream",
        None,
        "restore",
        "forget",
        "extract",
    ]


def test_local_mode_leaves_the_project_repository_clean(tmp_path: Path) -> None:
    """QWEN_CODE_MEMORY_LOCAL=1 keeps memory and state in <project>/.qwen: after init, writes,
    recall (its cache), a prompt hook (its log and session files) and a dream, the project's own
    `git status` shows nothing of them."""
    import json
    import os
    import subprocess
    import sys

    project = tmp_path / "project"
    project.mkdir()
    git(project, "init", "-q", "-b", "main")
    env = {**os.environ, "QWEN_CODE_MEMORY_LOCAL": "1"}

    def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "qmem_git", "--project", str(project), *args]
        return subprocess.run(
            command, input=stdin, capture_output=True, text=True, env=env, cwd=project
        )

    assert run("init").returncode == 0
    assert (
        run("remember", "--type", "project", "The billing service deploys on Tuesdays").returncode
        == 0
    )
    assert run("recall", "billing deploys").returncode == 0
    event = {"session_id": "s1", "cwd": str(project), "prompt": "when does billing deploy?"}
    assert run("hook", "--agent", "claude", "prompt", stdin=json.dumps(event)).returncode == 0
    assert run("dream", "--force").returncode == 0
    assert (project / ".qwen" / "memory.git").is_dir() and not (
        project / ".qwen" / "memory" / ".git"
    ).exists()
    assert git(project, "status", "--porcelain", "--untracked-files=all") == ""


def test_commands_run_inside_the_memory_folder_use_it(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    project = tmp_path / "project"
    project.mkdir()
    git(project, "init", "-q", "-b", "main")
    env = {**os.environ, "QWEN_CODE_MEMORY_BASE_DIR": str(tmp_path / "qwen")}
    base = [sys.executable, "-m", "qmem_git"]
    subprocess.run([*base, "init"], cwd=project, env=env, check=True, capture_output=True)
    where = subprocess.run(
        [*base, "--json", "where"], cwd=project, env=env, capture_output=True, text=True
    )
    memory = Path(json.loads(where.stdout)["memory_root"])
    subprocess.run(
        [*base, "remember", "--type", "user", "I prefer terse responses in reviews"],
        cwd=project,
        env=env,
        check=True,
        capture_output=True,
    )
    for cwd in (memory, memory / "user"):
        inside = subprocess.run(
            [*base, "--json", "where"], cwd=cwd, env=env, capture_output=True, text=True
        )
        assert json.loads(inside.stdout)["memory_root"] == str(memory)
        log = subprocess.run(
            [*base, "log", "-n", "1"], cwd=cwd, env=env, capture_output=True, text=True
        )
        assert log.returncode == 0 and "remember: add I prefer terse responses" in log.stdout
        checked = subprocess.run(
            [*base, "validate", "--format", "gcc"], cwd=cwd, env=env, capture_output=True, text=True
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr
