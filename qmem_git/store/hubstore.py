"""What a store keeps about the hub, in its repository's config, and a project's ``origin``.

``[qmem "hub"] url, branch``: the hub URL and branch the store's hub tracking ref
(``refs/remotes/hub/main``) was last set from. When either changes (another hub, a project whose
``origin`` moved), the tracking ref is dropped before the sync, so the change never reads as
a rewound remote. ``[qmem "project"] root``: the project the store belongs to, recorded
whenever a command knows it, so ``sync --all`` can name its branch without guessing.
"""

from __future__ import annotations

import contextlib
import os
from typing import NamedTuple

from qmem_git.store.gitconfig import read_git_config

HUB_REMOTE = "hub"  # the name of the hub's tracking ref: refs/remotes/hub/main
_HUB = (b"qmem", b"hub")
_PROJECT = (b"qmem", b"project")


class HubRecord(NamedTuple):
    url: str | None
    branch: str | None
    project: str | None


def read_record(git_dir: str) -> HubRecord:
    """What the store's config says (None for each value it does not have)."""
    config = read_git_config(git_dir)

    def value(section: tuple[bytes, bytes], key: bytes) -> str | None:
        try:
            return config.get(section, key).decode("utf-8", "replace")
        except KeyError:
            return None

    return HubRecord(value(_HUB, b"url"), value(_HUB, b"branch"), value(_PROJECT, b"root"))


def track(git_dir: str, url: str, branch: str) -> bool:
    """Record ``url`` and ``branch``; drop the hub tracking ref when they differ from the
    record. True when it was dropped (or there was no record)."""
    from dulwich.refs import DiskRefsContainer, Ref

    from qmem_git.store.remotes import tracking_ref

    record = read_record(git_dir)
    if (record.url, record.branch) == (url, branch):
        return False
    refs = DiskRefsContainer(git_dir)
    with contextlib.suppress(KeyError):
        refs.remove_if_equals(Ref(tracking_ref(HUB_REMOTE)), None)
    _write(git_dir, {(_HUB, b"url"): url, (_HUB, b"branch"): branch})
    return True


def record_project(git_dir: str, project_root: str) -> None:
    """Remember which project the store belongs to (written only when it changed)."""
    if not project_root or not os.path.isdir(git_dir):
        return
    if read_record(git_dir).project == project_root:
        return
    _write(git_dir, {(_PROJECT, b"root"): project_root})


def _write(git_dir: str, values: dict[tuple[tuple[bytes, bytes], bytes], str]) -> None:
    config = read_git_config(git_dir)
    for (section, key), value in values.items():
        config.set(section, key, value.encode("utf-8"))
    config.write_to_path(os.path.join(git_dir, "config"))


# --- a project's origin -----------------------------------------------------------------------


def origin_url(project_root: str) -> str | None:
    """The URL of ``origin`` in the git repository holding ``project_root`` (a worktree's
    ``.git`` file is followed to its gitdir, and ``commondir`` to the shared config)."""
    config_dir = _project_git_dir(project_root)
    if config_dir is None:
        return None
    from dulwich.config import ConfigFile

    try:
        config = ConfigFile.from_path(os.path.join(config_dir, "config"))
        url = config.get((b"remote", b"origin"), b"url")
    except (OSError, ValueError, KeyError):
        return None
    return url.decode("utf-8", "replace").strip() or None


def _project_git_dir(project_root: str) -> str | None:
    from qmem_git.store.claudesettings import git_root

    root = git_root(os.path.abspath(project_root))
    if root is None:
        return None
    dot_git = os.path.join(root, ".git")
    if os.path.isdir(dot_git):
        return _common_dir(dot_git)
    target = _gitdir_of_file(dot_git)
    return _common_dir(target) if target else None


def _gitdir_of_file(dot_git: str) -> str | None:
    try:
        with open(dot_git, encoding="utf-8") as handle:
            line = handle.read(4096).strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not line.startswith("gitdir:"):
        return None
    target = line[len("gitdir:") :].strip()
    return os.path.normpath(os.path.join(os.path.dirname(dot_git), target))


def _common_dir(git_dir: str) -> str:
    try:
        with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as handle:
            common = handle.read(4096).strip()
    except (OSError, UnicodeDecodeError):
        return git_dir
    return os.path.normpath(os.path.join(git_dir, common)) if common else git_dir
