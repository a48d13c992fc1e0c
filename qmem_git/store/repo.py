"""The memory git repository: init, and one ChangeSet -> exactly one crash-safe commit.

The commit path (ARCHITECTURE §2, §6) has dulwich do the git work: ``dulwich.objects`` builds
and serialises blobs, trees and commits, ``DiskObjectStore`` reads (loose or packed) and writes
the loose objects, ``DiskRefsContainer`` moves the branch with a compare-and-swap. Only the
changed blobs and the trees on their paths are written; only the changed git-index entries are
updated (``store.gitindex``). It never imports ``dulwich.porcelain`` and never runs hooks.
Order of effects, chosen so that a crash at any point is repaired by ``store.recovery``:
work-tree files -> MEMORY.md -> objects (fsynced) -> ref CAS -> index.
"""

from __future__ import annotations

import contextlib
import io
import os
import posixpath
import stat
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypeVar

from dulwich.file import FileLocked
from dulwich.objects import (
    DEFAULT_LOOSE_OBJECT_SIZE_LIMIT,
    Blob,
    Commit,
    ObjectID,
    ShaFile,
    Tree,
    valid_hexsha,
)
from dulwich.refs import HEADREF, DiskRefsContainer, Ref

from qmem_git.core.changes import ChangeSet, FileChange, render_commit_message
from qmem_git.core.index import IndexResult, build_index
from qmem_git.core.limits import CURSOR_NAME, META_NAME, SESSIONS_NAME, STATE_DIR_NAMES
from qmem_git.core.model import INDEX_NAME, MAX_FILE_BYTES
from qmem_git.core.names import check_segment, collision_message, fold_name, path_prefixes
from qmem_git.core.paths import Layout, is_legacy_repo
from qmem_git.core.text import clean_text, content_problem
from qmem_git.errors import InvalidMemoryFile, QmemError, RepoCorrupt, RepoLocked, UnsafePath
from qmem_git.store import gitindex, journal, loose
from qmem_git.store.gitindex import GitIndex
from qmem_git.store.identity import read_config_identity
from qmem_git.store.locks import STALE_LOCK_SECONDS
from qmem_git.store.relocate import HOOK_MARKER, repository
from qmem_git.store.survey import TEMP_MARKER
from qmem_git.store.workdir import (
    FILE_MODE_BITS,
    atomic_write,
    fsync_dir,
    render_index,
    scan_documents,
    without_exec_bits,
)

if TYPE_CHECKING:
    from dulwich.config import ConfigFile
    from dulwich.object_store import DiskObjectStore

BRANCH = b"refs/heads/main"
TREE_MODE = 0o40000
HOOK_TEMPLATE = "git-pre-commit.sh"
MEMORY_EXCLUDES = ("*" + TEMP_MARKER + "*", "*.lock")
# state files init keeps out of the project repo in local mode
# everything qmem-git keeps in the state dir (local mode hides them from the project's git)
STATE_FILES = (
    META_NAME,
    CURSOR_NAME,
    SESSIONS_NAME,
    "consolidation.lock",
    "telemetry.jsonl",
    "hook.log",
    "extract.lock",
    "extract-queue.json",
    "snapshot-meta.json",
    "dream-scan.json",
)
CAS_ATTEMPTS = 5
# dulwich's (git's) default is 96 MiB of resolved delta bases per pack: a walk over every
# commit of a long history filled it. Memory files are at most 256 KiB and trees small.
DELTA_BASE_CACHE_BYTES = 8 * 1024 * 1024
# C git >= 2.36 prints a deprecation warning on every command in a repo that sets
# core.fsyncObjectFiles; core.fsync=committed is its replacement (objects fsynced before a ref
# points at them). dulwich reads neither, so Repository opens its store with fsync on.
FSYNC_SETTING = ((b"core",), b"fsync", b"committed")
# The git index qmem-git reads and writes is a plain one: a split index (core.splitIndex, also
# set by a user's global config) or a sparse index would be rebuilt from HEAD on every write,
# losing the skip-worktree bits of a sparse checkout.
PLAIN_INDEX_SETTINGS = (((b"core",), b"splitIndex", b"false"), ((b"index",), b"sparse", b"false"))
REPO_SETTINGS = (((b"gc",), b"auto", b"0"), FSYNC_SETTING)
Setting = tuple[tuple[bytes], bytes, bytes]
DEPRECATED_SETTINGS = (((b"core",), b"fsyncObjectFiles"),)
_Obj = TypeVar("_Obj", bound=ShaFile)
_CORRUPT_HINT = (
    "run `qmem-git git fsck --full`; restore it from a clone or a backup "
    "(qmem-git overwrote nothing)"
)


# The result types are NamedTuples, not frozen dataclasses: same constructor, fields and
# immutability, but ~0.2 ms to define instead of ~1.2 ms (dataclass exec()s six methods), paid
# at start-up by every command.


class Identity(NamedTuple):
    """Author and committer of memory commits."""

    name: str
    email: str

    def ident(self) -> str:
        """``Name <email>`` with characters git forbids removed."""
        name = _clean_ident(self.name) or "qmem-git"
        return f"{name} <{_clean_ident(self.email)}>"

    def signature(self, timestamp: int, offset: str) -> str:
        """``Name <email> 1700000000 +0000`` (the author/committer line of a commit)."""
        return f"{self.ident()} {timestamp} {offset}"


class InitResult(NamedTuple):
    """What ``init_repo`` did; every field is empty/False when it was already set up."""

    memory_root: str
    created: bool
    hook: str  # "installed", "updated", "chained" (foreign hook kept) or "unchanged"
    excludes_added: tuple[str, ...] = ()
    project_excludes_added: tuple[str, ...] = ()
    config_changed: bool = False


class ApplyResult(NamedTuple):
    """The commit made (None when nothing differed from HEAD), its A/M/D list and message."""

    commit: str | None
    changes: list[FileChange]
    message: str
    index_updated: bool = True
    index_dropped: tuple[str, ...] = ()  # paths MEMORY.md's size limits left out (spec §6)


