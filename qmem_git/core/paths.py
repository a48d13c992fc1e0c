"""Where a project's memory lives (spec §2). Pure: the caller passes env, home, cwd and a probe."""

from __future__ import annotations

import posixpath

from qmem_git.core.limits import INDEX_RECORD_NAME, WRITER_LOCK_NAME
from qmem_git.errors import QmemError, UsageError

# This module is on the per-prompt hook path: it avoids `re`, `dataclasses` and `typing`
# (together ~25 ms of start-up), so Layout is a small hand-written value class.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping


class Layout:
    """The memory root (git work tree) and the state dir that holds machine-local files."""

    __slots__ = ("memory_root", "mode", "project_root", "state_dir")

    def __init__(self, memory_root: str, state_dir: str, mode: str, project_root: str = "") -> None:
        self.memory_root = memory_root
        self.state_dir = state_dir
        self.mode = mode  # "global", "local", "explicit", or the tier: "user", "team"
        self.project_root = project_root

    @property
    def tier(self) -> str:
        """Qwen's memory tier this store is: ``project``, ``user`` or ``team``."""
        return self.mode if self.mode in ("user", "team") else "project"

    def _key(self) -> tuple[str, str, str, str]:
        return (self.memory_root, self.state_dir, self.mode, self.project_root)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Layout) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return "Layout(memory_root={!r}, state_dir={!r}, mode={!r}, project_root={!r})".format(
            *self._key()
        )

    def state_file(self, name: str) -> str:
        return posixpath.join(self.state_dir, name)

    @property
    def git_dir(self) -> str:
        """Where this store's repository lives (:func:`git_dir_of`); for the team tier the
        project's own (``<git root>/.git``), which qmem-git reads and never commits to."""
        if self.mode == "team":
            return posixpath.join(team_git_root(self.memory_root), ".git")
        return git_dir_of(self.memory_root)


def git_dir_of(memory_root: str) -> str:
    """The repository of ``memory_root``: ``<memory root>.git``, beside the folder, never in it.

    The agent may write anything under the memory root, a ``.git`` included; a repository
    there would let it plant hooks or config that qmem-git or a person's ``git`` then runs.
    ``~/.qwen/projects/<key>/memory`` -> ``~/.qwen/projects/<key>/memory.git``.
    """
    return (posixpath.normpath(memory_root).rstrip("/") or "/") + ".git"


def worktree_of(git_dir: str) -> str:
    """The memory root of a repository: ``memory`` for ``memory.git``, and for a legacy
    ``memory/.git`` its parent folder (:func:`git_dir_of` the other way round)."""
    git_dir = posixpath.normpath(git_dir)
    if posixpath.basename(git_dir) == ".git":
        return posixpath.dirname(git_dir)
    return git_dir[: -len(".git")] if git_dir.endswith(".git") else git_dir


def legacy_git_dir(memory_root: str) -> str:
    """Where earlier versions kept the repository: ``<memory root>/.git`` (moved on the
    next write, :mod:`qmem_git.store.relocate`)."""
    return posixpath.join(memory_root, ".git")


def is_legacy_repo(memory_root: str, exists: Callable[[str], bool]) -> bool:
    """True when ``<memory root>/.git`` holds the files qmem-git keeps in its repository."""
    git_dir = legacy_git_dir(memory_root)
    return any(exists(posixpath.join(git_dir, marker)) for marker in MEMORY_REPO_MARKERS)


def repository_of(memory_root: str, exists: Callable[[str], bool]) -> str:
    """The repository readers use: :func:`git_dir_of` when it exists (it wins over a legacy
    one), else a legacy ``.git`` qmem-git made, else :func:`git_dir_of` (not made yet)."""
    new = git_dir_of(memory_root)
    if not exists(new) and is_legacy_repo(memory_root, exists):
        return legacy_git_dir(memory_root)
    return new


def sanitize(path: str, windows: bool = False) -> str:
    """Every character outside ASCII letters and digits becomes ``-``, one for one.

    "Character" is a UTF-16 code unit, as in the host's JavaScript regex: a character outside
    the BMP (an emoji) becomes ``--``, so both tools name the same project folder.
    """
    text = path.lower() if windows else path
    return "".join(
        ch if ch.isascii() and ch.isalnum() else ("--" if ord(ch) > 0xFFFF else "-") for ch in text
    )


