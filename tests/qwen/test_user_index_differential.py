"""The user tier (``--tier user``, ``<base>/memories``): MEMORY.md from qmem-git against Qwen
Code 0.24.4's ``rebuildUserAutoMemoryIndex`` byte for byte, the folder found as ``--tier user``
finds it, and a store whose index Qwen wrote accepted without a rewrite.

Qwen builds the user index with the project tier's builder (``buildManagedAutoMemoryIndex`` on
the newest 200 memories), so qmem-git uses one builder for both; these tests hold it to that.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from clihelpers import assert_clean_repo, git

from qmem_git.ops.tierindex import expected_index
from qmem_git.settings import build_settings
from qwen.conftest import Bridge
from qwen.test_index_differential import AGENT_FOLDER, _folders, _write


def test_user_tier_folders_give_qwens_user_index_byte_for_byte(
    qwen: Bridge, tmp_path: Path
) -> None:
    folders = _folders(80)
    calls, roots, ours = [], [], []
    for index, files in enumerate(folders):
        env = {"QWEN_CODE_MEMORY_BASE_DIR": str(tmp_path / f"c{index}" / "base")}
        settings = build_settings(env, cwd=str(tmp_path), home=str(tmp_path), tier="user")
        root = Path(settings.layout.memory_root)
        _write(root, files)
        roots.append(root)
        ours.append(expected_index(str(root)).text.encode("utf-8"))
        calls.append({"op": "index", "tier": "user", "env": env})
    for root, mine, result in zip(roots, ours, qwen(calls), strict=True):
        assert isinstance(result, str), result
        assert (root / "MEMORY.md").read_bytes() == mine, root
    assert sum(len(files) for files in folders) > 400


def test_a_user_store_accepts_the_index_qwen_wrote(qwen: Bridge, tmp_path: Path) -> None:
    base = tmp_path / "base"
    env = {**os.environ, "QWEN_CODE_MEMORY_BASE_DIR": str(base)}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "qmem_git", "--tier", "user", *args]
        return subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True)

    assert cli("init").returncode == 0
    root = base / "memories"
    for n, (rel, text) in enumerate(AGENT_FOLDER):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
        os.utime(path, ns=(1_790_000_000_000_000_000 + n % 3,) * 2)
    (result,) = qwen(
        [{"op": "index", "tier": "user", "env": {"QWEN_CODE_MEMORY_BASE_DIR": str(base)}}]
    )
    assert isinstance(result, str) and "(Pinned/deploy.md)" in result
    qwens = (root / "MEMORY.md").read_bytes()
    assert cli("index", "--check").returncode == 0
    assert cli("snapshot").returncode == 0
    assert (root / "MEMORY.md").read_bytes() == qwens  # committed as Qwen wrote it
    assert git(root, "show", "HEAD:MEMORY.md").encode("utf-8") == qwens
    assert_clean_repo(root)
    assert sorted(p.name for p in base.iterdir()) == ["memories", "memories.git", "memories.qmem"]