class WorkState:
    """A writer's view of the work tree, shared by recovery and apply to avoid a second scan.

    ``files``: memory file -> (mtime_ns, size, ...), the input MEMORY.md is rendered from;
    ``cuts``: their scan-order cuts the survey found (``store.workdir.shared_scan``);
    ``changed``: the paths whose stat differed from the git index (a snapshot reads those);
    ``since_ns``: when the writer began reading files (default: now); a file modified since
    then may hold other bytes than the ones committed, so its git-index entry is not settled.
    """

    def __init__(
        self,
        files: dict[str, tuple[int, ...]] | None = None,
        index: GitIndex | None = None,
        cuts: dict[int, int] | None = None,
        changed: set[str] | None = None,
        since_ns: int | None = None,
    ) -> None:
        self.files = files
        self.index = index
        self.cuts = cuts or {}
        self.changed = changed
        self.since_ns = time.time_ns() if since_ns is None else since_ns


# --- identity -------------------------------------------------------------------------------


def identity_from_git_config(host: str, config: tuple[str, str] | None = None) -> Identity:
    """user.name / user.email from the user's git config, else ``qmem-git <qmem-git@HOST>``.

    ``config``: (name, email) as the config sets them, when the caller has them already
    (``store.identity.config_identity``); read here otherwise.
    """
    name, email = read_config_identity() if config is None else config
    return Identity(name or "qmem-git", email or f"qmem-git@{host or 'localhost'}")


def _clean_ident(text: str) -> str:
    return " ".join(clean_text(text).replace("<", "").replace(">", "").split())


# --- init -----------------------------------------------------------------------------------


def init_repo(layout: Layout, hook_command: str, lock_timeout: float = 30.0) -> InitResult:
    """Make the memory root's repository (``layout.git_dir``, beside the memory root) on
    ``main`` (idempotent); one an earlier version made inside the memory root is moved there.

    Sets ``gc.auto=0`` (dulwich would otherwise pack in the foreground),
    ``core.fsync=committed`` (dropping the deprecated ``core.fsyncObjectFiles``) and
    ``core.worktree`` (C git run on the repository finds the memory root), excludes our
    temp/lock files, installs the marked pre-commit hook (a foreign hook is kept as
    ``pre-commit.local*`` and run first) and, in local mode, excludes the memory folder, its
    repository and the state files in the project's own repo. No commit is made here, not even
    an initial one: ``apply_changeset`` commits parent-less on an empty repo, so every commit in
    history is one memory operation; files already in the work tree are committed by the caller
    (or by the first writer's recovery). No identity is stored in the repo config either.
    """
    root = layout.memory_root
    git_dir = layout.git_dir
    if not os.path.isdir(git_dir) and is_legacy_repo(root, os.path.exists):
        from qmem_git.store.locks import writer_lock

        with writer_lock(layout, lock_timeout):  # moves it out (store.relocate)
            pass
    created = not os.path.isdir(git_dir)
    if created:
        _create_repo(root, git_dir)
    config_changed = _configure(git_dir, root)
    excludes = _add_lines(os.path.join(git_dir, "info", "exclude"), MEMORY_EXCLUDES)
    hook = install_hook(git_dir, hook_command)
    project = _exclude_in_project(layout) if layout.mode == "local" else ()
    return InitResult(root, created, hook, excludes, project, config_changed)


def _create_repo(root: str, git_dir: str) -> None:
    from dulwich.repo import Repo

    os.makedirs(root, exist_ok=True)
    Repo.init_bare(git_dir, mkdir=True, default_branch=b"main").close()


def worktree_settings(git_dir: str, root: str) -> tuple[Setting, ...]:
    """``core.bare=false`` and ``core.worktree`` naming the memory root relative to the
    repository (``../memory``), so the pair keeps working when their parent folder moves."""
    worktree = os.path.relpath(root, git_dir).replace(os.sep, "/")
    return (((b"core",), b"bare", b"false"), ((b"core",), b"worktree", worktree.encode()))


def _configure(git_dir: str, root: str) -> bool:
    """Set the settings we rely on; rewrite the config only when something changes."""
    from qmem_git.store.gitconfig import read_git_config

    path = os.path.join(git_dir, "config")
    config = read_git_config(git_dir)
    changed = False
    for section, name in DEPRECATED_SETTINGS:
        with contextlib.suppress(KeyError):  # KeyError: not set
            config.remove(section, name)
            changed = True
    for section, name, value in (*REPO_SETTINGS, *worktree_settings(git_dir, root)):
        try:
            current = config.get(section, name)
        except KeyError:
            current = None
        if current != value:
            config.set(section, name, value)
            changed = True
    if changed:
        config.write_to_path(path)
    return _add_plain_index_settings(git_dir) or changed


def update_config(git_dir: str, root: str) -> bool:
    """Bring a repo made by an earlier version up to date: core.fsyncObjectFiles becomes
    core.fsync, ``core.worktree`` is set (a repository just moved out of the memory root,
    ``store.relocate``), and the plain-index settings are added.

    Cheap enough for every writer (one small read; the config is parsed only when the text
    may need a change).
    """
    try:
        with open(os.path.join(git_dir, "config"), "rb") as handle:
            text = handle.read().lower()
    except OSError:
        return False
    if any(name.lower() in text for _, name in DEPRECATED_SETTINGS) or b"worktree" not in text:
        return _configure(git_dir, root)
    if all(name.lower() in text for _, name, _ in PLAIN_INDEX_SETTINGS):
        return False
    return _add_plain_index_settings(git_dir)


def _add_plain_index_settings(git_dir: str) -> bool:
    """Append the plain-index settings the config lacks, leaving every line there as it is
    (comments, quoting; a value the user set, ``true`` included, is theirs). The file is
    replaced whole through a temp file, at the place a symlinked config points to. A config
    that cannot be read or written is left alone; one that cannot be parsed is RepoCorrupt
    (exit 6), as it is for every reader: no writer commits into a repository git refuses."""
    from dulwich.config import ConfigFile

    from qmem_git.store.gitconfig import config_damaged

    path = os.path.realpath(os.path.join(git_dir, "config"))
    try:
        with open(path, "rb") as handle:
            text = handle.read()
        config = ConfigFile.from_file(io.BytesIO(text))
    except OSError:
        return False
    except ValueError as exc:
        raise config_damaged(git_dir, exc) from exc
    missing = [(s, n, v) for s, n, v in PLAIN_INDEX_SETTINGS if not _has_setting(config, s, n)]
    if not missing:
        return False
    lines = [b"" if text.endswith(b"\n") or not text else b"\n"]
    for (section,), name, value in missing:
        lines.append(b"[%s]\n\t%s = %s\n" % (section, name, value))
    with contextlib.suppress(OSError):
        atomic_write(path, text + b"".join(lines))
        return True
    return False