def _normalize(path: str) -> str:
    """``posixpath.normpath`` as Node's ``path.normalize`` does it (no POSIX ``//`` root)."""
    path = posixpath.normpath(path)
    return "/" + path.lstrip("/") if path.startswith("//") else path


def expand_dir(value: str, home: str, cwd: str) -> str:
    """Expand a leading ``~`` and resolve a relative value against ``cwd`` (Qwen's
    ``resolvePath`` for ``QWEN_CODE_MEMORY_BASE_DIR``: ``~``, ``~/…`` and ``~\\…``)."""
    if value == "~" or value.startswith("~/"):
        value = home + "/" + value[2:]
    elif value.startswith("~\\"):
        value = posixpath.join(home, *[part for part in _split_slashes(value[2:]) if part])
    return _normalize(posixpath.join(cwd, value))


def expand_storage_dir(value: str, home: str, cwd: str) -> str:
    """Qwen's ``Storage.resolvePath`` (``QWEN_HOME``, ``QWEN_RUNTIME_DIR``,
    ``advanced.runtimeOutputDir``): after ``~/`` or ``~\\`` every ``/`` and ``\\`` separates."""
    if value == "~" or value.startswith(("~/", "~\\")):
        value = posixpath.join(home, *[part for part in _split_slashes(value[2:]) if part])
    return _normalize(posixpath.join(cwd, value))


def _split_slashes(value: str) -> list[str]:
    return value.replace("\\", "/").split("/")


def global_qwen_dir(env: Mapping[str, str], home: str, cwd: str) -> str:
    """Qwen's global dir (``Storage.getGlobalQwenDir``): ``QWEN_HOME``, else ``~/.qwen``."""
    qwen_home = env.get("QWEN_HOME", "")
    if qwen_home:
        return expand_storage_dir(qwen_home, home, cwd)
    return posixpath.join(home, ".qwen")


def base_dir(
    env: Mapping[str, str], home: str, cwd: str, output_dir: str | None = None, project: str = ""
) -> str:
    """The memory base dir: QWEN_CODE_MEMORY_BASE_DIR, else the runtime base dir."""
    override = env.get("QWEN_CODE_MEMORY_BASE_DIR", "")
    if override:
        return expand_dir(override, home, cwd)
    return runtime_base_dir(env, home, cwd, output_dir, project)


def runtime_base_dir(
    env: Mapping[str, str], home: str, cwd: str, output_dir: str | None = None, project: str = ""
) -> str:
    """Qwen's runtime base dir (``Storage.getRuntimeBaseDir``): ``QWEN_RUNTIME_DIR``, else the
    settings' ``advanced.runtimeOutputDir`` (``output_dir``; a relative one is taken from the
    project folder, Qwen's working folder), else the global dir (``QWEN_HOME``, ``~/.qwen``)."""
    runtime = env.get("QWEN_RUNTIME_DIR", "")
    if runtime:
        return expand_storage_dir(runtime, home, cwd)
    if output_dir:
        return expand_storage_dir(output_dir, home, project or cwd)
    return global_qwen_dir(env, home, cwd)


def workspace_scope(env: Mapping[str, str]) -> bool:
    """``QWEN_CODE_MEMORY_PROJECT_SCOPE=workspace``: the project key is the folder itself."""
    return env.get("QWEN_CODE_MEMORY_PROJECT_SCOPE", "").strip().lower() == "workspace"


def user_memory_root(
    env: Mapping[str, str], home: str, cwd: str, output_dir: str | None = None, project: str = ""
) -> str:
    """Qwen's user tier (``getUserAutoMemoryRoot``): ``<base>/memories``."""
    return posixpath.join(base_dir(env, home, cwd, output_dir, project), USER_MEMORY_DIR_NAME)


def team_memory_root(project_root: str, home: str, cwd: str, exists: Callable[[str], bool]) -> str:
    """Qwen's team tier (``getTeamAutoMemoryRoot``): ``<git root>/.qwen/team-memory``."""
    git_root = find_git_root(expand_dir(project_root, home, cwd), exists)
    return posixpath.join(git_root, ".qwen", TEAM_MEMORY_DIR_NAME)


