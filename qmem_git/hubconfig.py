"""The hub setting: key ``"hub"`` (a URL) in the machine's qmem-git config file.

The file is :func:`qmem_git.core.paths.config_file` (``$QMEM_CONFIG``, else
``$XDG_CONFIG_HOME/qmem-git/config.json``, else ``~/.config/qmem-git/config.json``), shared with
the model settings (``modelconfig``). Reading never fails a command: a missing, unreadable or
broken file means "no hub". Writing keeps every other key and the file's mode, and replaces the
file atomically; a file that is not plain JSON (comments) is refused, never rewritten.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping

from qmem_git.core.paths import config_file
from qmem_git.errors import UsageError
from qmem_git.regularfile import open_regular

HUB_KEY = "hub"
MAX_CONFIG_BYTES = 1024 * 1024


def hub_url(env: Mapping[str, str], home: str) -> str | None:
    """The hub's URL, or None (no file, no key, or a file that cannot be read)."""
    try:
        data = _load(config_file(env, home))
    except (UsageError, OSError):
        return None
    value = data.get(HUB_KEY) if data is not None else None
    return value.strip() if isinstance(value, str) and value.strip() else None


def set_hub(env: Mapping[str, str], home: str, url: str) -> str:
    """Write ``"hub": url`` (already normalised and checked); the file's path."""
    path = config_file(env, home)
    data = _load(path) or {}
    data[HUB_KEY] = url
    _write(path, data)
    return path


def unset_hub(env: Mapping[str, str], home: str) -> bool:
    """Remove the key; False when there was none."""
    path = config_file(env, home)
    data = _load(path)
    if data is None or HUB_KEY not in data:
        return False
    del data[HUB_KEY]
    _write(path, data)
    return True


def _load(path: str) -> dict[str, object] | None:
    """The file's object; None when there is no file; UsageError when it is not plain JSON."""
    try:
        with open_regular(path) as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        return None
    if len(raw) > MAX_CONFIG_BYTES:
        raise _not_plain(path, f"larger than {MAX_CONFIG_BYTES} bytes")
    try:
        text = raw.decode("utf-8-sig")
        data = json.loads(text) if text.strip() else {}
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return _refuse_unparsed(path, exc)
    if not isinstance(data, dict):
        raise _not_plain(path, "its top level is not a JSON object")
    return data


def _refuse_unparsed(path: str, exc: BaseException) -> dict[str, object]:
    problem = "not plain JSON"
    if isinstance(exc, json.JSONDecodeError):
        problem += f" ({exc.msg} at line {exc.lineno}; comments are not rewritten)"
    raise _not_plain(path, problem)


def _not_plain(path: str, problem: str) -> UsageError:
    return UsageError(
        f"{path} is {problem}" if problem.startswith("not") else f"{path}: {problem}",
        'qmem-git does not rewrite it; add "hub": "URL" to it by hand',
    )


def _write(path: str, data: Mapping[str, object]) -> None:
    """Replace ``path`` atomically with ``data``, keeping the old file's mode (0600 if new)."""
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    try:
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o600
    temp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2, ensure_ascii=False)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