def _has_setting(config: ConfigFile, section: tuple[bytes, ...], name: bytes) -> bool:
    try:
        config.get(section, name)
    except KeyError:
        return False
    return True


def _add_lines(path: str, lines: Iterable[str]) -> tuple[str, ...]:
    """Append the missing ``lines`` to an ignore-style file; never duplicates, keeps the rest."""
    try:
        with open(path, encoding="utf-8") as handle:
            current = handle.read()
    except FileNotFoundError:
        current = ""
    present = {line.strip() for line in current.splitlines()}
    missing = tuple(line for line in lines if line not in present)
    if missing:
        prefix = current if not current or current.endswith("\n") else current + "\n"
        text = prefix + "# qmem-git\n" * (not current.count("# qmem-git")) + "\n".join(missing)
        atomic_write(path, (text + "\n").encode("utf-8"))
    return missing


def _exclude_in_project(layout: Layout) -> tuple[str, ...]:
    """Local mode: hide the memory folder, its repository and the state files from the
    project's own git repo."""
    project_git = os.path.join(layout.project_root, ".git")
    if not layout.project_root or not os.path.isdir(project_git):
        return ()
    state = os.path.relpath(layout.state_dir, layout.project_root).replace(os.sep, "/")
    memory = os.path.relpath(layout.memory_root, layout.project_root).replace(os.sep, "/")
    if state.startswith("..") or memory.startswith(".."):
        return ()
    names = [memory + "/", memory + ".git/", *(f"{state}/{name}" for name in STATE_FILES)]
    names += [f"{state}/{name}/" for name in STATE_DIR_NAMES]
    return _add_lines(os.path.join(project_git, "info", "exclude"), names)


def hook_script(hook_command: str) -> str:
    """The pre-commit hook text for ``hook_command`` (from the packaged template)."""
    from importlib import resources

    template = resources.files("qmem_git.integrations") / "templates" / HOOK_TEMPLATE
    return template.read_text(encoding="utf-8").replace("@HOOK_COMMAND@", hook_command)


def default_hook_command() -> str:
    """What the memory repo's git pre-commit hook runs: the template's lookup (``qmem-git`` on
    PATH first, as a shell finds it), with this interpreter as the fallback it names."""
    import shlex
    import sys

    return f"qmem_git_validate {shlex.quote(sys.executable)}"


def install_hook(git_dir: str, hook_command: str) -> str:
    """Write our hook; a foreign one moves to the first free ``pre-commit.local*`` name."""
    hooks = os.path.join(git_dir, "hooks")
    os.makedirs(hooks, exist_ok=True)
    path = os.path.join(hooks, "pre-commit")
    script = hook_script(hook_command)
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            existing: str | None = handle.read()
    except FileNotFoundError:
        existing = None
    if existing == script:
        if not os.access(path, os.X_OK):  # made non-executable when the repository moved
            os.chmod(path, 0o755)
        return "unchanged"
    status = "installed" if existing is None else "updated"
    if existing is not None and HOOK_MARKER not in existing:
        os.replace(path, free_name(os.path.join(hooks, "pre-commit.local")))
        status = "chained"
    atomic_write(path, script.encode("utf-8"))
    os.chmod(path, 0o755)
    return status


def free_name(base: str) -> str:
    """``base``, or the first of ``base.1``, ``base.2``, ... that does not exist yet."""
    candidate, number = base, 0
    while os.path.lexists(candidate):
        number += 1
        candidate = f"{base}.{number}"
    return candidate


# --- objects and refs -----------------------------------------------------------------------


def blob_id(data: bytes) -> str:
    """git's object id for file content."""
    return Blob.from_string(data).id.decode("ascii")


def _corrupt(message: str) -> RepoCorrupt:
    return RepoCorrupt(f"memory repository is corrupt: {message}", hint=_CORRUPT_HINT)


def _object_id(sha: str) -> ObjectID:
    return ObjectID(sha.encode("ascii"))


