"""Claude's project key and memory folder, compared with the real Claude Code 2.1.197.

The key function (and the string hash it uses past 200 characters) is cut out of the native
binary's bundled JavaScript by its text and run in node over many paths; the folder a real
``claude -p`` makes is checked in ``test_headless_e2e.py``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import require_tool
from hypothesis import given, settings
from hypothesis import strategies as st

from qmem_git.core.claudepaths import claude_key, custom_memory_dir
from qmem_git.store.claudesettings import canonical_root, claude_store

KEY_FUNCTION = re.compile(
    rb'function (\$?\w+)\(e\)\{let t=e\.replace\(/\[\^a-zA-Z0-9\]/g,"-"\);'
    rb"if\(t\.length<=(\w+)\)return t;return`\$\{t\.slice\(0,\2\)\}-\$\{(\w+)\(e\)\}`\}"
)
CASES = [
    "/home/alice/my_repo.v2",
    "/",
    "/tmp/ünïcödé/проект",
    "/tmp/emoji-\U0001f600-dir",
    "/x/" + "a" * 250,
    "/deep/" + "/".join(f"part{i}" for i in range(60)),
    "/" + "é" * 300,
    "C:\\Users\\bob\\proj",
]


def _javascript(binary: Path) -> str:
    """Claude's key function, the 200-character limit and the hash it appends past it, cut
    out of the binary's bundled JavaScript."""
    data = binary.read_bytes()
    found = KEY_FUNCTION.search(data)
    assert found is not None, "Claude's project-key function was not found in the binary"
    key_name, limit_name, helper_name = (part.decode() for part in found.groups())
    limit = re.search(rb"[,;{ ]" + re.escape(limit_name.encode()) + rb"=(\d+)[,;]", data)
    helper = re.search(
        rb"function " + re.escape(helper_name.encode()) + rb"\(e\)\{return Math\.abs\((\w+)"
        rb"\(e\)\)\.toString\(36\)\}",
        data,
    )
    assert limit is not None and helper is not None
    string_hash = re.search(
        rb"function " + re.escape(helper.group(1)) + rb"\(e\)\{let t=0;for\(let n=0;"
        rb"n<e\.length;n\+\+\)t=\(t<<5\)-t\+e\.charCodeAt\(n\)\|0;return t\}",
        data,
    )
    assert string_hash is not None
    parts = [string_hash.group(), helper.group(), found.group()]
    return "\n".join(
        [f"const {limit_name}={limit.group(1).decode()};"]
        + [part.decode() for part in parts]
        + [f"const keyOf={key_name};"]
    )


def _node_keys(script: str, paths: list[str]) -> list[str]:
    program = script + "\nconst input=JSON.parse(require('fs').readFileSync(0,'utf8'));"
    program += "\nprocess.stdout.write(JSON.stringify(input.map(keyOf)));"
    done = subprocess.run(
        ["node", "-e", program],
        input=json.dumps(paths),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return list(json.loads(done.stdout))


@pytest.fixture(scope="module")
def key_script(claude_exe: Path) -> str:
    require_tool(shutil.which("node") is not None, "node (apt-get install nodejs)")
    return _javascript(claude_exe.resolve())


def test_key_equals_claudes_on_chosen_paths(key_script: str) -> None:
    assert _node_keys(key_script, CASES) == [claude_key(path) for path in CASES]
    assert len(claude_key(CASES[4])) > 200  # the hashed branch was taken


@settings(max_examples=1, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=260), min_size=300, max_size=300))
def test_key_equals_claudes_on_random_paths(key_script: str, paths: list[str]) -> None:
    assert _node_keys(key_script, paths) == [claude_key(path) for path in paths]


def test_custom_directory_is_taken_as_claude_takes_it(tmp_path: Path) -> None:
    home = str(tmp_path)
    assert custom_memory_dir("~/notes/mem/", home) == f"{home}/notes/mem"
    assert custom_memory_dir("/abs//x/../y", home) == "/abs/y"
    assert custom_memory_dir("~/", home) is None  # the home folder itself
    assert custom_memory_dir("~/../up", home) is None
    assert custom_memory_dir("relative/dir", home) is None
    assert custom_memory_dir("/a", home) is None  # too short


def test_worktree_counts_as_its_main_repository(tmp_path: Path) -> None:
    require_tool(shutil.which("git") is not None, "git")
    main = tmp_path / "main"
    main.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", str(main)], check=True)
    subprocess.run([*git, "-C", str(main), "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    linked = tmp_path / "linked"
    subprocess.run([*git, "-C", str(main), "worktree", "add", "-q", str(linked)], check=True)
    (linked / "sub").mkdir()
    assert canonical_root(str(linked / "sub")) == str(main)
    assert canonical_root(str(main / ".git" / "..")) == str(main)
    plain = tmp_path / "plain"
    plain.mkdir()
    os.symlink(plain, tmp_path / "link")
    assert canonical_root(str(tmp_path / "link")) == str(plain.resolve())


def test_store_follows_the_config_dir_and_settings(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    project = tmp_path / "proj"
    (project / ".claude").mkdir(parents=True)
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")}
    layout = claude_store(str(project), env, home, str(project))
    key = claude_key(canonical_root(str(project)))
    assert layout.memory_root == f"{tmp_path}/cfg/projects/{key}/memory"
    assert layout.git_dir == layout.memory_root + ".git"
    assert layout.state_dir == layout.memory_root + ".qmem"
    (project / ".claude" / "settings.json").write_text('{"autoMemoryDirectory": "~/m/"}')
    assert claude_store(str(project), env, home, str(project)).memory_root == f"{home}/m"
