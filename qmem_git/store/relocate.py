"""Moving a store's repository out of the memory folder: ``memory/.git`` -> ``memory.git``.

Earlier versions kept the repository inside the memory folder, where the agent's own tools may
write anything: an agent overwrote ``hooks/pre-commit`` and a person's later ``git commit`` ran
it. The first writer of this version moves it (``store.locks.writer_lock``), holding the writer
lock of the old place: an flock stays on its file across a rename, so a writer that waited
there holds the lock of the new place when it gets it. The move is one ``rename`` of the whole
folder, so a crash leaves the store either where it was or moved whole; what follows it
(``core.worktree``) is repaired by the next writer (``store.repo.update_config``). Before the
rename every hook is made non-executable and qmem-git's own pre-commit hook is written afresh:
the old ones came from a folder the agent could write (an agent's hook may even carry our
marker), so they wait for a person to review them (``qmem-git doctor`` lists them). The config
came from there too, and git runs commands it names (``core.fsmonitor``, ``credential.helper``,
``include.path``, filters, aliases…): only the settings a memory repository needs are kept, and
the old file stays beside it as ``config.before-move`` for a person to review.
"""

from __future__ import annotations

import os

from qmem_git.core.paths import git_dir_of, legacy_git_dir, repository_of

HOOK_MARKER = "qmem-git-managed-hook"  # in the pre-commit hook qmem-git installs


def repository(memory_root: str) -> str:
    """The repository readers use (``core.paths.repository_of``): the new place, else a
    legacy ``.git`` qmem-git made, else the new place (not made yet)."""
    return repository_of(memory_root, os.path.exists)


def move_repository(memory_root: str) -> bool:
    """Move a legacy repository to :func:`git_dir_of`; the caller holds its writer lock.

    Nothing happens when the new place exists already (it wins; the legacy one is left for
    ``doctor`` to report) or there is no legacy repository. True when it moved.
    """
    legacy, new = legacy_git_dir(memory_root), git_dir_of(memory_root)
    if os.path.lexists(new) or not os.path.isdir(legacy) or os.path.islink(legacy):
        return False
    from qmem_git.store.repo import default_hook_command, install_hook, update_config
    from qmem_git.store.workdir import fsync_dir

    disable_hooks(legacy)
    confine_config(legacy)
    install_hook(legacy, default_hook_command())
    os.rename(legacy, new)
    for folder in (os.path.dirname(new), memory_root):
        fsync_dir(folder)
    update_config(new, memory_root)
    return True


# (section, subsection allowed?) -> names kept; every other setting may make git run a command
# or send data elsewhere, so it is dropped
_KEPT_SETTINGS: dict[bytes, frozenset[bytes]] = {
    b"core": frozenset(
        b"repositoryformatversion filemode bare worktree logallrefupdates ignorecase "
        b"precomposeunicode symlinks fsync fsyncmethod splitindex checkstat".split()
    ),
    b"extensions": frozenset([b"objectformat"]),
    b"index": frozenset([b"sparse"]),
    b"gc": frozenset([b"auto"]),
    b"user": frozenset([b"name", b"email"]),
    b"remote": frozenset([b"url", b"pushurl", b"fetch"]),
    b"branch": frozenset([b"remote", b"merge"]),
}
CONFIG_BEFORE_MOVE = "config.before-move"


def confine_config(git_dir: str) -> list[str]:
    """Keep only :data:`_KEPT_SETTINGS` in ``git_dir/config``; the whole old file is saved as
    :data:`CONFIG_BEFORE_MOVE` (git never reads it). Returns the dropped settings, as
    ``section.name``; nothing is written when nothing is dropped."""
    from dulwich.config import ConfigFile

    from qmem_git.store.gitconfig import read_git_config

    path = os.path.join(git_dir, "config")
    if not os.path.isfile(path) or os.path.islink(path):
        return []
    old = read_git_config(git_dir)
    kept, dropped = ConfigFile(), []
    for section in old.sections():
        names = _KEPT_SETTINGS.get(section[0].lower(), frozenset())
        for name, value in old.items(section):
            if name.lower() in names:
                kept.add(section, name, value)
            else:
                dropped.append(b".".join((*section, name)).decode("utf-8", "replace"))
    if dropped:
        os.replace(path, os.path.join(git_dir, CONFIG_BEFORE_MOVE))
        kept.write_to_path(path)
    return dropped


def foreign_hooks(git_dir: str) -> list[str]:
    """Names of the hooks in ``git_dir/hooks`` that are not qmem-git's own pre-commit hook
    (``*.sample`` files aside), executable or not."""
    hooks = os.path.join(git_dir, "hooks")
    try:
        names = sorted(os.listdir(hooks))
    except OSError:
        return []
    return [
        name
        for name in names
        if not name.endswith(".sample")
        and os.path.lexists(os.path.join(hooks, name))
        and not (name == "pre-commit" and _is_ours(os.path.join(hooks, name)))
    ]


def disabled_hooks(git_dir: str) -> list[str]:
    """The :func:`foreign_hooks` git does not run: not executable, or renamed by the move."""
    hooks = os.path.join(git_dir, "hooks")
    return [
        name
        for name in foreign_hooks(git_dir)
        if name.startswith(DISABLED_PREFIX) or not os.access(os.path.join(hooks, name), os.X_OK)
    ]


DISABLED_PREFIX = "disabled."  # a hook that is a symlink is renamed, as its target is not ours


def disable_hooks(git_dir: str) -> list[str]:
    """Clear the executable bits of every hook in ``git_dir/hooks`` but ``*.sample`` (git
    skips such a hook), and rename a symlinked one ``disabled.<name>``; returns the ones it
    changed. The files stay: a person may review them and ``chmod +x`` them."""
    hooks = os.path.join(git_dir, "hooks")
    try:
        names = sorted(os.listdir(hooks))
    except OSError:
        return []
    disabled = []
    for name in names:
        path = os.path.join(hooks, name)
        if name.endswith(".sample") or name.startswith(DISABLED_PREFIX):
            continue
        if os.path.islink(path):
            os.rename(path, os.path.join(hooks, DISABLED_PREFIX + name))
            disabled.append(name)
            continue
        if not os.path.isfile(path):
            continue
        mode = os.stat(path).st_mode
        if mode & 0o111:
            os.chmod(path, mode & ~0o111)
            disabled.append(name)
    return disabled


def _is_ours(path: str) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return HOOK_MARKER in handle.read(4096)
    except OSError:
        return False