class Repository:
    """The pieces of one memory repo a writer needs: paths, dulwich's object store, the branch.

    Loose objects are read and written through ``store.loose`` (dulwich's object model, none
    of the pack machinery); everything else, and any loose object that cannot be read there,
    goes to ``dulwich.object_store.DiskObjectStore`` (loose and packed; reads verify the
    content against the id), opened on first use. It is opened with ``fsync_object_files=True``
    whatever the config says (dulwich only reads the deprecated ``core.fsyncObjectFiles``), and
    the fan-out folders that got new objects are fsynced before the branch moves, so a commit
    never points at an object a power cut can lose.
    """

    def __init__(self, root: str, loose_limit: int | None = None) -> None:
        """``loose_limit``: the largest loose object (header included) read in full; a bigger
        one reads as damaged (dulwich's own default is 512 MiB)."""
        self.root = root
        self.git_dir = repository(root)
        if not os.path.isdir(self.git_dir):
            raise QmemError(
                f"{root} is not a qmem-git memory repository", hint="run `qmem-git init` first"
            )
        self.objects_dir = os.path.join(self.git_dir, "objects")
        self.refs = DiskRefsContainer(self.git_dir)
        self.loose_limit = loose_limit or DEFAULT_LOOSE_OBJECT_SIZE_LIMIT
        self._store: DiskObjectStore | None = None
        self._trees: dict[str, Tree] = {}
        self._dirty_dirs: set[str] = set()

    @property
    def objects(self) -> DiskObjectStore:
        """dulwich's whole object store (packs, alternates), opened on first use."""
        if self._store is None:
            from dulwich.object_store import DiskObjectStore

            self._store = DiskObjectStore(
                self.objects_dir,
                fsync_object_files=True,
                loose_object_size_limit=self.loose_limit,
                delta_base_cache_limit=DELTA_BASE_CACHE_BYTES,
            )
        return self._store

    def close(self) -> None:
        """Release the pack files dulwich opened (mmaps, file handles)."""
        if self._store is not None:
            close_store(self._store)

    def __enter__(self) -> Repository:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # reading

    def read_object(self, sha: str, kind: type[_Obj]) -> _Obj:
        """Object ``sha`` as a ``kind``; RepoCorrupt when it is missing, damaged or another type.

        dulwich raises KeyError for a missing object and, for a damaged one, zlib.error,
        ChecksumMismatch, ObjectFormatException, ValueError, ... (it varies by damage and by
        loose/packed), so everything but KeyError is reported as damage.
        """
        obj = loose.read_loose(self.objects_dir, sha, self.loose_limit)
        try:
            if obj is None:
                obj = self.objects[_object_id(sha)]
        except KeyError as exc:
            raise _corrupt(f"object {sha} is missing") from exc
        except Exception as exc:
            raise _corrupt(f"object {sha} is damaged ({type(exc).__name__}: {exc})") from exc
        if not isinstance(obj, kind):
            name = obj.type_name.decode("ascii", "replace")
            raise _corrupt(f"object {sha} is a {name}, not a {kind.type_name.decode('ascii')}")
        return obj

    def has_blob(self, text: str) -> bool:
        """True when the object store already holds ``text`` as a blob."""
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # half a character: never in history
            return False
        sha = blob_id(data)
        return loose.read_loose(self.objects_dir, sha, self.loose_limit) is not None or (
            _object_id(sha) in self.objects  # packed; or damaged, which dulwich reports
        )

    def read_blob(self, sha: str) -> bytes:
        return self.read_object(sha, Blob).as_raw_string()

    def head(self, *, unborn_ok: bool = False) -> tuple[Ref, str | None]:
        """(branch HEAD points at, its commit or None on an unborn branch); checks the value.

        A ``main`` that is missing or empty in a repository with history is lost, not unborn
        (``store.branchref``): BranchLost, exit 6. ``unborn_ok`` skips that check, for a clone
        whose fetched commits no ref names yet (as does HEAD on another branch: an orphan).
        """
        try:
            names, value = self.refs.follow(HEADREF)
        except Exception as exc:  # dulwich: SymrefLoop, OSError, ...
            raise _corrupt(f"HEAD cannot be read ({exc})") from exc
        branch = names[-1] if names else Ref(BRANCH)
        if branch == HEADREF:
            branch = Ref(BRANCH)  # detached HEAD: keep committing on main
            loose = self.refs.read_loose_ref(branch)
            value = ObjectID(loose) if loose else self.refs.get_packed_refs().get(branch)
        if value is None:
            if not unborn_ok and branch == BRANCH:  # another branch (an orphan) may be new
                from qmem_git.store.branchref import check_unborn

                check_unborn(self.git_dir, self.refs, lambda: self.objects, branch)
            return branch, None
        if not valid_hexsha(value):
            from qmem_git.store.branchref import lost_branch

            text = value.decode("ascii", "replace")
            problem = f"holds {text[:40]!r}, not a commit id"
            raise lost_branch(self.git_dir, self.refs, lambda: self.objects, branch, problem)
        return branch, value.decode("ascii")

    def remote_tips(self) -> dict[str, str]:
        """``{"origin/main": sha}`` for each remote-tracking ref whose commit is here (a
        dangling one, left by a killed fetch, is skipped)."""
        tips = {}
        for name in self.refs.keys(base=Ref(b"refs/remotes/")):
            value = self.refs[Ref(b"refs/remotes/" + name)]
            if ObjectID(value) in self.objects:
                tips[name.decode("utf-8", "replace")] = value.decode("ascii")
        return tips

    def tree_of(self, commit: str | None) -> str | None:
        if commit is None:
            return None
        tree: bytes = self.read_object(commit, Commit).tree
        return tree.decode("ascii")

    def load_tree(self, sha: str) -> Tree:
        """A parsed tree (cached: trees are immutable; never mutate the result)."""
        cached = self._trees.get(sha)
        if cached is None:
            cached = self._trees[sha] = self.read_object(sha, Tree)
        return cached

    def lookup(self, tree: str | None, path: str) -> str | None:
        """Blob id of ``path`` in ``tree``, None when absent."""
        found = self.lookup_entry(tree, path)
        return found[1] if found is not None else None

    def lookup_entry(self, tree: str | None, path: str) -> tuple[int, str] | None:
        """(mode, id) of the non-folder ``path`` in ``tree``, None when absent."""
        sha, mode = tree, 0
        parts = path.encode("utf-8", "surrogateescape").split(b"/")
        for depth, part in enumerate(parts):
            if sha is None:
                return None
            entry = _entry(self.load_tree(sha), part)
            if entry is None or stat.S_ISDIR(entry[0]) == (depth == len(parts) - 1):
                return None
            mode, sha = entry[0], entry[1].decode("ascii")
        return None if sha is None else (mode, sha)

    def flatten_entries(self, tree: str | None, prefix: bytes = b"") -> dict[str, tuple[int, str]]:
        """Every non-tree path in ``tree`` -> (mode, object id) (slow path: reads all trees)."""
        out: dict[str, tuple[int, str]] = {}
        stack = [(tree, prefix)] if tree is not None else []
        while stack:  # not recursion: a hand-made tree may be nested thousands of levels deep
            current, base = stack.pop()
            for name, mode, sha in self.load_tree(current).iteritems():
                if stat.S_ISDIR(mode):
                    stack.append((sha.decode("ascii"), base + name + b"/"))
                else:
                    path = (base + name).decode("utf-8", "surrogateescape")
                    out[path] = (mode, sha.decode("ascii"))
        return out

    def flatten(self, tree: str | None) -> dict[str, str]:
        """Every blob path in ``tree`` -> blob id (slow path only: reads all trees)."""
        return {path: sha for path, (_, sha) in self.flatten_entries(tree).items()}

    # writing

    def add(self, obj: ShaFile) -> str:
        """Store ``obj`` as a loose object (dulwich: lock file, fsync, rename); returns its id."""
        sha = obj.id.decode("ascii")
        directory = os.path.join(self.objects_dir, sha[:2])
        if not os.path.isdir(directory):
            self._dirty_dirs.add(self.objects_dir)  # the new fan-out folder's own entry
        try:
            loose.write_loose(self.objects_dir, obj)
        except FileLocked as exc:
            self._retry_locked(obj, sha, exc)
        except (NotADirectoryError, IsADirectoryError) as exc:  # objects/ab is a file, ...
            raise _corrupt(f"object {sha} cannot be stored ({exc})") from exc
        self._dirty_dirs.add(directory)
        return sha

    def _retry_locked(self, obj: ShaFile, sha: str, exc: FileLocked) -> None:
        """An object's ``.lock`` (left by a killed dulwich writer): remove it once it is stale."""
        lock = os.path.join(self.objects_dir, sha[:2], sha[2:] + ".lock")
        try:
            age = time.time() - os.lstat(lock).st_mtime
        except FileNotFoundError:
            age = float("inf")  # released meanwhile
        if age < STALE_LOCK_SECONDS:
            raise RepoLocked(
                f"object {sha} is being written by another git process ({exc})",
                hint="retry; a stale .lock file is removed by the next qmem-git writer",
            ) from exc
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)
        loose.write_loose(self.objects_dir, obj)

    def sync(self) -> None:
        """fsync the object folders that got new entries (renames survive a power cut)."""
        for directory in sorted(self._dirty_dirs, key=len, reverse=True):
            fsync_dir(directory)
        self._dirty_dirs.clear()

    def build_tree(self, base: str | None, changes: dict[str, str | None]) -> str:
        """Write the trees on the changed paths only; ``changes`` maps path -> blob id or None.

        No changes is ``base`` itself (never the empty tree a caller would commit by mistake).
        """
        if not changes and base is not None:
            return base
        dirs: dict[bytes, Tree] = {}
        for path, sha in changes.items():
            parent, _, name = path.encode("utf-8", "surrogateescape").rpartition(b"/")
            tree = self._dir_tree(dirs, base, parent)
            if sha is None:
                if name in tree:
                    del tree[name]
            else:
                tree[name] = (gitindex.FILE_MODE, _object_id(sha))
        for directory in sorted(dirs, key=lambda d: -d.count(b"/") if d else 1):
            if not directory:
                continue
            parent, _, name = directory.rpartition(b"/")
            if len(dirs[directory]):
                dirs[parent][name] = (TREE_MODE, _object_id(self.add(dirs[directory])))
            elif (entry := _entry(dirs[parent], name)) is not None and stat.S_ISDIR(entry[0]):
                del dirs[parent][name]  # emptied; a file that took the folder's name stays
        return self.add(dirs.get(b"") or Tree())

    def _dir_tree(self, dirs: dict[bytes, Tree], base: str | None, path: bytes) -> Tree:
        """Mutable copy of the tree at ``path`` (and its ancestors) in ``base``."""
        if path in dirs:
            return dirs[path]
        sha: str | None = base
        if path:
            parent, _, name = path.rpartition(b"/")
            above = self._dir_tree(dirs, base, parent)
            entry = _entry(above, name)
            sha = entry[1].decode("ascii") if entry and stat.S_ISDIR(entry[0]) else None
        tree = self.load_tree(sha).copy() if sha else Tree()
        assert isinstance(tree, Tree)
        dirs[path] = tree
        return tree

    def write_commit(
        self,
        tree: str,
        parents: Sequence[str],
        identity: Identity,
        now: datetime,
        message: str,
    ) -> str:
        """Store a commit of ``tree`` (no parent: root commit; two: a merge); returns its id."""
        commit = Commit()
        commit.tree = _object_id(tree)
        commit.parents = [_object_id(parent) for parent in parents]
        commit.author = commit.committer = identity.ident().encode("utf-8")
        commit.author_time = commit.commit_time = int(now.timestamp())
        commit.author_timezone = commit.commit_timezone = _tz_seconds(now)
        commit.message = message.encode("utf-8")
        return self.add(commit)

    def move_branch(self, branch: Ref, old: str | None, new: str, message: str) -> bool:
        """Compare-and-swap the branch: False when another writer moved it first."""
        self.sync()
        new_id = _object_id(new)
        try:
            if old is None:
                return self.refs.add_if_new(branch, new_id, message=message.encode())
            old_id = _object_id(old)
            return self.refs.set_if_equals(branch, old_id, new_id, message=message.encode())
        except (FileLocked, FileExistsError) as exc:  # refs/heads/main.lock exists
            # (other OSErrors, a full disk or a permission, are what they are: exit 4)
            raise RepoLocked(
                f"{branch.decode()} is locked by another git process ({exc})",
                hint="retry; a stale .lock file is removed by the next qmem-git writer",
            ) from exc


