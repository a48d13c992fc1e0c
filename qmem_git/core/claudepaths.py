"""Where Claude Code 2.1 keeps its own auto-memory for a project. Pure: callers pass values.

Claude Code 2.1.197 (its bundled code, by behaviour): the memory root is the settings'
``autoMemoryDirectory`` when one is set (``~/`` expanded; only absolute paths of three
characters or more), else ``<config dir>/projects/<key>/memory/``, where the config dir is
``CLAUDE_CODE_REMOTE_MEMORY_DIR``, else ``CLAUDE_CONFIG_DIR``, else ``~/.claude``, and the key
is the project's canonical git root (a linked worktree counts as its main repository), else the
project folder, with every UTF-16 code unit outside ``A-Z a-z 0-9`` replaced by ``-``; a key
longer than 200 characters keeps 200 and gains ``-`` and a hash of the whole path.
"""

from __future__ import annotations

import posixpath
import unicodedata

from qmem_git.core.paths import Layout, expand_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

MAX_KEY = 200  # Claude's limit on a sanitized project key before it hashes the rest
CLAUDE_MODE = "claude"  # Layout.mode of Claude's folder
STATE_SUFFIX = ".qmem"  # qmem-git's state files: beside the folder, never among Claude's


def claude_key(path: str) -> str:
    """Claude's project key: each UTF-16 code unit outside ASCII letters and digits becomes
    ``-``; past :data:`MAX_KEY` characters the rest is replaced by ``-`` and a hash."""
    units = path.encode("utf-16-le")
    codes = [int.from_bytes(units[i : i + 2], "little") for i in range(0, len(units), 2)]
    key = "".join(chr(c) if c < 128 and chr(c).isalnum() else "-" for c in codes)
    if len(key) <= MAX_KEY:
        return key
    return f"{key[:MAX_KEY]}-{_base36(abs(java_hash(codes)))}"


def java_hash(codes: list[int]) -> int:
    """``(h << 5) - h + code``, wrapped to a signed 32-bit integer, over UTF-16 code units."""
    value = 0
    for code in codes:
        value = (value * 31 + code) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while True:
        number, rest = divmod(number, 36)
        text = digits[rest] + text
        if number == 0:
            return text


def config_dir(env: Mapping[str, str], home: str) -> str:
    """Claude's config dir: ``CLAUDE_CONFIG_DIR``, else ``~/.claude`` (as given, NFC)."""
    chosen = env.get("CLAUDE_CONFIG_DIR") or posixpath.join(home, ".claude")
    return unicodedata.normalize("NFC", chosen)


def memory_base(env: Mapping[str, str], home: str) -> str:
    """The folder whose ``projects/`` holds memory: ``CLAUDE_CODE_REMOTE_MEMORY_DIR``, else
    the config dir."""
    return env.get("CLAUDE_CODE_REMOTE_MEMORY_DIR") or config_dir(env, home)


def custom_memory_dir(value: str, home: str) -> str | None:
    """A settings ``autoMemoryDirectory`` as Claude accepts it, or None when it refuses it:
    ``~/`` expanded (not to the home folder itself or above it), normalised, trailing
    slashes dropped, absolute, three characters or more, no ``//`` start and no NUL."""
    path = value
    if path.startswith(("~/", "~\\")):
        rest = path[2:]
        inner = posixpath.normpath(rest or ".")
        if inner in (".", "..") or inner.startswith(("../", "..\\")):
            return None
        path = posixpath.join(home, rest)
    path = _node_normalize(path).rstrip("/\\")
    if not path.startswith("/") or len(path) < 3 or path.startswith(("//", "\\\\")):
        return None
    if "\x00" in path:
        return None
    return unicodedata.normalize("NFC", path)


def _node_normalize(path: str) -> str:
    """Node's ``path.posix.normalize`` for an absolute path (keeps a trailing slash)."""
    if not path:
        return "."
    trailing = path.endswith("/")
    norm = posixpath.normpath(path)
    if norm.startswith("//"):
        norm = "/" + norm.lstrip("/")
    return norm + "/" if trailing and norm != "/" else norm


def claude_memory_root(
    project_key_path: str, env: Mapping[str, str], home: str, custom: str | None = None
) -> str:
    """Claude's memory root for the project whose canonical root is ``project_key_path``
    (no trailing slash); ``custom`` is an accepted ``autoMemoryDirectory``."""
    if custom:
        return custom
    base = memory_base(env, home)
    root = posixpath.join(base, "projects", claude_key(project_key_path), "memory")
    return unicodedata.normalize("NFC", root)


def claude_layout(memory_root: str, project: str, home: str, cwd: str) -> Layout:
    """Claude's folder as a store: its repository beside it (``memory.git``), qmem-git's
    state files in a folder of their own beside it (``memory.qmem``), so nothing of
    qmem-git's lies among Claude's transcripts and files."""
    root = expand_dir(memory_root, home, cwd)
    return Layout(root, root + STATE_SUFFIX, CLAUDE_MODE, expand_dir(project, home, cwd))


def claude_memory_type(text: str) -> str | None:
    """The type of a Claude Code memory (``type:`` under ``metadata:``, else a top-level
    one); None when it names none of user, feedback, project, reference."""
    from qmem_git.core.frontmatter import parse_fields

    fields = parse_fields(text, nested_type=True)
    return fields[0] if fields else None