def is_team_root(root: str) -> bool:
    """``root`` has the shape of Qwen's team tier: ``<git root>/.qwen/team-memory``."""
    parent, name = posixpath.split(posixpath.normpath(root))
    return name == TEAM_MEMORY_DIR_NAME and posixpath.basename(parent) == ".qwen"


def team_git_root(team_root: str) -> str:
    """The project folder a team root ``<git root>/.qwen/team-memory`` belongs to."""
    return posixpath.dirname(posixpath.dirname(posixpath.normpath(team_root)))


def user_state_dir(user_root: str) -> str:
    """qmem-git's machine-local files of the user tier: ``<base>/memories.qmem``, beside the
    folder and its repository (``memories.git``), never among Qwen's own ``<base>/*.json``."""
    return posixpath.normpath(user_root).rstrip("/") + USER_STATE_SUFFIX


def tier_layout(
    tier: str,
    project: str | None,
    memory_dir: str | None,
    env: Mapping[str, str],
    home: str,
    cwd: str,
    exists: Callable[[str], bool],
    output_dir: str | None = None,
) -> Layout:
    """The store ``--tier`` names (Qwen Code 0.24's three tiers).

    ``project``: :func:`layout_for`. ``user``: ``<base>/memories`` (``getUserAutoMemoryRoot``),
    state in :func:`user_state_dir`. ``team``: ``<git root>/.qwen/team-memory``
    (``getTeamAutoMemoryRoot``), versioned by the project's repository; its state dir is the
    project tier's (telemetry only).
    """
    if tier == "project":
        return layout_for(project, memory_dir, env, home, cwd, exists, output_dir)
    if tier not in TIERS:
        raise UsageError(f"--tier {tier}: not a tier", hint="use project, user or team")
    if memory_dir:
        raise UsageError(
            f"--memory-dir names a folder of its own; --tier {tier} names Qwen's {tier} tier",
            hint="give --memory-dir or --tier, not both",
        )
    folder = expand_dir(project or cwd, home, cwd)
    if tier == "user":
        root = user_memory_root(env, home, cwd, output_dir, folder)
        return Layout(root, user_state_dir(root), "user", folder)
    root = team_memory_root(folder, home, cwd, exists)
    state = resolve_layout(folder, env, home, cwd, exists, output_dir).state_dir
    return Layout(root, state, "team", folder)


# what --tier team may run: the team folder is the project's, committed by the project's git
TEAM_READERS = frozenset(
    {"where", "validate", "index", "recall", "log", "show", "diff", "history", "review", "stats"}
)


def refuse_team_write(layout: Layout, command: str) -> None:
    """A writer on ``--tier team`` refuses (exit 1): the team folder lives in the project's own
    repository, where qmem-git never commits and never makes a nested repository."""
    if layout.tier != "team" or command in TEAM_READERS:
        return
    project = team_git_root(layout.memory_root)
    raise QmemError(
        f"{command} --tier team: the team memory {layout.memory_root} is versioned by the "
        f"project's own git repository ({project}), which qmem-git does not commit to",
        hint=f"commit it with git: git -C {project} add .qwen/team-memory && "
        f"git -C {project} commit; qmem-git validate, index, recall, log, diff and history "
        "work on --tier team",
    )


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
    output_dir: str | None = None,
) -> Layout:
    """Memory root and state dir for a project (spec §2.2, as Qwen's ``getAutoMemoryRoot``).

    ``output_dir``: the ``advanced.runtimeOutputDir`` of Qwen's settings, as written there.
    Standing inside a memory folder (one with a repository, marked by the files qmem-git keeps
    there) means that folder, as ``--memory-dir`` would: it is not a project.
    """
    project = expand_dir(project_root, home, cwd)
    memory_repo = _enclosing_memory_repo(project, exists)
    if memory_repo is not None:
        return explicit_layout(memory_repo, home, cwd)
    if env.get("QWEN_CODE_MEMORY_LOCAL") == "1":
        state = posixpath.join(project, ".qwen")
        return Layout(posixpath.join(state, MEMORY_DIR_NAME), state, "local", project)
    key = project if workspace_scope(env) else find_git_root(project, exists)
    base = base_dir(env, home, cwd, output_dir, project)
    state = posixpath.join(base, "projects", sanitize(key))
    return Layout(posixpath.join(state, MEMORY_DIR_NAME), state, "global", project)