class _Closable(Protocol):
    def close(self) -> None: ...


def close_store(store: _Closable) -> None:
    """Close a dulwich object store (or repo). A damaged pack whose read failed may refuse
    (BufferError: the traceback being raised still holds a view of its mmap); the OS unmaps it
    at exit, and the error that matters is the one being raised, not this one."""
    with contextlib.suppress(BufferError):
        store.close()


def _entry(tree: Tree, name: bytes) -> tuple[int, ObjectID] | None:
    """(mode, id) of ``name`` in ``tree``, None when absent."""
    try:
        return tree[name]
    except KeyError:
        return None


def _tz_seconds(now: datetime) -> int:
    offset = now.utcoffset() if now.tzinfo else now.astimezone().utcoffset()
    return int(offset.total_seconds()) if offset else 0


# --- apply ----------------------------------------------------------------------------------


def check_memory_path(rel: str, *, writing: bool = True) -> str:
    """A ChangeSet path must be a relative path inside the memory root, never in a ``.git``;
    one to write must also be a ``*.md`` name free of control characters. One to delete may be
    any name C git committed there (a link where memories go, which recovery removes)."""
    parts = rel.split("/")
    if (
        (writing and not rel.endswith(".md"))
        or rel.startswith("/")
        or "\\" in rel
        or any(p in ("", ".", "..") for p in parts)
        or any(check_segment(p) for p in parts[:-1] if p.startswith("."))  # .git, not .notes
        or rel == INDEX_NAME
        or posixpath.normpath(rel) != rel
        or (writing and any(ord(char) < 0x20 or ord(char) == 0x7F for char in rel))
    ):
        raise UnsafePath(
            f"refusing to write {rel!r}: not a memory file path",
            hint="memory files are relative *.md paths inside the memory folder",
        )
    return rel


