"""Claude Code's files, read for where its auto-memory lives and whether it is on.

Claude Code 2.1.197 (its bundled code, by behaviour): the project key comes from the real path
of the session's folder, through its git root (the nearest folder holding a ``.git`` folder or
file) to the main repository when that root is a linked worktree. ``autoMemoryDirectory`` is
read from, highest first, the managed settings (``/etc/claude-code/managed-settings.json``),
the project's ``.claude/settings.local.json`` and ``.claude/settings.json`` (Claude reads these
two in ``-p`` runs and in folders whose trust was accepted; qmem-git always does) and the
user's ``settings.json`` in the config dir. ``autoMemoryEnabled`` is merged the same way;
``CLAUDE_CODE_DISABLE_AUTO_MEMORY`` wins over it (1/true/yes/on: off, 0/false/no/off: on).
This module is on the prompt hook's path: ``os``, ``posixpath`` and the C JSON scanner only.
"""

from __future__ import annotations

import os
import posixpath

from qmem_git.core.claudepaths import (
    STATE_SUFFIX,
    claude_layout,
    claude_memory_root,
    config_dir,
    custom_memory_dir,
)
from qmem_git.core.jsonc import loads, strip_jsonc
from qmem_git.core.paths import expand_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from qmem_git.core.paths import Layout

MANAGED_SETTINGS = "/etc/claude-code/managed-settings.json"
MAX_SETTINGS_BYTES = 16 * 1024 * 1024
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


def claude_store(project: str | None, env: Mapping[str, str], home: str, cwd: str) -> Layout:
    """The layout of Claude's auto-memory folder for ``project`` (default: ``cwd``)."""
    folder = expand_dir(project or cwd, home, cwd)
    custom = None
    value = setting(settings_files(env, home, folder), "autoMemoryDirectory")
    if isinstance(value, str) and value:
        custom = custom_memory_dir(value, home)
    root = claude_memory_root(canonical_root(folder), env, home, custom)
    return claude_layout(expand_dir(root, home, cwd), folder, home, cwd)


def claude_layout_for(
    layout: Layout, agent: str, project: str | None, env: Mapping[str, str], home: str, cwd: str
) -> tuple[Layout, str]:
    """The store the options name, and whose it is: ``--agent claude`` is Claude's folder
    (or the ``--memory-dir`` given, as Claude's), and a folder named explicitly (or stood in)
    that has qmem-git's Claude state folder beside it is Claude's too."""
    if layout.mode == "explicit":
        if agent != "claude" and not is_claude_store(layout.memory_root):
            return layout, agent
        folder = project or layout.project_root or cwd
        return claude_layout(layout.memory_root, folder, home, cwd), "claude"
    return claude_store(project, env, home, cwd), "claude"


def is_claude_store(memory_root: str) -> bool:
    """True when ``memory_root`` is a Claude Code folder qmem-git versions: its state folder
    (``<root>.qmem``) is beside it."""
    return os.path.isdir(memory_root + STATE_SUFFIX)


def auto_memory_on(env: Mapping[str, str], project: str, home: str) -> bool:
    """Whether Claude Code writes its own auto-memory for ``project``."""
    switch = env.get("CLAUDE_CODE_DISABLE_AUTO_MEMORY")
    if switch is not None and switch.strip().lower() in TRUE_WORDS:
        return False
    if switch is not None and switch.strip().lower() in FALSE_WORDS:
        return True
    if env.get("CLAUDE_CODE_SIMPLE", "").strip().lower() in TRUE_WORDS:
        return False
    value = setting(settings_files(env, home, project), "autoMemoryEnabled")
    return value if isinstance(value, bool) else True


def settings_files(env: Mapping[str, str], home: str, project: str) -> list[str]:
    """Claude's settings files that may set the memory keys, highest precedence first."""
    claude = posixpath.join(project, ".claude")
    user = posixpath.join(config_dir(env, home), "settings.json")
    return [
        MANAGED_SETTINGS,
        posixpath.join(claude, "settings.local.json"),
        posixpath.join(claude, "settings.json"),
        user,
    ]


def setting(paths: list[str], key: str) -> object:
    """The first file's value of the top-level ``key`` (None when no file sets it)."""
    for path in paths:
        data = _load(path)
        if isinstance(data, dict) and key in data and data[key] is not None:
            return data[key]
    return None


def _load(path: str) -> object:
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_SETTINGS_BYTES)
        text = raw.decode("utf-8").lstrip("\ufeff")
        return loads(strip_jsonc(text)) if text.strip() else None
    except (OSError, ValueError):
        return None


def canonical_root(folder: str) -> str:
    """Claude's project root for a session in ``folder``: the real path's git root, a linked
    worktree's main repository, else the real path itself."""
    real = os.path.realpath(folder)
    root = git_root(real)
    return real if root is None else main_repository(root)


def git_root(folder: str) -> str | None:
    """The nearest folder (``folder`` itself included, up to ``/``) holding a ``.git`` folder
    or file, following symlinks; None when there is none."""
    current = posixpath.normpath(folder)
    while True:
        probe = posixpath.join(current, ".git")
        if os.path.isdir(probe) or os.path.isfile(probe):
            return current
        parent = posixpath.dirname(current)
        if parent == current:
            return None
        current = parent


def main_repository(root: str) -> str:
    """For a linked worktree (``.git`` file naming ``<common>/worktrees/<name>`` that names
    it back), the main repository's folder; else ``root``."""
    try:
        with open(posixpath.join(root, ".git"), encoding="utf-8") as handle:
            head = handle.read().strip()
        if not head.startswith("gitdir:"):
            return root
        gitdir = posixpath.normpath(posixpath.join(root, head[7:].strip()))
        common_name = _read(posixpath.join(gitdir, "commondir"))
        common = posixpath.normpath(posixpath.join(gitdir, common_name))
        if posixpath.dirname(gitdir) != posixpath.join(common, "worktrees"):
            return root
        back = os.path.realpath(_read(posixpath.join(gitdir, "gitdir")))
        if back != posixpath.join(os.path.realpath(root), ".git"):
            return root
    except (OSError, UnicodeDecodeError):
        return root
    return common if posixpath.basename(common) != ".git" else posixpath.dirname(common)


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read().strip()
