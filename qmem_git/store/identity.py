"""``user.name`` / ``user.email`` from the user's git config, remembered per state of its files.

Reading the config takes dulwich's config module, whose own imports (logging, pathlib) cost
every write ~16 ms. So the two values are kept in the memory repo's ``.git/qmem-identity``
with the ``stat`` of each file git reads them from (git-config(1)): ``$GIT_CONFIG_GLOBAL``,
else ``~/.gitconfig`` and ``$XDG_CONFIG_HOME/git/config``; then ``$GIT_CONFIG_SYSTEM``, else
``/etc/gitconfig`` unless ``$GIT_CONFIG_NOSYSTEM`` is set. A file created, changed or removed
since means reading the config again. Nothing is kept for a config that includes other files
(they are not stamped), nor while a file is younger than two seconds (an edit in the same
clock tick would not change its stamp).
"""

from __future__ import annotations

import marshal
import os
import time

from qmem_git.core.limits import IDENTITY_RECORD_NAME
from qmem_git.store.cachefile import write_cache

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

_FORMAT = "qmem-identity/1"
_SETTLED_NS = 2_000_000_000  # younger files are not trusted to show an edit in their stamp

Key = tuple[tuple[str, "tuple[int, int, int, int] | None"], ...]


def config_identity(git_dir: str, env: Mapping[str, str], home: str) -> tuple[str, str]:
    """(name, email) as the git config sets them ("" where it does not)."""
    key = _key(config_files(env, home))
    kept = _read(git_dir)
    if kept is not None and kept[0] == key:
        return kept[1], kept[2]
    name, email = read_config_identity()
    if _keepable(key):
        _write(git_dir, key, name, email)
    return name, email


def config_files(env: Mapping[str, str], home: str) -> list[str]:
    """The files git reads ``user.*`` from, in git's order (as dulwich's StackedConfig)."""
    if "GIT_CONFIG_GLOBAL" in env:
        files = [env["GIT_CONFIG_GLOBAL"]]
    else:
        xdg = env.get("XDG_CONFIG_HOME", os.path.join(home, ".config"))
        files = [os.path.join(home, ".gitconfig"), os.path.join(xdg, "git", "config")]
    if "GIT_CONFIG_SYSTEM" in env:
        files.append(env["GIT_CONFIG_SYSTEM"])
    elif "GIT_CONFIG_NOSYSTEM" not in env:
        files.append("/etc/gitconfig")
    return files


def read_config_identity() -> tuple[str, str]:
    """(name, email) from the user's git config through dulwich ("" where unset)."""
    from dulwich.config import StackedConfig

    config = StackedConfig.default()
    return _config_value(config, b"name"), _config_value(config, b"email")


def _config_value(config: object, name: bytes) -> str:
    try:
        value = config.get((b"user",), name)  # type: ignore[attr-defined]
    except KeyError:
        return ""
    return value.decode("utf-8", "replace").strip() if isinstance(value, bytes) else ""


def _key(files: list[str]) -> Key:
    return tuple((path, _stamp(path)) for path in files)


def _stamp(path: str) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(path)  # a symlinked config: its target's stamp, a new target a new inode
    except (OSError, ValueError):
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns


def _keepable(key: Key) -> bool:
    """No file changed in the last two seconds, and none includes another."""
    settled = time.time_ns() - _SETTLED_NS
    for path, stamp in key:
        if stamp is None:
            continue
        if max(stamp[0], stamp[3]) >= settled or _includes(path):
            return False
    return True


def _includes(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return b"include" in handle.read().lower()
    except OSError:
        return True  # cannot tell: do not keep


def _read(git_dir: str) -> tuple[Key, str, str] | None:
    try:
        with open(os.path.join(git_dir, IDENTITY_RECORD_NAME), "rb") as handle:
            record = marshal.loads(handle.read())
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if not (isinstance(record, tuple) and len(record) == 4 and record[0] == _FORMAT):
        return None
    _, key, name, email = record
    if not (isinstance(name, str) and isinstance(email, str)):
        return None
    return key, name, email


def _write(git_dir: str, key: Key, name: str, email: str) -> None:
    """A record lost (in a crash, or not written) means reading the config once more."""
    try:  # noqa: SIM105 - contextlib is not imported on this path
        write_cache(
            os.path.join(git_dir, IDENTITY_RECORD_NAME), marshal.dumps((_FORMAT, key, name, email))
        )
    except OSError:
        pass