def check_content(repo: Repository, rel: str, text: str) -> None:
    """Refuse (before anything is written) new content ``validate`` would reject: committed,
    every other machine's sync would refuse it. Content history already holds (``undo`` of a
    file someone committed by hand) is restored as it was."""
    problem = content_problem(text)
    if problem is not None and not repo.has_blob(text):
        raise InvalidMemoryFile(
            f"refusing to write {rel}: {problem}",
            hint="nothing was written; remove that text from what is saved",
        )


def check_writable(root: str, writes: Collection[str], deletes: Collection[str]) -> None:
    """Refuse, before anything changes, writes the work tree blocks with something that
    ``deletes`` (done first) does not remove: see :func:`check_unblocked`."""
    gone = set(deletes)
    for path in writes:
        blocker = blocked_by(root, path)
        if blocker is None or blocker in gone:
            continue
        if blocker == path and _holds_only(root, path, gone):
            continue  # a folder of tracked files, all deleted (and pruned) first
        check_unblocked(root, path)


def _holds_only(root: str, folder: str, paths: set[str]) -> bool:
    """True when every entry under ``folder`` is a file listed in ``paths`` (an empty or
    linked folder in it would survive the deletes and keep blocking)."""
    for directory, subdirs, files in os.walk(os.path.join(root, folder)):
        rel = os.path.relpath(directory, root).replace(os.sep, "/")
        if not files and not subdirs:
            return False
        if any(os.path.islink(os.path.join(directory, d)) for d in subdirs):
            return False
        if any(f"{rel}/{name}" not in paths for name in files):
            return False
    return True


def check_unblocked(root: str, rel: str) -> None:
    """Refuse (before anything is written) a path the work tree blocks: a file or link where
    one of its folders should be, or a folder where the file goes. Never removed for the
    caller: it is the user's, and may hold work."""
    blocker = blocked_by(root, rel)
    if blocker is not None:
        what = "a folder" if blocker == rel else "not a folder"
        raise UnsafePath(
            f"cannot write {rel}: {blocker} in the memory folder is {what}",
            hint=f"move {blocker} out of the memory folder, then retry",
        )


def blocked_by(root: str, rel: str) -> str | None:
    """The part of ``rel`` that stands in the way of writing a file there, or None."""
    parts = rel.split("/")
    for depth in range(1, len(parts) + 1):
        prefix = "/".join(parts[:depth])
        try:
            st = os.lstat(os.path.join(root, prefix))
        except FileNotFoundError:
            return None  # this folder and the rest are created by the write
        is_dir = stat.S_ISDIR(st.st_mode)
        if depth < len(parts) and not is_dir:
            return prefix
        if depth == len(parts) and is_dir:
            return prefix
    return None


def apply_changeset(
    layout: Layout,
    cs: ChangeSet,
    *,
    identity: Identity,
    host: str,
    now: datetime,
    state: WorkState | None = None,
) -> ApplyResult:
    """Write ``cs`` and MEMORY.md, then make one commit of exactly those paths (lock held).

    Files get mtime = commit time (whole seconds, as git records it; ``cs.mtimes`` names older
    times to keep, recorded as ``Qmem-Mtime`` trailers for other machines) before MEMORY.md is
    rendered, so the index order equals what any clone of this commit renders. No commit is
    made when nothing differs from HEAD. ``state`` is the writer's earlier scan (run_writer).
    """
    for rel in cs.writes:
        check_memory_path(rel)
    for rel in cs.deletes:  # a name C git committed may be deleted even if we would not write it
        check_memory_path(rel, writing=False)
    check_writable(layout.memory_root, [*cs.writes, INDEX_NAME], cs.deletes)
    with Repository(layout.memory_root) as repo:
        for rel, text in cs.writes.items():
            check_content(repo, rel, text)
        return _apply(repo, cs, identity, host, now, state or WorkState())


def check_new_names(repo: Repository, base: str | None, cs: ChangeSet) -> None:
    """Refuse a new path that a case-insensitive disk would take for another path of the
    commit (``user/Notes.md`` beside ``user/notes.md``): every other machine's sync, and the
    pre-commit hook, refuse such a history. Reads only the folders along the new paths."""
    new = sorted(rel for rel in cs.writes if repo.lookup(base, rel) is None)
    spellings: dict[str, str] = {}
    for rel in new:
        for prefix in path_prefixes(rel):
            other = spellings.setdefault(fold_name(prefix), prefix)
            if other != prefix:
                raise UnsafePath(collision_message(prefix, other), _COLLISION_HINT)
        clash = _existing_spelling(repo, base, rel, set(cs.deletes))
        if clash is not None:
            raise UnsafePath(collision_message(rel, clash), _COLLISION_HINT)


_COLLISION_HINT = "nothing was written; rename or forget the memory that is there first"


def _existing_spelling(
    repo: Repository, base: str | None, rel: str, deleted: set[str]
) -> str | None:
    """A path of ``base``, still there once ``deleted`` are gone, that differs from a prefix
    of ``rel`` only by case (or normalisation)."""
    tree, prefix = base, ""
    for name in rel.split("/"):
        if tree is None:
            return None
        key, step = fold_name(name), None
        for entry, mode, sha in repo.load_tree(tree).iteritems():
            spelled = entry.decode("utf-8", "surrogateescape")
            if spelled == name:
                step = sha.decode("ascii") if stat.S_ISDIR(mode) else None
            elif fold_name(spelled) == key and _survives(
                repo, prefix + spelled, mode, sha, deleted
            ):
                return prefix + spelled
        tree, prefix = step, prefix + name + "/"
    return None


def _survives(repo: Repository, rel: str, mode: int, sha: bytes, deleted: set[str]) -> bool:
    """Whether the file or folder ``rel`` is still there once ``deleted`` are gone."""
    if not stat.S_ISDIR(mode):
        return rel not in deleted
    under = (rel + "/").encode("utf-8", "surrogateescape")
    return any(path not in deleted for path in repo.flatten_entries(sha.decode("ascii"), under))


