"""Qwen Code's settings files, read for the one value that moves the memory folders.

``advanced.runtimeOutputDir`` moves Qwen's runtime base dir, and with it every project's memory
folder and the user tier (unless ``QWEN_RUNTIME_DIR`` or ``QWEN_CODE_MEMORY_BASE_DIR`` is set).
Qwen 0.24.4 merges its settings files with this precedence, highest first: system
(``QWEN_CODE_SYSTEM_SETTINGS_PATH``, else ``/etc/qwen-code/settings.json``; on macOS
``/Library/Application Support/QwenCode/settings.json``), the workspace's
``.qwen/settings.json`` (not when the workspace is the home folder), the user's
``settings.json`` in the global dir (``QWEN_HOME``, else ``~/.qwen``), then the system defaults
(``QWEN_CODE_SYSTEM_DEFAULTS_PATH``, else ``system-defaults.json`` beside the system file).
Files may hold comments and a BOM; ``$VAR`` and ``${VAR}`` in values take the environment's
value. This module is on the prompt hook's import path: it imports ``json`` (and with it ``re``,
~10 ms) only for a file that names ``runtimeOutputDir`` at all.
"""

from __future__ import annotations

import os
import posixpath
import sys

from qmem_git.core.jsonc import loads, strip_jsonc
from qmem_git.core.paths import expand_dir, global_qwen_dir, tier_layout

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from qmem_git.core.paths import Layout

SYSTEM_SETTINGS = "/etc/qwen-code/settings.json"
MACOS_SYSTEM_SETTINGS = "/Library/Application Support/QwenCode/settings.json"


def settings_files(env: Mapping[str, str], home: str, cwd: str, workspace: str) -> list[str]:
    """Qwen's settings files for ``workspace``, highest precedence first."""
    default = MACOS_SYSTEM_SETTINGS if sys.platform == "darwin" else SYSTEM_SETTINGS
    system = env.get("QWEN_CODE_SYSTEM_SETTINGS_PATH") or default
    defaults = env.get("QWEN_CODE_SYSTEM_DEFAULTS_PATH") or posixpath.join(
        posixpath.dirname(system), "system-defaults.json"
    )
    user = posixpath.join(global_qwen_dir(env, home, cwd), "settings.json")
    files = [system]
    if _real(workspace) != _real(home):
        files.append(posixpath.join(workspace, ".qwen", "settings.json"))
    return [*files, user, defaults]


def qwen_layout(
    project: str | None,
    memory_dir: str | None,
    env: Mapping[str, str],
    home: str,
    cwd: str,
    tier: str = "project",
) -> Layout:
    """``core.paths.tier_layout`` with Qwen's settings read: the memory folder Qwen uses.

    The settings files are read only when they can matter (no ``--memory-dir``, no
    ``QWEN_CODE_MEMORY_BASE_DIR`` or ``QWEN_RUNTIME_DIR``, and for the project tier no
    ``QWEN_CODE_MEMORY_LOCAL``)."""
    output_dir = None
    local = tier == "project" and env.get("QWEN_CODE_MEMORY_LOCAL") == "1"
    overridden = local or env.get("QWEN_CODE_MEMORY_BASE_DIR")
    if not memory_dir and not overridden and not env.get("QWEN_RUNTIME_DIR"):
        workspace = expand_dir(project or cwd, home, cwd)
        output_dir = runtime_output_dir(env, home, cwd, workspace)
    return tier_layout(tier, project, memory_dir, env, home, cwd, os.path.lexists, output_dir)


def runtime_output_dir(env: Mapping[str, str], home: str, cwd: str, workspace: str) -> str | None:
    """The merged ``advanced.runtimeOutputDir`` as written (``~`` and relative paths are the
    caller's to resolve), or None when no file sets a non-empty one."""
    for path in settings_files(env, home, cwd, workspace):
        settings = _load(path)
        advanced = settings.get("advanced") if isinstance(settings, dict) else None
        if isinstance(advanced, dict) and "runtimeOutputDir" in advanced:
            value = advanced["runtimeOutputDir"]
            return _expand_env(value, env) if isinstance(value, str) and value else None
    return None


def _real(path: str) -> str:
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return path


def _load(path: str) -> object:
    """A settings file's JSON (comments allowed), or None when it is missing, unreadable or
    cannot set ``runtimeOutputDir``."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, ValueError):
        return None
    if "runtimeOutputDir" not in text:
        return None  # the only key read here: no need to parse the file
    try:  # the C scanner: the prompt hook reads this, and ``import json`` costs ``re``
        return loads(strip_json_comments(text.removeprefix("\ufeff")))
    except Exception:  # the scanner raises StopIteration on truncated text, not ValueError
        return None


def strip_json_comments(text: str) -> str:
    """``text`` with ``//`` and ``/* */`` comments outside strings blanked out (Qwen's settings
    reader strips comments only: a trailing comma stays an error)."""
    return strip_jsonc(text, trailing_commas=False)


def _expand_env(value: str, env: Mapping[str, str]) -> str:
    """``$NAME`` and ``${NAME}`` replaced by the environment's value; unset ones stay."""
    if "$" not in value:
        return value
    import re

    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        return env.get(name, match.group(0))

    return re.sub(r"\$(?:(\w+)|\{([^}]+)\})", replace, value, flags=re.ASCII)
