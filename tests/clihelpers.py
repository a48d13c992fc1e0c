"""Helpers for tests that drive the real ``qmem-git`` process and check results with C git."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers_git import git_argv


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def qmem(
    memory: Path,
    *args: str,
    env: dict[str, str] | None = None,
    stdin: str = "",
    cwd: Path | None = None,
) -> Run:
    """Run ``python -m qmem_git --memory-dir MEMORY ARGS`` as a real process."""
    return qmem_in(cwd, "--memory-dir", str(memory), *args, env=env, stdin=stdin)


def qmem_in(
    cwd: Path | None, *args: str, env: dict[str, str] | None = None, stdin: str = ""
) -> Run:
    """Run ``python -m qmem_git ARGS`` as a real process in ``cwd`` (no ``--memory-dir``:
    the folder, ``--tier`` and ``--agent`` decide the store)."""
    proc = subprocess.run(
        [sys.executable, "-m", "qmem_git", *args],
        capture_output=True,
        text=True,
        input=stdin,
        env={**os.environ, **(env or {})},
        timeout=120,
        cwd=cwd,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def qmem_on_tty(
    memory: Path, *args: str, env: dict[str, str] | None = None, stdin_tty: bool = False
) -> Run:
    """Run ``qmem-git`` with stdout and stderr on a pseudo-terminal, as a person sees it;
    ``out`` holds both streams (the terminal's CR LF read back as LF). With ``stdin_tty``
    stdin is the terminal too (a person at it: what the pager needs)."""
    leader, follower = pty.openpty()
    with subprocess.Popen(
        [sys.executable, "-m", "qmem_git", "--memory-dir", str(memory), *args],
        stdin=follower if stdin_tty else subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        env={**os.environ, **(env or {})},
    ) as proc:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the process closed its side of the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        os.close(leader)
        code = proc.wait(timeout=120)
    return Run(code, b"".join(chunks).decode("utf-8").replace("\r\n", "\n"), "")


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        [*git_argv(str(repo)), *args], capture_output=True, text=True, check=True, timeout=60
    )
    return proc.stdout


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def assert_clean_repo(repo: Path) -> None:
    """What every writing command must leave: clean status, a repo C git calls sound."""
    assert git(repo, "status", "--porcelain") == ""
    subprocess.run([*git_argv(str(repo)), "fsck", "--strict"], check=True, capture_output=True)


def trailers(repo: Path, rev: str = "HEAD") -> dict[str, str]:
    body = git(repo, "log", "-1", "--format=%B", rev)
    found = {}
    for line in body.splitlines():
        if line.startswith("Qmem-") and ": " in line:
            key, value = line.split(": ", 1)
            found[key] = value
    return found


def one_error_line(stderr: str) -> str:
    """The CLI contract: exactly one ``Error:`` line, and no traceback."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr, stderr
    errors = [line for line in lines if line.startswith("Error: ")]
    assert len(errors) == 1, stderr
    return errors[0]


def qwen_transcript(path: Path, session: str, prompts: list[str]) -> Path:
    """A Qwen Code JSONL transcript: each prompt followed by a short model reply."""
    lines = []
    for i, prompt in enumerate(prompts):
        lines.append(
            {
                "uuid": f"u{i}",
                "sessionId": session,
                "type": "user",
                "message": {"role": "user", "parts": [{"text": prompt}]},
            }
        )
        lines.append(
            {
                "uuid": f"a{i}",
                "sessionId": session,
                "type": "assistant",
                "message": {"role": "model", "parts": [{"text": "Noted."}]},
            }
        )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def claude_transcript(path: Path, session: str, prompts: list[str]) -> Path:
    """A Claude Code JSONL transcript with string user content and block assistant content."""
    lines = []
    for i, prompt in enumerate(prompts):
        lines.append(
            {
                "type": "user",
                "uuid": f"cu{i}",
                "sessionId": session,
                "message": {"role": "user", "content": prompt},
            }
        )
        lines.append(
            {
                "type": "assistant",
                "uuid": f"ca{i}",
                "sessionId": session,
                "message": {
                    "id": f"msg_{i}",
                    "role": "assistant",
                    "content": [{"type": "text", "text": "Okay."}],
                },
            }
        )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path