def rebuild_only(cs: ChangeSet) -> ChangeSet:
    """What an empty ChangeSet commits when MEMORY.md alone differs from HEAD (edited or
    committed by hand): an ``index`` commit that says so, not "<op>: nothing to change".
    ``index`` and ``recover`` ChangeSets are planned as such a rebuild and keep their words."""
    if not cs.is_empty or cs.op in ("index", "recover"):
        return cs
    return ChangeSet("index", "rebuild MEMORY.md", session=cs.session, held=cs.held)


def _apply(
    repo: Repository,
    cs: ChangeSet,
    identity: Identity,
    host: str,
    now: datetime,
    state: WorkState,
) -> ApplyResult:
    cs = rebuild_only(cs)
    branch, parent = repo.head()
    base = repo.tree_of(parent)
    check_new_names(repo, base, cs)
    seconds = int(now.timestamp())
    mtime_ns = seconds * 1_000_000_000
    if cs.mtimes:  # only older times are kept: a file dated after the commit gets the commit's
        older = {rel: own for rel, own in cs.mtimes.items() if own < seconds and rel in cs.writes}
        cs = cs._replace(mtimes=older)
    record = _journal_record(repo, cs, parent, base)
    with journaled(repo, record):  # from here a crash is undone, not committed in part
        touched = _write_files(repo, cs, base, mtime_ns, state)
        written, dropped, why = _write_memory_index(repo.root, mtime_ns, state)
        index_blob: str | None = written
        if why is not None:  # listed from a held-back file: HEAD's index is kept in history
            index_blob = repo.lookup(base, INDEX_NAME)
            cs = cs._replace(held={**cs.held, INDEX_NAME: why})
        touched[INDEX_NAME] = index_blob
        for _ in range(CAS_ATTEMPTS):
            changes = _diff(repo, base, touched)
            message = render_commit_message(cs, host, changes)
            if not changes:
                updated = update_index(repo, touched, parent, state)
                return ApplyResult(None, [], message, updated, dropped)
            tree = repo.build_tree(base, {c.path: touched[c.path] for c in changes})
            parents = [parent] if parent else []
            commit = repo.write_commit(tree, parents, identity, now, message)
            if repo.move_branch(branch, parent, commit, f"{cs.op}: {cs.subject}"):
                updated = update_index(repo, touched, commit, state)
                return ApplyResult(commit, changes, message, updated, dropped)
            branch, parent = repo.head()
            base = repo.tree_of(parent)
            record.parent = parent
            journal.begin(repo.git_dir, record)
        raise RepoLocked(
            f"{branch.decode()} kept moving while qmem-git tried to commit",
            hint="another program is committing in the memory folder; retry when it is done",
        )


@contextlib.contextmanager
def journaled(repo: Repository, record: journal.Journal) -> Iterator[None]:
    """Hold ``record`` in the journal for the block (store.journal): removed when the block
    returns; when it raises before the branch moved, its files are put back at once (else
    the next writer's recovery does it)."""
    journal.begin(repo.git_dir, record)
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            if record.parent == repo.head()[1]:
                undo_interrupted(repo, record)
                journal.end(repo.git_dir)
        raise
    journal.end(repo.git_dir)


def _journal_record(
    repo: Repository, cs: ChangeSet, parent: str | None, base: str | None
) -> journal.Journal:
    """The paths ``cs`` will change on disk from what ``parent`` (tree ``base``) has, the only
    ones an undo may put back. A write the work tree already holds or a delete of a file
    already gone (a snapshot or recover commit of what someone did) changes nothing on disk,
    and a file that differs from ``parent`` is someone's uncommitted work: an undo must not
    touch either."""
    writes = {}
    for rel, text in cs.writes.items():
        sha = blob_id(text.encode("utf-8"))
        before = _blob_on_disk(os.path.join(repo.root, rel))
        if before != sha and before == repo.lookup(base, rel):
            writes[rel] = sha
    deletes = [
        rel
        for rel in cs.deletes
        if (before := _blob_on_disk(os.path.join(repo.root, rel))) is not None
        and before == repo.lookup(base, rel)
    ]
    return journal.Journal(cs.op, parent, writes, deletes)


def _write_files(
    repo: Repository, cs: ChangeSet, base: str | None, mtime_ns: int, state: WorkState
) -> dict[str, str | None]:
    """Apply writes/deletes to the work tree; returns path -> new blob id (None = deleted)."""
    touched: dict[str, str | None] = {}
    for rel in cs.deletes:  # first: a file may make way for a folder of the same name
        touched[rel] = None
        remove_file(repo.root, rel)
        if state.files is not None:
            state.files.pop(rel, None)
    for rel, text in sorted(cs.writes.items()):
        data = text.encode("utf-8")
        sha = touched[rel] = blob_id(data)
        path = os.path.join(repo.root, rel)
        if repo.lookup(base, rel) == sha and same_content(path, data):
            continue  # unchanged: keep the mtime that history gave it
        own = cs.mtimes.get(rel)
        file_ns = mtime_ns if own is None else own * 1_000_000_000
        atomic_write(path, data, file_ns, mode=FILE_MODE_BITS)
        _note_file(state, rel, file_ns, len(data))
    return touched


def same_content(path: str, data: bytes) -> bool:
    """True when the file at ``path`` holds exactly ``data`` (False when it cannot be read)."""
    try:
        with open(path, "rb") as handle:
            return handle.read() == data
    except OSError:
        return False


def _note_file(state: WorkState, rel: str, mtime_ns: int, size: int) -> None:
    """Keep the writer's scan current so MEMORY.md is rendered without a second scan."""
    if state.files is None:
        return
    if size <= MAX_FILE_BYTES:
        state.files[rel] = (mtime_ns, size)
    else:
        state.files.pop(rel, None)


