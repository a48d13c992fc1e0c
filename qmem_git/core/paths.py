"""Where a project's memory lives (spec §2). Pure: the caller passes env, home, cwd and a probe."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")


@dataclass(frozen=True)
class Layout:
    """The memory root (git work tree) and the state dir that holds machine-local files."""

    memory_root: str
    state_dir: str
    mode: str  # "global", "local" or "explicit"
    project_root: str = ""

    def state_file(self, name: str) -> str:
        return posixpath.join(self.state_dir, name)


def sanitize(path: str, windows: bool = False) -> str:
    """Every character outside ASCII letters and digits becomes ``-``, one for one.

    "Character" is a UTF-16 code unit, as in the host's JavaScript regex: a character outside
    the BMP (an emoji) becomes ``--``, so both tools name the same project folder.
    """
    return _NOT_ALNUM.sub(_dashes, path.lower() if windows else path)


def _dashes(match: re.Match[str]) -> str:
    return "--" if ord(match.group()) > 0xFFFF else "-"


def expand_dir(value: str, home: str, cwd: str) -> str:
    """Expand a leading ``~`` and resolve a relative value against ``cwd`` (spec §2.1)."""
    if value == "~" or value.startswith("~/"):
        value = home + value[1:]
    if not posixpath.isabs(value):
        value = posixpath.join(cwd, value)
    return posixpath.normpath(value)


def base_dir(env: Mapping[str, str], home: str, cwd: str) -> str:
    """The memory base dir: QWEN_CODE_MEMORY_BASE_DIR, else the runtime base dir."""
    override = env.get("QWEN_CODE_MEMORY_BASE_DIR", "")
    if override:
        return expand_dir(override, home, cwd)
    return runtime_base_dir(env, home, cwd)


def runtime_base_dir(env: Mapping[str, str], home: str, cwd: str) -> str:
    """The host's runtime base dir: QWEN_RUNTIME_DIR, else ``~/.qwen``."""
    runtime = env.get("QWEN_RUNTIME_DIR", "")
    if runtime:
        return expand_dir(runtime, home, cwd)
    return posixpath.join(home, ".qwen")


def find_git_root(project_root: str, exists: Callable[[str], bool]) -> str:
    """Nearest ancestor holding a ``.git`` entry (dir or file), else the project root itself."""
    current = posixpath.normpath(project_root)
    while True:
        if exists(posixpath.join(current, ".git")):
            return current
        parent = posixpath.dirname(current)
        if parent == current:
            return posixpath.normpath(project_root)
        current = parent


def resolve_layout(
    project_root: str,
    env: Mapping[str, str],
    home: str,
    cwd: str,
    exists: Callable[[str], bool],
) -> Layout:
    """Memory root and state dir for a project (spec §2.2)."""
    project = expand_dir(project_root, home, cwd)
    if env.get("QWEN_CODE_MEMORY_LOCAL") == "1":
        state = posixpath.join(project, ".qwen")
        return Layout(posixpath.join(state, "memory"), state, "local", project)
    git_root = find_git_root(project, exists)
    state = posixpath.join(base_dir(env, home, cwd), "projects", sanitize(git_root))
    return Layout(posixpath.join(state, "memory"), state, "global", project)


def explicit_layout(memory_dir: str, home: str, cwd: str) -> Layout:
    """``--memory-dir DIR``: that dir is the memory root, its parent the state dir."""
    root = expand_dir(memory_dir, home, cwd)
    return Layout(root, posixpath.dirname(root), "explicit", "")


def chats_dir(project_root: str, env: Mapping[str, str], home: str, cwd: str) -> str:
    """The host's transcript folder for a project (spec §8.1: project root as given)."""
    project = expand_dir(project_root, home, cwd)
    return posixpath.join(runtime_base_dir(env, home, cwd), "projects", sanitize(project), "chats")


def is_inside(root: str, target: str) -> bool:
    """True when ``target`` is ``root`` or below it (spec §2.3), without touching the disk."""
    rel = posixpath.relpath(posixpath.normpath(target), posixpath.normpath(root))
    return rel == "." or not (rel == ".." or rel.startswith("../") or posixpath.isabs(rel))
