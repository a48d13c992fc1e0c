"""``python -m qmem_git`` / the console script when the agent (or a shell) closed a stream.

``cmd >&-`` starts Python with ``sys.stdout`` None; hooks must still exit 0 (agent-integration
§3.4) and other commands must finish as they would with output thrown away.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

QMEM_GIT = Path(sys.executable).parent / "qmem-git"


def run_closed(args: list[str], stdin: bytes = b"", close: str = "stdout") -> tuple[int, str]:
    """Run the console script with fd 1 (or 2) closed; (exit code, stderr or '')."""
    fd = 1 if close == "stdout" else 2
    done = subprocess.run(
        [str(QMEM_GIT), *args],
        input=stdin,
        stdout=None if close == "stdout" else subprocess.PIPE,
        stderr=subprocess.PIPE if close == "stdout" else None,
        env={**os.environ},
        timeout=60,
        check=False,
        pass_fds=(),
        preexec_fn=lambda: os.close(fd),
    )
    return done.returncode, (done.stderr or b"").decode()


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    """An initialised store holding one memory about terraform."""
    root = tmp_path / "memory"
    for args in (["init"], ["remember", "Terraform always runs in CI only"]):
        subprocess.run(
            [str(QMEM_GIT), "--memory-dir", str(root), *args],
            capture_output=True,
            env={**os.environ},
            timeout=60,
            check=True,
        )
    return root


def test_prompt_hook_with_stdout_closed_exits_zero(memory: Path, tmp_path: Path) -> None:
    data = json.dumps({"session_id": "c", "cwd": str(tmp_path), "prompt": "terraform"}).encode()
    code, err = run_closed(
        ["--memory-dir", str(memory), "hook", "--agent", "claude", "prompt"], data
    )
    assert code == 0, err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "args",
    [
        ["recall", "terraform"],
        ["log"],
        ["--help"],
        ["validate"],
        ["remember", "We always deploy terraform from CI only"],
        ["show"],
    ],
)
def test_commands_with_stdout_closed_finish_cleanly(memory: Path, args: list[str]) -> None:
    code, err = run_closed(["--memory-dir", str(memory), *args])
    assert "Traceback" not in err and "AttributeError" not in err, err
    assert code == 0, err


def test_a_command_with_stderr_closed_keeps_its_exit_code(memory: Path) -> None:
    code, _ = run_closed(["--memory-dir", str(memory), "no-such-command"], close="stderr")
    assert code == 2