def undo_interrupted(repo: Repository, record: journal.Journal) -> list[str]:
    """Put back, as ``record.parent`` has them, the files an interrupted ChangeSet changed, and
    MEMORY.md; a file someone changed since (neither what the ChangeSet wrote nor gone) is left
    alone. Returns the paths put back. The caller checked that the branch is still there."""
    base = repo.tree_of(record.parent)
    ours: dict[str, str | None] = dict(record.writes)
    ours.update({rel: None for rel in record.deletes if rel not in ours})
    times = _index_times(repo.git_dir)
    fallback = repo.read_object(record.parent, Commit).commit_time if record.parent else 0
    removed: list[str] = []
    restored: list[str] = []
    for rel in sorted({*ours, INDEX_NAME}):
        now_there = _blob_on_disk(os.path.join(repo.root, rel))
        if rel != INDEX_NAME and now_there is not None and now_there != ours.get(rel):
            continue  # not what the ChangeSet left: someone else's, or never touched
        head_sha = repo.lookup(base, rel)
        if head_sha is None and now_there is not None:
            remove_file(repo.root, rel)
            removed.append(rel)
        elif head_sha is not None and now_there != head_sha:
            restored.append(rel)
    for rel in restored:  # after the removals: a file may take back an emptied folder's name
        data = repo.read_blob(repo.lookup(base, rel) or "")
        mtime_ns = times.get(rel) or fallback * 1_000_000_000
        atomic_write(os.path.join(repo.root, rel), data, mtime_ns, mode=FILE_MODE_BITS)
    return sorted(removed + restored)


def _blob_on_disk(path: str) -> str | None:
    """The blob id of the regular file at ``path``; None when there is none."""
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            return None
        with open(path, "rb") as handle:
            return blob_id(handle.read())
    except OSError:
        return None


def _index_times(git_dir: str) -> dict[str, int]:
    """mtime_ns the git index knows per path (the apply never got to update it)."""
    try:
        index = gitindex.read_index(git_dir)
    except gitindex.IndexUnreadable:
        return {}
    return {rel: entry.mtime_ns for rel in index.entries if (entry := index.get(rel))}


def remove_file(root: str, rel: str) -> None:
    """Delete ``rel`` from the work tree (gone already, or a folder now in its place, is fine)
    and the folders that leaves empty."""
    if blocked_by(root, rel) is None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(root, rel))
    prune_dirs(root, rel)


def prune_dirs(root: str, rel: str) -> None:
    """Remove folders a delete left empty (git does not track empty folders)."""
    parent = posixpath.dirname(rel)
    while parent:
        try:
            os.rmdir(os.path.join(root, parent))
        except OSError:
            return
        parent = posixpath.dirname(parent)


def _write_memory_index(
    root: str, mtime_ns: int, state: WorkState
) -> tuple[str, tuple[str, ...], str | None]:
    """Regenerate MEMORY.md (spec §6), rewritten only when its text changes; (blob, dropped,
    why it must not be committed). It is built as the agent builds it, so it lists files held
    back too; a credential in one's title or description keeps the new index out of history."""
    from qmem_git.core.secrets import scan_for_secrets

    result = _render_memory_index(root, state.files)
    data = result.text.encode("utf-8")
    path = os.path.join(root, INDEX_NAME)
    if not same_content(path, data):
        atomic_write(path, data, mtime_ns, mode=FILE_MODE_BITS)
    secrets = scan_for_secrets(result.text)
    why = f"secret: possible secret: {secrets[0].label} ({secrets[0].rule_id})" if secrets else None
    return blob_id(data), result.dropped, why


def _render_memory_index(root: str, files: dict[str, tuple[int, ...]] | None) -> IndexResult:
    """MEMORY.md text, from a writer's scan when there is one (no second ``lstat`` pass)."""
    if files is None:
        return render_index(root)
    return build_index(scan_documents(root, stats=files))


def _diff(repo: Repository, base: str | None, touched: dict[str, str | None]) -> list[FileChange]:
    """A/M/D of the touched paths against ``base``, sorted by path; new blobs are stored."""
    changes: list[FileChange] = []
    for rel in sorted(touched):
        old, new = repo.lookup(base, rel), touched[rel]
        if old == new:
            continue
        if new is not None:
            _store_blob(repo, rel, new)
        changes.append(FileChange("A" if old is None else "D" if new is None else "M", rel))
    return changes


def _store_blob(repo: Repository, rel: str, sha: str) -> None:
    with open(os.path.join(repo.root, rel), "rb") as handle:
        blob = Blob.from_string(handle.read())
    if blob.id.decode("ascii") != sha:
        raise QmemError(
            f"{rel} changed while qmem-git was committing it",
            hint="another program is writing in the memory folder; run the command again",
        )
    repo.add(blob)


def update_index(
    repo: Repository,
    touched: Mapping[str, str | None],
    head: str | None,
    state: WorkState | None = None,
) -> bool:
    """Refresh the git-index entries of the touched paths (None = deleted) and record ``head``.

    Returns False when the index is unusable; that, or a failure writing it, is repaired by the
    next writer's recovery (the commit is already made). ``state``: the writer's view, whose
    parsed index is reused and kept current.
    """
    state = WorkState() if state is None else state
    index = state.index
    try:
        if index is None:
            index = gitindex.read_index(repo.git_dir)
        for rel, sha in touched.items():
            if sha is None:
                index.remove(rel)
            else:
                path = os.path.join(repo.root, rel)
                st = without_exec_bits(path, os.lstat(path))
                settled = st.st_mtime_ns < state.since_ns  # else the agent wrote it meanwhile
                index.set(rel, st, sha, gitindex.FILE_MODE, settled=settled)
        if index.changed or index.head != head:
            index.head = head
            gitindex.write_index(repo.git_dir, index)
        state.index = index
        return True
    except (gitindex.IndexUnreadable, OSError):
        state.index = None
        return False


def head_commit(root: str) -> str | None:
    """The commit ``main`` points at, or None before the first commit."""
    with Repository(root) as repo:
        return repo.head()[1]


__all__ = [
    "ApplyResult",
    "Identity",
    "InitResult",
    "Repository",
    "WorkState",
    "apply_changeset",
    "blob_id",
    "blocked_by",
    "check_unblocked",
    "check_writable",
    "close_store",
    "default_hook_command",
    "free_name",
    "head_commit",
    "identity_from_git_config",
    "init_repo",
    "install_hook",
    "prune_dirs",
    "remove_file",
    "same_content",
    "update_index",
]
