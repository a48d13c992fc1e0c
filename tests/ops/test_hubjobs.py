"""``sync --all``'s list of the machine's stores (``ops.hubjobs.machine_jobs``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from qmem_git.core.claudepaths import STATE_SUFFIX
from qmem_git.ops.hubjobs import machine_jobs
from qmem_git.settings import build_settings


def test_claudes_folders_are_found_under_its_remote_memory_dir(tmp_path: Path) -> None:
    """Claude keeps memory under ``CLAUDE_CODE_REMOTE_MEMORY_DIR`` when it is set (as
    ``claudepaths.memory_base`` says), not under its config dir."""
    home, remote_base = tmp_path / "home", tmp_path / "remote-memory"
    home.mkdir()
    root = remote_base / "projects" / "-work-shop" / "memory"
    root.mkdir(parents=True)
    Path(f"{root}{STATE_SUFFIX}").mkdir()
    subprocess.run(["git", "init", "-q", "--bare", f"{root}.git"], check=True)
    (tmp_path / "claude" / "projects" / "-work-other" / "memory").mkdir(parents=True)
    env = {
        "HOME": str(home),
        "QWEN_CODE_MEMORY_BASE_DIR": str(tmp_path / "qwen"),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
        "CLAUDE_CODE_REMOTE_MEMORY_DIR": str(remote_base),
    }
    settings = build_settings(env, cwd=str(tmp_path), home=str(home), with_model=False)
    jobs = machine_jobs(settings)
    claude = [job.settings.layout.memory_root for job in jobs if job.kind == "claude"]
    assert claude == [str(root)]
