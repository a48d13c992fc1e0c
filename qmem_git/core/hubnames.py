"""Branch names on the hub: one branch per store, named from what the store belongs to. Pure.

The user tier is ``user``; a project's Qwen tier is ``projects/<identity>`` and Claude Code's
folder for it ``claude/<identity>``, where the identity is the project's ``origin`` URL
normalised (:func:`project_identity`: ``git@github.com:Alice/shop.git`` and
``https://github.com/Alice/shop`` are both ``github.com/alice/shop``). A project without
``origin`` is named by its path key (the store's folder name) under ``projects/path/<key>``.
Every name is a valid ref name (``git check-ref-format``): unsafe characters become ``-`` and
a name changed that way, or cut to :data:`MAX_BRANCH_CHARS`, ends in a short hash of what it
was made from, so two different inputs do not meet on one name.
"""

from __future__ import annotations

import hashlib

USER_BRANCH = "user"
PROJECT_PREFIX = "projects"
CLAUDE_PREFIX = "claude"
PATH_PART = "path"  # projects/path/<key>: a project without origin
MAX_BRANCH_CHARS = 160
HASH_CHARS = 10
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-=,%")


def project_identity(url: str) -> str:
    """``origin``'s URL without scheme, credentials, port, ``.git`` suffix and trailing ``/``;
    scp-like ``host:path`` as ``host/path``; all lower-case. Empty when nothing is left."""
    text = url.strip()
    scheme, sep, rest = text.partition("://")
    if sep and scheme and "/" not in scheme:
        host, slash, path = rest.partition("/")
        host = host.rpartition("@")[2]  # credentials
        host = _drop_port(host)
        text = host + slash + path
    else:
        text = _scp_like(text)
    text = text.split("?", 1)[0].split("#", 1)[0]
    parts = [part for part in text.replace("\\", "/").split("/") if part not in ("", ".")]
    while parts and parts[-1].lower().endswith(".git"):
        parts[-1] = parts[-1][: -len(".git")]
        if not parts[-1]:
            parts.pop()
    return "/".join(parts).lower()


def _drop_port(host: str) -> str:
    if host.startswith("["):  # [::1]:22
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rpartition(":")[0] if ":" in host else host


def _scp_like(text: str) -> str:
    """``user@host:path`` -> ``host/path`` (a colon before any slash, as git reads it)."""
    colon = text.find(":")
    slash = text.find("/")
    if colon <= 0 or (0 <= slash < colon) or (colon == 1 and text[0].isalpha()):
        return text  # a path (C:\\ on Windows is a path too)
    host = text[:colon].rpartition("@")[2]
    return host + "/" + text[colon + 1 :]


def store_branch(store: str, identity: str | None, path_key: str) -> str:
    """The hub branch of ``store`` (``user``, ``project`` or ``claude``): the user tier's is
    ``user``; the others are named by ``identity`` (:func:`project_identity`) or, when the
    project has no origin, by ``path_key``."""
    if store == "user":
        return USER_BRANCH
    prefix = CLAUDE_PREFIX if store == "claude" else PROJECT_PREFIX
    if identity:
        name = safe_name(identity)
        if name.split("/", 1)[0] == PATH_PART:  # a host called "path": never a path key's place
            name = f"_{name}-{_digest(identity)}"
        return _capped(f"{prefix}/{name}", f"{prefix}/{identity}")
    return _capped(f"{prefix}/{PATH_PART}/{safe_name(path_key)}", f"{prefix}//{path_key}")


def store_of_branch(branch: str) -> str | None:
    """Which kind of store a hub branch belongs to (``user``, ``project``, ``claude``)."""
    if branch == USER_BRANCH:
        return "user"
    head = branch.split("/", 1)[0]
    return {PROJECT_PREFIX: "project", CLAUDE_PREFIX: "claude"}.get(head)


def safe_name(text: str) -> str:
    """``text`` as ``/``-separated components git accepts in a ref name; a hash of ``text``
    is added when anything had to change, so different inputs stay different."""
    parts = [_safe_part(part) for part in text.split("/")]
    name = "/".join(part for part in parts if part) or "-"
    if name != text:
        name = f"{name}-{_digest(text)}"
    return name


def _safe_part(part: str) -> str:
    chars = "".join(ch if ch in _SAFE else "-" for ch in part)
    while ".." in chars:
        chars = chars.replace("..", ".-")
    chars = chars.lstrip(".")
    while chars.endswith((".lock", ".")):
        chars = chars[: -len(".lock")] + "-lock" if chars.endswith(".lock") else chars[:-1] + "-"
    return chars


def _capped(name: str, source: str) -> str:
    if len(name) <= MAX_BRANCH_CHARS:
        return name
    cut = name[: MAX_BRANCH_CHARS - HASH_CHARS - 1].rstrip("/.")
    while cut.endswith(".lock"):
        cut = cut[: -len(".lock")]
    return f"{cut}-{_digest(source)}"


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_CHARS]