MEMORY_DIR_NAME = "memory"  # spec §2.2: memory roots are <state dir>/memory
USER_MEMORY_DIR_NAME = "memories"
TEAM_MEMORY_DIR_NAME = "team-memory"
USER_STATE_SUFFIX = ".qmem"  # <base>/memories.qmem: the user tier's state folder
TIERS = ("project", "user", "team")
MEMORY_REPO_MARKERS = (INDEX_RECORD_NAME, WRITER_LOCK_NAME)  # in a memory repository


def _enclosing_memory_repo(directory: str, exists: Callable[[str], bool]) -> str | None:
    """The memory folder ``directory`` lies in: a ``.../memory`` ancestor (memory roots are
    ``<state dir>/memory``, spec §2.2) whose repository (``memory.git`` beside it, or a legacy
    ``memory/.git``) holds qmem-git's files. Paths without a ``memory`` part cost no probe."""
    parts = posixpath.normpath(directory).split("/")
    for end in range(len(parts), 0, -1):
        if parts[end - 1] != MEMORY_DIR_NAME:
            continue
        root = "/".join(parts[:end]) or "/"
        git_dir = git_dir_of(root)
        if any(exists(posixpath.join(git_dir, marker)) for marker in MEMORY_REPO_MARKERS):
            return root
        if is_legacy_repo(root, exists):
            return root
    return None


def explicit_layout(memory_dir: str, home: str, cwd: str) -> Layout:
    """``--memory-dir DIR``: that dir is the memory root, its parent the state dir."""
    root = expand_dir(memory_dir, home, cwd)
    if is_inside(root, posixpath.normpath(home)) or posixpath.dirname(root) == root:
        raise UsageError(
            f"--memory-dir {memory_dir} is not a memory folder: it is the root folder, your home "
            "folder or a folder above it",
            hint="give --memory-dir a folder of its own, such as ~/notes/memory",
        )
    return Layout(root, posixpath.dirname(root), "explicit", "")


def chats_dir(
    project_root: str,
    env: Mapping[str, str],
    home: str,
    cwd: str,
    output_dir: str | None = None,
) -> str:
    """The host's transcript folder for a project (spec §8.1: project root as given)."""
    project = expand_dir(project_root, home, cwd)
    base = runtime_base_dir(env, home, cwd, output_dir, project)
    return posixpath.join(base, "projects", sanitize(project), "chats")


def is_inside(root: str, target: str) -> bool:
    """True when ``target`` is ``root`` or below it (spec §2.3); both paths absolute.

    Pure string work on the normalised paths: no disk, and (unlike ``relpath``) no cwd.
    """
    root, target = posixpath.normpath(root), posixpath.normpath(target)
    return target == root or target.startswith(root.rstrip("/") + "/")


def layout_for(
    project: str | None,
    memory_dir: str | None,
    env: Mapping[str, str],
    home: str,
    cwd: str,
    exists: Callable[[str], bool],
    output_dir: str | None = None,
) -> Layout:
    """The layout the global flags ask for: ``--memory-dir`` wins over spec §2 resolution."""
    if memory_dir:
        layout = explicit_layout(memory_dir, home, cwd)
        if project:
            return Layout(layout.memory_root, layout.state_dir, layout.mode, project)
        return layout
    return resolve_layout(project or cwd, env, home, cwd, exists, output_dir)


def config_file(env: Mapping[str, str], home: str) -> str:
    """``$QMEM_CONFIG``, else ``$XDG_CONFIG_HOME/qmem-git/config.json``, else ``~/.config/…``."""
    explicit = env.get("QMEM_CONFIG")
    if explicit:
        return explicit
    base = env.get("XDG_CONFIG_HOME") or posixpath.join(home, ".config")
    return posixpath.join(base, "qmem-git", "config.json")


def model_may_be_configured(
    env: Mapping[str, str], home: str, exists: Callable[[str], bool]
) -> bool:
    """False only when no model can be configured: lets recall skip loading model settings."""
    return bool(
        env.get("QMEM_LLM_BASE_URL") or env.get("QMEM_LLM_MODEL") or exists(config_file(env, home))
    )
