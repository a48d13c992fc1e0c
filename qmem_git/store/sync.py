"""Sync the memory branch with a remote: fetch, check, fast-forward or merge, push.

A sync holds the writer lock only while it writes: it fetches and checks without it, takes
it (with recovery first, so the work tree equals HEAD) to decide from the current HEAD and
apply, and lets it go before it pushes; the tracking ref and packing get one more short
tenure. ``QMEM_GIT_TIMEOUT`` bounds each whole exchange with a network remote. It only ever
moves ``main`` forward: up to date -> push if ahead; remote ahead -> fast-forward (plus one
``index`` commit, pushed, when the remote's MEMORY.md is stale); diverged -> the entry-aware
merge of :mod:`qmem_git.core.merge` committed with two parents, then push. A push the remote
rejects because it moved meanwhile starts over (bounded). A remote with branches but no
``main`` is refused: its history would be ignored.

Fetched objects land in a quarantine object store (``.git/qmem-incoming-*``, alternates to the
real one) and are checked there like ``git fsck`` would, plus the memory layout rules: only
regular files (100644) with safe names, in any folder (Qwen Code 0.24 reads them all), no
symlinks, submodules, ``.git``-like names, device names, no case-folding collisions in the tip, no
blob over 256 KiB, no credential in any new blob of any new commit (history keeps what a later
commit removes, so a push never sends a secret that ``forget`` took out of the tip), and the
files the sync would write must pass every error rule of ``qmem-git validate`` (MEMORY.md and
legacy topic files: readable, without conflict markers). Only then is the pack
moved into the repository; a refusal leaves nothing behind.

Time comes from history (ARCHITECTURE §3): every memory file a sync writes gets the committer
time of the commit that last changed it (git's history simplification: follow the first parent
with the same blob), so MEMORY.md and recall ages agree on every machine. Only the files the
new commits touched are timed (tree diffs); the others already carry their time. The work-tree
update is journaled (``store.journal``): killed before ``main`` moves, the next writer puts the
old files back.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import stat
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from datetime import datetime
from operator import itemgetter
from typing import TYPE_CHECKING, Any, BinaryIO, NamedTuple, Protocol, TypeVar

from dulwich.objects import (
    S_ISGITLINK,
    Blob,
    Commit,
    ObjectID,
    RawObjectID,
    ShaFile,
    Tag,
    Tree,
)
from dulwich.refs import Ref

from qmem_git.core.changes import (
    ChangeSet,
    FileChange,
    parse_commit_message,
    render_commit_message,
)
from qmem_git.core.model import INDEX_NAME, MAX_FILE_BYTES, MEMORY_TYPES
from qmem_git.core.names import (
    LEGACY_TOPIC_FILES,
    check_path_safety,
    fold_name,
)
from qmem_git.core.paths import Layout
from qmem_git.core.validate import check_conflict_markers, check_secrets, decode_memory_bytes
from qmem_git.errors import InvalidMemoryFile, QmemError, RemoteError, RepoLocked, UnsafePath
from qmem_git.store import gitindex, loose
from qmem_git.store.journal import Journal
from qmem_git.store.packscan import check_pack_file
from qmem_git.store.remotes import (
    Transport,
    redact_all,
    remote_error,
    socket_timeout,
    tracking_ref,
    url_kind,
)
from qmem_git.store.repo import (
    BRANCH,
    DELTA_BASE_CACHE_BYTES,
    TREE_MODE,
    Identity,
    Repository,
    blob_id,
    check_writable,
    close_store,
    journaled,
    remove_file,
    same_content,
    update_index,
)
from qmem_git.store.revwalk import CommitInfo, only_in
from qmem_git.store.workdir import FILE_MODE_BITS, atomic_write, fsync_dir, render_index

if TYPE_CHECKING:
    from dulwich.client import SendPackResult
    from dulwich.object_store import BaseObjectStore, DiskObjectStore, PackBasedObjectStore
    from dulwich.pack import Pack, UnpackedObject

    from qmem_git.core.merge import MergeResult, Reconciled
    from qmem_git.store.locks import TryLock
    from qmem_git.store.packscan import SizeChecks
    from qmem_git.store.receive import SendResult
    from qmem_git.store.recovery import RecoveryReport

QUARANTINE_PREFIX = "qmem-incoming-"
OWNER_LOCK = "owner.lock"
MAX_PUSH_ATTEMPTS = 4
LOCKED_PUSH_ATTEMPTS = 5  # ~2.5 s for a concurrent push to let go of the remote's main
MAX_INCOMING_PACK_BYTES = 256 * 1024 * 1024
REPACK_THRESHOLD = 16
# loose objects a sync leaves loose (C git's gc.auto waits for 6,700): a commit makes ~5, and
# packing them at every sync cost three disk flushes (pack, index, folder) per push
LOOSE_OBJECTS_TO_PACK = 128
NEAR_COMMITS = 64  # how far a sync looks for one side's tip in the other's history first
MAX_TREE_ENTRIES = 20_000  # files in one folder of a memory store: far more than an agent reads
Progress = Callable[[str], None]


# --- results ----------------------------------------------------------------------------------


# The result and option types are NamedTuples or plain classes, not dataclasses: a dataclass
# costs ~0.5 ms to define (it exec()s its methods), paid at start-up by every sync and push.


class SyncOptions(NamedTuple):
    """What the caller asked for; ``timeout`` bounds every network wait (seconds).

    ``index_as_is``: MEMORY.md is the agent's own (Claude Code's), not generated: a merge
    merges it by lines, and it is never rebuilt after a fast-forward or clone."""

    dry_run: bool = False
    push: bool = True
    force: bool = False
    timeout: float = 20.0
    index_as_is: bool = False


class SyncResult:
    """What one sync did (``action``: up-to-date, pushed, fast-forward, merged, empty)."""

    __slots__ = (
        "action",
        "attempts",
        "before",
        "changed_paths",
        "dry_run",
        "fetched",
        "head",
        "index_commit",
        "merge_commit",
        "packed",
        "pushed",
        "reconciled",
        "remote",
        "remote_head",
        "url",
    )

    def __init__(self, remote: str, url: str, *, attempts: int = 0, dry_run: bool = False) -> None:
        self.remote = remote
        self.url = url
        self.action = "up-to-date"
        self.before: str | None = None
        self.head: str | None = None
        self.remote_head: str | None = None
        self.fetched = 0
        self.merge_commit: str | None = None
        self.index_commit: str | None = None  # MEMORY.md rebuilt after a fast-forward
        self.pushed = False
        self.reconciled: list[Reconciled] = []
        self.attempts = attempts
        self.dry_run = dry_run
        self.packed = 0
        self.changed_paths: list[str] = []

    def __repr__(self) -> str:
        return f"SyncResult({self.as_dict()!r})"

    @property
    def merged(self) -> bool:
        return self.merge_commit is not None or (self.dry_run and self.action == "merged")

    def as_dict(self) -> dict[str, Any]:
        return {
            "remote": self.remote,
            "url": self.url,
            "action": self.action,
            "dry_run": self.dry_run,
            "before": self.before,
            "head": self.head,
            "remote_head": self.remote_head,
            "fetched": self.fetched,
            "merged": self.merged,
            "merge_commit": self.merge_commit,
            "index_commit": self.index_commit,
            "pushed": self.pushed,
            "conflicts_reconciled": [note.as_dict() for note in self.reconciled],
            "changed_paths": self.changed_paths,
            "attempts": self.attempts,
            "packed_objects": self.packed,
        }


class RemoteMoved(Exception):
    """The remote branch changed between our fetch and our push."""


# --- reading objects --------------------------------------------------------------------------


TREE_CACHE = 128  # parsed trees kept: a walk reads a tree and, next, its parent's
COMMIT_CACHE = 4096
INFO_CACHE = 65536  # (time, tree, parents) of commits: a walk over all of history reads each
DIFF_CACHE = 65536  # tree pairs compared (a few paths each): a clone's checks diff each commit
Entry = tuple[bytes, int, bytes]  # name, mode, hex id
Entries = dict[bytes, Entry]  # a tree's entries by name


class _Parsed(ShaFile):
    """An object :class:`Objects` made: parsed from its raw bytes, which hashed to the id asked
    for (``set_raw_string`` with ``verify_sha``)."""

    __slots__ = ()

    def check(self) -> None:
        """Nothing left: ``ShaFile.check`` would parse the same bytes and hash them again."""


class _ParsedCommit(Commit, _Parsed):
    """A commit whose ``check`` runs dulwich's commit rules (ids, identities, times, header
    order) without repeating the parse and hash that made it: a third of its cost."""

    __slots__ = ()


class RepoObjects:
    """A repository's objects as a sync reads them: loose ones (every commit made here since
    the last fetch) straight from their files, the rest through dulwich's store, opened on
    first need. A push of commits made here reads no pack: it never imports dulwich's object
    store and pack modules (~20 ms, a fifth of the whole push)."""

    def __init__(self, repo: Repository) -> None:
        self.repo = repo
        self.path = repo.objects_dir

    @property
    def store(self) -> DiskObjectStore:
        return self.repo.objects

    def loose_raw(self, sha: str) -> tuple[int, bytes] | None:
        return loose.read_raw(self.path, sha, self.repo.loose_limit)

    def __contains__(self, sha: ObjectID, /) -> bool:
        return loose.has_loose(self.path, _hex(sha)) or sha in self.store


class Objects:
    """Reads of commits, trees and blobs from one object store (dulwich's, or a repository's
    :class:`RepoObjects`), with bounded caches: a walk over a long history keeps the trees it
    is about to compare, not every tree."""

    def __init__(
        self, store: BaseObjectStore | RepoObjects, sizes: SizeChecks | None = None
    ) -> None:
        self.source = store
        self.sizes = sizes  # another repository's store: each object's size read first
        self._commits: OrderedDict[str, Commit] = OrderedDict()
        self._trees: OrderedDict[str, Tree] = OrderedDict()
        self._entries: OrderedDict[str, Entries] = OrderedDict()
        self._diffs: OrderedDict[str, TreeDiff] = OrderedDict()
        self._info: OrderedDict[str, CommitFacts] = OrderedDict()
        # the store's packs as they are at the first read that needs one, asked directly:
        # dulwich's own lookup costs three times the read (pack bookkeeping, a loose-object
        # stat) on walks over long histories
        self._packs: list[Pack] | None = None

    @property
    def store(self) -> BaseObjectStore:
        source = self.source
        return source.store if isinstance(source, RepoObjects) else source

    def raw(self, sha: str) -> tuple[int, bytes]:
        """(type number, content) of an object; RemoteError when it is missing."""
        if self.sizes is not None:
            self.sizes.check(_oid(sha))
        if isinstance(self.source, RepoObjects):
            found = self.source.loose_raw(sha)
            if found is not None:
                return found
        from dulwich.pack import PackFileDisappeared

        binary = RawObjectID(bytes.fromhex(sha))
        packs = self._packs
        if packs is None:
            packs = self._packs = list(getattr(self.store, "packs", ()))
        for at, pack in enumerate(packs):
            try:
                found = pack.get_raw(binary)
            except KeyError:
                continue
            except PackFileDisappeared:  # repacked meanwhile: the store finds it anew
                break
            if at:  # the pack that answered is asked first next time
                packs.insert(0, packs.pop(at))
            return found
        try:
            return self.store.get_raw(_oid(sha))  # loose, alternates, packs added since
        except KeyError as exc:
            raise _missing(sha) from exc

    def get(self, sha: str) -> ShaFile:
        kind, raw = self.raw(sha)
        return ShaFile.from_raw_string(kind, raw, verify_sha=_oid(sha))

    def commit(self, sha: str) -> Commit:
        found = self._commits.get(sha)
        if found is None:
            kind, raw = self.raw(sha)
            if kind != Commit.type_num:
                name = ShaFile.from_raw_string(kind, raw).type_name.decode()
                raise UnsafePath(f"{sha} is a {name}, not a commit")
            obj = _ParsedCommit()
            obj.set_raw_string(raw, verify_sha=_oid(sha))
            found = _remember(self._commits, sha, obj, COMMIT_CACHE)
            facts = CommitFacts(obj.commit_time, _hex(obj.tree), tuple(map(_hex, obj.parents)))
            _remember(self._info, sha, facts, INFO_CACHE)
        return found

    def info(self, sha: str) -> CommitFacts:
        """A commit's time, tree and parents, kept longer than whole commits are (a walk over
        all of history reads each commit once)."""
        found = self._info.get(sha)
        if found is None:
            self.commit(sha)
            found = self._info[sha]
        return found

    def peel(self, sha: str) -> str | None:
        """The commit ``sha`` stands for (an annotated tag: the commit it tags), else None: a
        remote advertises tags beside its branches."""
        obj = self.get(sha)
        while isinstance(obj, Tag):
            obj = self.get(_hex(obj.object[1]))
        if not isinstance(obj, Commit):
            return None
        found = _hex(obj.id)
        if found not in self._commits:
            _remember(self._commits, found, obj, COMMIT_CACHE)
        return found

    def tree(self, sha: str) -> Tree:
        found = self._trees.get(sha)
        if found is None:
            obj = self.get(sha)
            if not isinstance(obj, Tree):
                raise UnsafePath(f"{sha} is a {obj.type_name.decode()}, not a tree")
            found = _remember(self._trees, sha, obj, TREE_CACHE)
        return found

    def raw_tree(self, sha: str) -> bytes:
        kind, raw = self.raw(sha)
        if kind != Tree.type_num:
            raise UnsafePath(f"{sha} is not a tree")
        return raw

    def entries(
        self, sha: str, raw: bytes | None = None, items: list[Entry] | None = None
    ) -> Entries:
        """A tree's entries, parsed straight from the raw object (no sorting, no ShaFile);
        ``items``: parsed already (by the checks)."""
        found = self._entries.get(sha)
        if found is None:
            if items is None:
                from dulwich.objects import parse_tree

                data = self.raw_tree(sha) if raw is None else raw
                items = list(parse_tree(data, 20))
            parsed = dict(zip(map(itemgetter(0), items), items, strict=True))
            found = _remember(self._entries, sha, parsed, TREE_CACHE)
        return found

    def diff(self, old: str | None, new: str | None, out: TreeDiff | None = None) -> TreeDiff:
        """Where two trees differ (identical subtrees are never opened); each pair is compared
        once (the clone's checks compare every commit with its parents while both trees are
        at hand, so timing the files later reads no tree again)."""
        key = f"{old}:{new}"
        found = self._diffs.get(key)
        if found is None:
            found = TreeDiff()
            self._diff(old, new, "", found)
            _remember(self._diffs, key, found, DIFF_CACHE)
        if out is None:
            return found
        out.paths |= found.paths
        out.prefixes += found.prefixes
        return out

    def _diff(self, old: str | None, new: str | None, prefix: str, out: TreeDiff) -> None:
        if old == new:
            return
        before = self.entries(old) if old is not None else {}
        after = self.entries(new) if new is not None else {}
        for name in {key for key, _ in before.items() ^ after.items()}:
            a, b = before.get(name), after.get(name)
            path = prefix + name.decode("utf-8", "surrogateescape")
            a_dir = a is not None and stat.S_ISDIR(a[1])
            b_dir = b is not None and stat.S_ISDIR(b[1])
            if a is not None and b is not None and a_dir and b_dir:
                self._diff(_hex(a[2]), _hex(b[2]), path + "/", out)
            elif a is not None and b is not None and not a_dir and not b_dir:
                if a[2] != b[2]:  # a mode change alone keeps the blob (and its time)
                    out.paths.add(path)
            else:
                out.paths.add(path)
                if a_dir or b_dir:
                    out.prefixes.append(path + "/")

    def blob(self, sha: str) -> bytes:
        obj = self.get(sha)
        if not isinstance(obj, Blob):
            raise UnsafePath(f"{sha} is a {obj.type_name.decode()}, not a blob")
        data: bytes = obj.as_raw_string()
        return data

    def tree_of(self, commit: str | None) -> str | None:
        return None if commit is None else self.info(commit).tree

    def files(self, commit: str | None, known: Known | None = None) -> dict[str, str]:
        """Every file path in the commit's tree -> blob id; with ``known``, none in a folder
        whose tree is known."""
        out: dict[str, str] = {}
        tree = self.tree_of(commit)
        if tree is not None:
            self._walk(tree, "", out, known)
        return out

    def _walk(self, tree: str, prefix: str, out: dict[str, str], known: Known | None) -> None:
        """A stack, not recursion: a hostile tree may be nested thousands of levels deep."""
        stack = [(tree, prefix)]
        while stack:
            current, base = stack.pop()
            for name, mode, sha in self.entries(current).values():
                path = base + name.decode("utf-8", "surrogateescape")
                if not stat.S_ISDIR(mode):
                    out[path] = _hex(sha)
                elif known is None or ObjectID(sha) not in known:
                    stack.append((_hex(sha), path + "/"))

    def lookup(self, tree: str | None, path: str) -> str | None:
        """Blob id of ``path`` in ``tree``, or None."""
        sha = tree
        parts = path.split("/")
        for depth, part in enumerate(parts):
            if sha is None:
                return None
            found = self.entries(sha).get(part.encode("utf-8", "surrogateescape"))
            if found is None:
                return None
            _, mode, child = found
            if stat.S_ISDIR(mode) == (depth == len(parts) - 1):
                return None
            sha = _hex(child)
        return sha

    def text(self, sha: str | None) -> str | None:
        return None if sha is None else self.blob(sha).decode("utf-8", "surrogateescape")


class CommitFacts(NamedTuple):
    time: int
    tree: str
    parents: tuple[str, ...]


class TreeDiff:
    """Paths that differ between trees: files (``paths``) and whole folders that appeared,
    vanished or changed kind (``prefixes``, ending in ``/``)."""

    __slots__ = ("paths", "prefixes")

    def __init__(self) -> None:
        self.paths: set[str] = set()
        self.prefixes: list[str] = []

    def differs(self, path: str) -> bool:
        return path in self.paths or any(path.startswith(p) for p in self.prefixes)

    def unchanged(self, paths: set[str]) -> set[str]:
        """The members of ``paths`` this diff leaves alone."""
        same = paths - self.paths
        if self.prefixes:
            same = {p for p in same if not self.differs(p)}
        return same


_V = TypeVar("_V")


def _remember(cache: OrderedDict[str, _V], key: str, value: _V, limit: int) -> _V:
    cache[key] = value
    if len(cache) > limit:
        cache.popitem(last=False)
    return value


def _missing(sha: str) -> RemoteError:
    return RemoteError(
        f"object {sha} is missing: the remote sent an incomplete history",
        "run the sync again; if it persists, check the remote with `git fsck`",
    )


def _hex(sha: bytes) -> str:
    return sha.decode("ascii")


def _oid(sha: str) -> ObjectID:
    return ObjectID(sha.encode("ascii"))


# --- quarantine and fetch ---------------------------------------------------------------------


class Quarantine:
    """An object store for incoming objects that sees the real store through alternates.

    Made on disk only when something is to be fetched (:meth:`open`): a sync that finds the
    remote's ``main`` here already (a push) writes no folder, lock or store for nothing."""

    def __init__(self, git_dir: str, objects_dir: str) -> None:
        self.path = os.path.join(git_dir, QUARANTINE_PREFIX + os.urandom(6).hex())
        self.objects_dir = objects_dir
        self.owner: TryLock | None = None
        self._store: DiskObjectStore | None = None

    def open(self) -> Quarantine:
        if self.owner is not None:
            return self
        from qmem_git.store.locks import TryLock

        os.makedirs(self.path)
        # held while this sync uses it (the fetch runs outside the writer lock): a quarantine
        # whose owner lock can be taken belongs to a sync that died
        self.owner = TryLock(os.path.join(self.path, OWNER_LOCK))
        self.owner.acquire()
        os.makedirs(os.path.join(self.path, "pack"))
        os.makedirs(os.path.join(self.path, "info"))
        return self

    @property
    def opened(self) -> bool:
        return self.owner is not None

    @property
    def store(self) -> DiskObjectStore:
        if self._store is None:
            from dulwich.object_store import DiskObjectStore

            self.open()
            self._store = DiskObjectStore(
                self.path,
                alternates=[self.objects_dir],
                delta_base_cache_limit=DELTA_BASE_CACHE_BYTES,
            )
        return self._store

    def pack_files(self) -> list[str]:
        pack_dir = os.path.join(self.path, "pack")
        return sorted(os.listdir(pack_dir))

    def install(self) -> None:
        """Move the checked objects into the repository: loose ones, then packs (.pack
        before .idx, as C git does)."""
        if not self.opened:
            return
        from qmem_git.store.loose import migrate_loose

        self._close_store()
        migrate_loose(self.path, self.objects_dir)
        pack_dir = os.path.join(self.path, "pack")
        target = os.path.join(self.objects_dir, "pack")
        os.makedirs(target, exist_ok=True)
        names = self.pack_files()
        for suffix in (".pack", ".rev", ".idx"):
            for name in names:
                if name.endswith(suffix):
                    os.replace(os.path.join(pack_dir, name), os.path.join(target, name))

    def discard(self) -> None:
        self._close_store()
        if self.owner is not None:
            import shutil  # lazily: it imports bz2 and lzma

            shutil.rmtree(self.path, ignore_errors=True)
            self.owner.release()

    def _close_store(self) -> None:
        if self._store is not None:
            self._store.close()


def remove_stale_quarantines(git_dir: str) -> None:
    """A killed sync leaves its quarantine behind: one whose owner lock is free is garbage (a
    sync fetching now holds its own)."""
    from qmem_git.store.locks import TryLock

    with contextlib.suppress(OSError):
        for name in os.listdir(git_dir):
            if not name.startswith(QUARANTINE_PREFIX):
                continue
            path = os.path.join(git_dir, name)
            owner = TryLock(os.path.join(path, OWNER_LOCK))
            with contextlib.suppress(OSError):
                if owner.acquire():
                    import shutil  # lazily: it imports bz2 and lzma

                    shutil.rmtree(path, ignore_errors=True)
            owner.release()


class Fetched:
    """The remote's ``main`` (None: it has none), fetched into a checked quarantine."""

    __slots__ = ("new_commits", "objects", "quarantine", "remote_head", "times")

    def __init__(self, remote_head: str | None, quarantine: Quarantine, objects: Objects) -> None:
        self.remote_head = remote_head
        self.quarantine = quarantine
        self.objects = objects
        self.new_commits = 0
        self.times: dict[str, int] | None = None  # a clone's: every file's history time


def fetch(
    repo: Repository,
    transport: Transport,
    progress: Progress | None,
    timeout: float,
    clone: bool = False,
) -> Fetched:
    """Fetch the remote's ``main`` into a quarantine and check everything new in it; for a
    ``clone``, time every file from history in the same walk (still without the lock)."""
    quarantine = Quarantine(repo.git_dir, repo.objects_dir)
    here = RepoObjects(repo)
    try:
        wants = _MainWanted(here, transport.branch)
        if _nothing_to_fetch(transport, wants, timeout):
            pass  # a local remote whose main is here already (a push): no quarantine
        elif not _copy_local_packs(repo, transport, wants, quarantine):
            spool = os.path.join(quarantine.open().path, "incoming.pack")
            _download(repo, transport, wants, spool, progress, timeout)
            check_pack_file(spool)  # before dulwich inflates any object of it whole
            _add_spooled_pack(quarantine, spool)
        if wants.others:
            raise _no_main(transport, wants.others)
        objects = Objects(quarantine.store if quarantine.opened else here)
        fetched = Fetched(wants.head, quarantine, objects)
        if wants.head is not None:
            known = KnownObjects(here)
            meter = Meter(progress, "checking")
            fetched.new_commits = check_incoming(
                objects, known, wants.head, meter=meter, compare=clone
            )
            meter.finish()
            if clone:
                fetched.times = history_times(objects, wants.head)
        return fetched
    except BaseException:
        quarantine.discard()
        raise


def _nothing_to_fetch(transport: Transport, wants: _MainWanted, timeout: float) -> bool:
    """For a local remote: its refs read first, True when its ``main`` is here already (or
    it has none). A network remote is asked once, in the fetch itself."""
    if url_kind(transport.url) not in ("local", "file"):
        return False
    with _network(transport, "fetching from", timeout):
        refs = transport.client.get_refs(_path_bytes(transport)).refs
    return not wants({ref: sha for ref, sha in refs.items() if sha is not None})


class KnownObjects:
    """Whether the repository has an object, without dulwich's rescan of the pack folder on
    every miss (it looks for packs another writer just added): the checks ask about every
    fetched object, and a clone's are all misses. Loose objects are asked first (a push asks
    only about commits made here); packs are listed once, when first needed."""

    def __init__(self, objects: RepoObjects) -> None:
        self.objects = objects
        self.packs: list[Pack] | None = None
        # none loose now (a clone): none to look for; one written meanwhile is checked again
        self.loose = count_loose(objects.path, 1) > 0

    def __contains__(self, sha: ObjectID, /) -> bool:
        if self.loose and loose.has_loose(self.objects.path, _hex(sha)):
            return True
        store = self.objects.store
        if self.packs is None:
            self.packs = list(store.packs)
        if any(sha in pack for pack in self.packs):
            return True
        return any(sha in alternate for alternate in store.alternates)


class _MainWanted:
    """dulwich's ``determine_wants``: the remote's ``main`` when it is new here.

    Notes the remote's ``main`` (``head``), or, when it has none, its other branches.
    """

    def __init__(self, known: RepoObjects, branch: bytes = BRANCH) -> None:
        self.known = known
        self.branch = branch  # a hub's branch other than main: its absence means "empty"
        self.head: str | None = None
        self.others: list[str] = []

    def __call__(self, refs: Mapping[Ref, ObjectID], depth: int | None = None) -> list[ObjectID]:
        del depth
        head = refs.get(Ref(self.branch))
        self.head = head.decode("ascii") if head else None
        if head is None and self.branch == BRANCH:
            self.others.extend(_branch_names(refs))
        if head is None or ObjectID(head) in self.known:
            return []
        return [head]


def _download(
    repo: Repository,
    transport: Transport,
    wants: _MainWanted,
    spool: str,
    progress: Progress | None,
    timeout: float,
) -> None:
    """Write the pack the remote sends for ``wants`` to ``spool`` (at most the size cap)."""
    from dulwich.object_store import ObjectStoreGraphWalker

    local_heads = _local_heads(repo)
    walker = ObjectStoreGraphWalker([_oid(h) for h in local_heads], _parents_of(repo))
    with open(spool, "wb") as sink, _network(transport, "fetching from", timeout):
        transport.client.fetch_pack(
            transport.path,
            wants,
            walker,
            _capped_writer(sink, progress),
            progress=_raw_progress(progress),
        )


def _copy_local_packs(
    repo: Repository, transport: Transport, wants: _MainWanted, quarantine: Quarantine
) -> bool:
    """A clone from a local remote: its packs and loose objects (a small push leaves its
    objects loose there, as C git's does) are copied (hard links where possible, as ``git
    clone`` does locally) instead of being unpacked and packed again; the checks then read
    only what ``main`` reaches, verifying every id. False when this does not apply (something
    here already, or alternates there)."""
    if url_kind(transport.url) not in ("local", "file") or repo.head()[1] is not None:
        return False
    if transport.branch != BRANCH:  # a hub's packs hold every store's objects: fetch one branch
        return False
    from qmem_git.store.localrepo import LocalRepository
    from qmem_git.store.packscan import check_loose

    quarantine.open()
    with LocalRepository(transport.path) as source:
        objects_dir = os.fspath(source.object_store.path)
        pack_dir = os.path.join(objects_dir, "pack")
        if os.path.exists(os.path.join(objects_dir, "info", "alternates")):
            return False
        if not wants(source.get_refs()):
            return True
        names = [n[:-5] for n in os.listdir(pack_dir) if n.endswith(".pack")]
        loose = _loose_files(objects_dir)
        packs = (os.path.join(pack_dir, n + ".pack") for n in names)
        _check_pack_sizes(itertools.chain(packs, (os.path.join(objects_dir, p) for p in loose)))
        for name in names:
            for suffix in (".pack", ".idx"):
                _link_or_copy(
                    os.path.join(pack_dir, name + suffix),
                    os.path.join(quarantine.path, "pack", name + suffix),
                )
            check_pack_file(os.path.join(quarantine.path, "pack", name + ".pack"))
        for path in loose:
            os.makedirs(os.path.join(quarantine.path, path[:2]), exist_ok=True)
            _link_or_copy(os.path.join(objects_dir, path), os.path.join(quarantine.path, path))
            check_loose(os.path.join(quarantine.path, path))  # before anything inflates it
    return True


def _loose_files(objects_dir: str) -> list[str]:
    """``ab/cdef...`` of every loose object in ``objects_dir``."""
    from qmem_git.store.loose import loose_ids

    return [os.path.join(sha[:2], sha[2:]) for sha in loose_ids(objects_dir)]


def _check_pack_sizes(paths: Iterator[str]) -> None:
    if sum(os.path.getsize(path) for path in paths) > MAX_INCOMING_PACK_BYTES:
        raise _too_much()


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        import shutil  # lazily: it imports bz2 and lzma

        shutil.copyfile(source, target)


def _too_much() -> RemoteError:
    return RemoteError(
        f"the remote sent more than {MAX_INCOMING_PACK_BYTES >> 20} MiB",
        "memory repositories are small; check the remote URL",
    )


def _capped_writer(sink: BinaryIO, progress: Progress | None = None) -> Callable[[bytes], int]:
    """``sink.write``, refusing (RemoteError) past :data:`MAX_INCOMING_PACK_BYTES` in all."""
    written = 0
    meter = Meter(progress, "receiving")

    def write(data: bytes) -> int:
        nonlocal written
        written += len(data)
        if written > MAX_INCOMING_PACK_BYTES:
            raise _too_much()
        meter.bytes(written)
        return sink.write(data)

    return write


class Meter:
    """Progress of one long step as ``\r``-led lines (the CLI redraws them in place on a
    terminal), at most a few a second; nothing without a progress callback."""

    INTERVAL = 0.25

    def __init__(self, progress: Progress | None, label: str) -> None:
        self.progress = progress
        self.label = label
        self.started = time.monotonic()
        self.last = self.started
        self.shown = ""

    def bytes(self, total: int) -> None:
        if self._due():
            rate = total / max(time.monotonic() - self.started, 1e-3)
            self._show(f"{_size(total)}, {_size(int(rate))}/s")

    def count(self, total: int, unit: str) -> None:
        if self._due():
            self._show(f"{total:,} {unit}")

    def finish(self) -> None:
        if self.shown and self.progress is not None:
            self.progress(f"\r{self.label}: {self.shown}, done\n")  # ends the line

    def _due(self) -> bool:
        if self.progress is None:
            return False
        now = time.monotonic()
        if now - self.last < self.INTERVAL:
            return False
        self.last = now
        return True

    def _show(self, text: str) -> None:
        self.shown = text
        if self.progress is not None:
            self.progress(f"\r{self.label}: {text}")


def _size(count: int) -> str:
    return f"{count / 1048576:.1f} MiB" if count >= 1048576 else f"{count / 1024:.0f} KiB"


def _add_spooled_pack(quarantine: Quarantine, spool: str) -> None:
    """Index the downloaded (thin) pack into the quarantine; an empty one adds nothing."""
    if os.path.getsize(spool):
        with open(spool, "rb") as source:
            quarantine.store.add_thin_pack(source.read, None)
    os.unlink(spool)


def _branch_names(refs: Mapping[Ref, ObjectID]) -> list[str]:
    prefix = b"refs/heads/"
    return sorted(
        name[len(prefix) :].decode("utf-8", "replace")
        for name in refs
        if name.startswith(prefix) and not name.endswith(b"^{}")
    )


def _no_main(transport: Transport, branches: list[str]) -> QmemError:
    """A remote with branches but no ``main``: its history would be ignored, so refuse."""
    url = redact_all(transport.url, transport.secrets)
    shown = ", ".join(branches[:5]) + (", ..." if len(branches) > 5 else "")
    source = "master" if "master" in branches else branches[0]
    return QmemError(
        f"{url} has no branch main (its branches: {shown}); qmem-git syncs only main",
        f"nothing was synced; from a clone that has {source}, push it as main: "
        f"`git push {url} {source}:main`",
    )


def _parents_of(repo: Repository) -> Callable[[ObjectID], list[ObjectID]]:
    def parents(sha: ObjectID) -> list[ObjectID]:
        commit = repo.objects[sha]
        return list(commit.parents) if isinstance(commit, Commit) else []

    return parents


def _local_heads(repo: Repository) -> list[str]:
    _, head = repo.head()
    heads = [head] if head else []
    heads.extend(tip for tip in repo.remote_tips().values() if tip not in heads)
    return heads


@contextlib.contextmanager
def _network(transport: Transport, action: str, timeout: float) -> Iterator[None]:
    """Bound the exchange and turn transport failures into one redacted RemoteError.

    For a network remote ``timeout`` bounds every single wait (socket timeout) and the whole
    exchange too: a server that sends a byte now and then cannot keep a sync alive. A local
    remote uses no socket (its hooks have their own bound, ``store.receive``).
    """
    network = url_kind(transport.url) not in ("local", "file")
    bound = socket_timeout(timeout) if network else contextlib.nullcontext()
    try:
        with bound, _deadline(timeout if network else None):
            yield
    except (QmemError, RemoteMoved):
        raise
    except Exception as exc:
        raise remote_error(exc, transport.url, action, transport.secrets) from exc


class ExchangeTimeout(TimeoutError):
    """The whole exchange with the remote took longer than its bound."""


@contextlib.contextmanager
def _deadline(seconds: float | None) -> Iterator[None]:
    """Raise :class:`ExchangeTimeout` in this thread once ``seconds`` have passed (a real-time
    interval timer; only the main thread receives signals, elsewhere only reads are bounded)."""
    if seconds is None:
        yield
        return
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: object) -> None:
        del signum, frame
        raise ExchangeTimeout(f"timed out: no complete answer within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _raw_progress(progress: Progress | None) -> Callable[[bytes], None] | None:
    if progress is None:
        return None

    def forward(data: bytes) -> None:
        text = data.decode("utf-8", "replace").strip()
        if text:  # the server's counters, redrawn in place like ours
            progress("\r" + text.splitlines()[-1].split("\r")[-1])

    return forward


# --- checks on incoming history ---------------------------------------------------------------


def check_incoming(
    objects: Objects,
    known: Known,
    tip: str,
    refuse: Refusal | None = None,
    settled: Settled | None = None,
    meter: Meter | None = None,
    compare: bool = False,
) -> int:
    """Check every commit (and its trees and blobs) that is new to the repository.

    Returns the number of new commits. Raises UnsafePath naming the path and commit (made by
    ``refuse``, for the words of the direction checked). ``compare``: also compare each new
    commit's tree with its parents' (remembered in ``objects``, for :func:`last_change_times`).
    """
    if _oid(tip) in known:
        return 0  # and so is everything it holds: it passed when it arrived, or was made here
    with _no_cycle_collector():
        return _check_new_history(objects, known, tip, refuse, settled, meter, compare)


@contextlib.contextmanager
def _no_cycle_collector() -> Iterator[None]:
    """The cycle collector off while history is checked: the walk allocates millions of small
    tuples, sets and parsed objects (none in cycles; reference counting frees them) and keeps
    bounded caches of them, which the collector's passes scanned again and again (~8% of a
    5,000-commit clone)."""
    import gc

    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _check_new_history(
    objects: Objects,
    known: Known,
    tip: str,
    refuse: Refusal | None,
    settled: Settled | None,
    meter: Meter | None,
    compare: bool,
) -> int:
    check = _IncomingCheck(objects, known, refuse or _refuse, settled, tip)
    stack, seen, count = [tip], set(), 0
    children: dict[str, list[str]] = {}  # with ``compare``: trees of the children walked
    while stack:
        sha = stack.pop()
        if sha in seen or _oid(sha) in known:
            continue
        seen.add(sha)
        commit = objects.commit(sha)
        _fsck(commit, sha)
        count += 1
        if meter is not None:
            meter.count(count, "commits")
        tree = _hex(commit.tree)
        check.tree(tree, "", sha)
        if compare:  # the child's trees were read just before: both are at hand now
            for child in children.pop(sha, ()):
                objects.diff(tree, child)
            for parent in commit.parents:
                children.setdefault(_hex(parent), []).append(tree)
        stack.extend(_hex(parent) for parent in commit.parents)
    _check_tip_contents(objects, known, tip, refuse or _refuse)
    return count


class OutgoingCheck:
    """What a push would give the remote passes the checks the remote's other clones make when
    they fetch it: a commit made by hand with ``--no-verify`` must not reach the remote, where it
    would stop every other machine's sync. What the remote's history holds counts as known: the
    commits the remote reaches (walked only as far as the commits it lacks go, ``revwalk``) and
    what its tip tree holds where the checks look (:class:`RemoteTip`), read once for the
    checks before and after a merge."""

    def __init__(self, objects: Objects, remote: str | None) -> None:
        self.objects = objects
        self.remote = remote
        self.tip = RemoteTip(objects, _hex(objects.commit(remote).tree) if remote else None)

    def check(self, tip: str) -> None:
        """Raise UnsafePath (``refusing to push: ...``) for what the remote would refuse."""
        if self.remote is not None:
            span = only_in(objects_info(self.objects), [tip], [self.remote])
            self.tip.known.update(_oid(sha) for sha in span.boundary)
        check_incoming(self.objects, self.tip.known, tip, _refuse_push, self.tip)


class RemoteTip:
    """The remote's tip tree, path -> (mode, id), read as the checks ask: only the trees on
    the way to a path are read, so a push that changes one folder reads no other (nor, on a
    10,000-file store, 10,000 entries). ``known``: every object met in the trees read, which
    the remote has; the checks add the remote's commits they meet."""

    def __init__(self, objects: Objects, tree: str | None) -> None:
        self.objects = objects
        self.tree = tree
        self.known: set[ObjectID] = {_oid(tree)} if tree is not None else set()
        self._found: dict[str, tuple[int, str] | None] = {}
        self._read: set[str] = set()  # trees whose entries are in ``known``

    def get(self, path: str) -> tuple[int, str] | None:
        """What the tip holds at ``path`` (a folder as ``TREE_MODE``); None: nothing."""
        if not path or self.tree is None:
            return None
        found: tuple[int, str] | None = (TREE_MODE, self.tree)
        at = ""
        for part in path.split("/"):
            at = f"{at}/{part}" if at else part
            if at not in self._found:
                folder = found[1] if found is not None and found[0] == TREE_MODE else None
                self._found[at] = self._entry(folder, part) if folder is not None else None
            found = self._found[at]
        return found

    def __contains__(self, path: object, /) -> bool:
        return isinstance(path, str) and self.get(path) is not None

    def _entry(self, tree: str, name: str) -> tuple[int, str] | None:
        entries = self.objects.entries(tree)
        if tree not in self._read:
            self._read.add(tree)
            self.known.update(ObjectID(sha) for _, _, sha in entries.values())
        entry = entries.get(name.encode("utf-8", "surrogateescape"))
        if entry is None:
            return None
        _, mode, sha = entry
        return (TREE_MODE if stat.S_ISDIR(mode) else mode), _hex(sha)


def objects_info(objects: Objects) -> CommitInfo:
    """``revwalk``'s view of a commit: its committer time and parents."""

    def info(sha: str) -> tuple[int, list[str]]:
        commit = objects.commit(sha)
        return commit.commit_time, [_hex(parent) for parent in commit.parents]

    return info


class WholeObject(NamedTuple):
    """One object a push or fetch sends, whole (never a delta): its type and content, named
    as dulwich's ``UnpackedObject`` names them (a receiver stores either alike)."""

    obj_type_num: int
    decomp_chunks: list[bytes]
    delta_base: None = None


def pack_records(
    store: PackBasedObjectStore | RepoObjects,
    wants: Collection[ObjectID],
    haves: Collection[ObjectID],
    *,
    foreign: bool = False,
) -> tuple[int, Iterator[WholeObject]]:
    """The objects a side that has ``haves`` (present in ``store``) needs for ``wants``, whole,
    read as they are stored (never parsed and written again). Not ``store.generate_pack_data``:
    it walks every commit the other side has and reads every packed object looking for deltas
    to reuse, on each push and fetch. ``foreign``: ``store`` is a path remote's; no object is
    read before its size is."""
    from qmem_git.store.packscan import SizeChecks

    sizes = SizeChecks(store) if foreign and not isinstance(store, RepoObjects) else None
    objects = Objects(store, sizes)
    ids = objects_to_send(objects, [_hex(s) for s in wants], [_hex(s) for s in haves])
    if sizes is not None:
        for sha in ids:
            sizes.check(sha)
    return len(ids), _whole_objects(objects, ids)


def _whole_objects(objects: Objects, ids: list[ObjectID]) -> Iterator[WholeObject]:
    for sha in ids:
        kind, data = objects.raw(_hex(sha))
        yield WholeObject(kind, [data])


def unpacked(records: Iterable[WholeObject]) -> Iterator[UnpackedObject]:
    """``records`` as dulwich's pack writers and network clients take them."""
    from dulwich.pack import UnpackedObject

    for record in records:
        yield UnpackedObject(
            record.obj_type_num, delta_base=None, decomp_chunks=record.decomp_chunks
        )


def objects_to_send(objects: Objects, wants: list[str], haves: list[str]) -> list[ObjectID]:
    """What a side that has ``haves`` lacks to have the commits ``wants``: the commits between
    them, with what their trees hold that the trees of the nearest commits it has do not hold
    at the same path (a folder that did not change is not read). Something it has elsewhere
    (a file moved) is sent again, which is harmless."""
    tips = [sha for sha in map(objects.peel, wants) if sha is not None]
    others = [sha for sha in map(objects.peel, haves) if sha is not None]
    span = only_in(objects_info(objects), tips, others)
    bases = [_hex(objects.commit(sha).tree) for sha in span.boundary]
    known: set[ObjectID] = set()
    send: list[ObjectID] = []
    for sha in sorted(span.new):
        send.append(_oid(sha))
        _new_objects(objects, _hex(objects.commit(sha).tree), bases, known, send)
    return send


def _new_objects(
    objects: Objects, tree: str, bases: list[str], known: set[ObjectID], out: list[ObjectID]
) -> None:
    """Add ``tree`` and what it holds to ``out`` (and ``known``), skipping what is known and
    what the trees ``bases`` (the other side's, at the same path) hold under the same name."""
    stack = [(tree, bases)]
    while stack:  # a stack, not recursion: a tree may be nested thousands of levels deep
        current, theirs = stack.pop()
        if current in theirs or _oid(current) in known:
            continue
        known.add(_oid(current))
        out.append(_oid(current))
        their_entries = [objects.entries(base) for base in theirs]
        for name, mode, sha in objects.entries(current).values():
            same_name = [entries[name] for entries in their_entries if name in entries]
            if stat.S_ISDIR(mode):
                folders = [_hex(other) for _, kind, other in same_name if stat.S_ISDIR(kind)]
                stack.append((_hex(sha), folders))
            elif not S_ISGITLINK(mode) and ObjectID(sha) not in known:
                if all(other != sha for _, _, other in same_name):
                    out.append(ObjectID(sha))
                known.add(ObjectID(sha))


def _fsck(obj: ShaFile, sha: str) -> None:
    from dulwich.errors import ChecksumMismatch, ObjectFormatException

    try:
        obj.check()
    except (ObjectFormatException, ChecksumMismatch) as exc:
        raise UnsafePath(
            f"refusing the remote's history: object {sha} is malformed ({exc})",
            "nothing was changed locally; repair the remote (`git fsck` there)",
        ) from exc


Refusal = Callable[[str, str, str], UnsafePath]


class Settled(Protocol):
    """path -> (mode, object id) the receiver has there (folders as ``TREE_MODE``)."""

    def get(self, path: str, /) -> tuple[int, str] | None: ...

    def __contains__(self, path: object, /) -> bool: ...


_NOTHING_SETTLED: dict[str, tuple[int, str]] = {}


class Known(Protocol):
    """The object ids the receiving side has already (an object store, or a set of ids)."""

    def __contains__(self, sha: ObjectID, /) -> bool: ...


SECRET_PREFIX = "secret:"
COLLISION_PROBLEM = "on case-insensitive disks"


def _refuse(path: str, problem: str, commit: str) -> UnsafePath:
    hint = "nothing was changed locally; remove that path from the remote's history"
    if problem.startswith(SECRET_PREFIX):
        hint = (
            "nothing was fetched; the credential is on the remote: rotate it now, then rewrite "
            "the remote's history (`git filter-repo` in a clone, force-push) and run "
            "`qmem-git purge --secrets` on the machines that hold it"
        )
    elif COLLISION_PROBLEM in problem:
        hint = "nothing was changed locally; run `qmem-git repair` where that history was made"
    return UnsafePath(
        f"refusing the remote's history: {path}: {problem} (commit {commit[:12]})", hint
    )


def _refuse_push(path: str, problem: str, commit: str) -> UnsafePath:
    hint = (
        "other machines' syncs would refuse this history, even once a later commit fixes the "
        f"file: take it out of the unpushed commits (`qmem-git purge {path}`), then sync"
    )
    if problem.startswith(SECRET_PREFIX):
        hint = (
            "nothing was pushed; history keeps what forget removed: run "
            "`qmem-git purge --secrets --dry-run`, then `qmem-git purge --secrets`, then sync"
        )
    elif COLLISION_PROBLEM in problem:
        hint = "nothing was pushed; run `qmem-git repair` (renames one of them), then sync"
    return UnsafePath(f"refusing to push: {path}: {problem} (commit {commit[:12]})", hint)


_TREE_MODES = frozenset({0o100755, 0o100644, 0o120000, 0o040000, 0o160000, 0o100664})
_BAD_NAMES = frozenset({b"", b".", b"..", b".git"})


def _malformed(sha: str, problem: str) -> UnsafePath:
    return UnsafePath(
        f"refusing the remote's history: object {sha} is malformed ({problem})",
        "nothing was changed locally; repair the remote (`git fsck` there)",
    )


def _tree_problem(sha: str, raw: bytes) -> tuple[str | None, list[Entry] | None]:
    """What ``git fsck`` would say about one tree (what ``Tree.check`` checks), on its raw
    bytes, and its entries when they parse."""
    import hashlib

    from dulwich.errors import ObjectFormatException
    from dulwich.objects import parse_tree

    if hashlib.sha1(b"tree %d\0" % len(raw) + raw).hexdigest() != sha:
        return "its content does not match its id", None
    try:
        items = list(parse_tree(raw, 20, strict=True))
    except (ObjectFormatException, ValueError) as exc:
        return str(exc) or "unparsable", None
    if len(items) > MAX_TREE_ENTRIES:
        return f"{len(items):,} entries; the limit is {MAX_TREE_ENTRIES:,}", items
    names = list(map(itemgetter(0), items))
    modes = set(map(itemgetter(1), items))
    if not modes <= _TREE_MODES:
        return "invalid mode", items
    unique = set(names)
    if b"/" in b"\0".join(names) or not _BAD_NAMES.isdisjoint(unique):
        return "invalid name", items
    if len(unique) != len(names):
        return "duplicate entry", items
    keys = names
    if TREE_MODE in modes:  # git sorts a folder as if its name ended in "/"
        keys = [name + b"/" if mode == TREE_MODE else name for name, mode, _ in items]
    if keys != sorted(keys):
        return "entries not sorted", items
    return None, items


class _IncomingCheck:
    """Layout, modes, names, blob sizes and secrets of new trees, each checked once; case
    collisions in the tip's tree only (older trees are never checked out; ``repair`` fixes a
    history that holds one with a commit on top).

    Trees already in the repository passed these checks when they arrived (or were built
    here); directly in a type folder, where the rules are the same wherever they sit, they are
    not walked again, unless they were a root tree (one holding MEMORY.md, moved into a type
    folder). A root tree is
    always read: the root has rules of its own.
    """

    def __init__(
        self,
        objects: Objects,
        known: Known,
        refuse: Refusal,
        settled: Settled | None = None,
        tip: str | None = None,
    ) -> None:
        self.objects = objects
        self.tip = tip  # case collisions matter where files are checked out: the tip's tree
        self.known = known
        self.refuse = refuse
        # what the receiver has already, path by path: not its to refuse
        self.settled: Settled = settled if settled is not None else _NOTHING_SETTLED
        self.trees: set[tuple[str, str]] = set()
        self.paths: set[str] = set()
        self.blobs: set[str] = set()
        self.folds: dict[str, str] = {}
        self.seen: dict[str, set[Entry]] = {}

    def fold(self, name: str) -> str:
        folded = self.folds.get(name)
        if folded is None:
            folded = self.folds[name] = fold_name(name)
        return folded

    def tree(self, tree: str, prefix: str, commit: str) -> None:
        if (tree, prefix) in self.trees:
            return
        self.trees.add((tree, prefix))
        if self.settled.get(prefix[:-1]) == (TREE_MODE, tree):
            return  # the very tree the receiver has at this path
        is_new = _oid(tree) not in self.known
        raw = self.objects.raw_tree(tree) if is_new else None
        problem, items = _tree_problem(tree, raw) if raw is not None else (None, None)
        entries = self.objects.entries(tree, raw, items)
        if not is_new and prefix.count("/") == 1 and INDEX_NAME.encode() not in entries:
            return  # checked as a folder when it arrived: the rules are the same at any depth
        if commit == self.tip:
            self._collisions(entries, prefix, commit)
        # an entry met at this path in another tree passed already: only the others are read
        seen = self.seen.setdefault(prefix, set())
        fresh = set(entries.values()) - seen
        for raw_name, mode, sha in sorted(fresh):
            path = prefix + raw_name.decode("utf-8", "surrogateescape")
            if mode == TREE_MODE:
                if path not in self.settled:
                    _check_folder(path, commit, self.refuse)
                self.tree(_hex(sha), path + "/", commit)
            else:
                self.file(path, mode, _hex(sha), commit)
        seen.update(fresh)
        if problem is not None:  # after the names: a message naming the path beats "malformed"
            raise _malformed(tree, problem)

    def _collisions(self, entries: Entries, prefix: str, commit: str) -> None:
        """Names of the tip's tree that one case-insensitive disk would store as one file."""
        folded: dict[str, str] = {}
        for raw_name in entries:
            name = raw_name.decode("utf-8", "surrogateescape")
            key = self.fold(name)
            if key in folded:
                path, other = prefix + name, prefix + folded[key]
                if not (path in self.settled and other in self.settled):
                    message = f"collides with {other} on case-insensitive disks"
                    raise self.refuse(path, message, commit)
            folded[key] = name

    def file(self, path: str, mode: int, sha: str, commit: str) -> None:
        if self.settled.get(path) == (mode, sha):
            return  # exactly what the receiver has
        if mode != gitindex.FILE_MODE:
            raise self.refuse(path, _mode_problem(mode), commit)
        if path not in self.paths:
            problems = check_path_safety(path)
            if problems:
                raise self.refuse(path, problems[0], commit)
            self.paths.add(path)
        if sha not in self.blobs:
            if _oid(sha) not in self.known:
                kind, data = self.objects.raw(sha)
                if kind != Blob.type_num:
                    raise UnsafePath(f"{sha} is not a blob")
                if blob_id(data) != sha:  # packs copied from a local remote keep their index
                    raise _malformed(sha, "its content does not match its id")
                if len(data) > MAX_FILE_BYTES:
                    limit = f"{MAX_FILE_BYTES:,}"
                    message = f"file is {len(data):,} bytes; the limit is {limit}"
                    raise self.refuse(path, message, commit)
                secret = secret_problem(path, data)
                if secret:  # in any commit: history keeps what a later commit removes
                    raise self.refuse(path, secret, commit)
            self.blobs.add(sha)


def secret_problem(path: str, data: bytes) -> str | None:
    """``secret: ...`` when the blob holds a credential (spec §14), else None. Every new blob
    of every new commit is scanned, MEMORY.md too (it repeats descriptions)."""
    findings = check_secrets(path, data.decode("utf-8", "replace"))
    return f"{findings[0].rule}: {findings[0].message}" if findings else None


def _check_folder(path: str, commit: str, refuse: Refusal) -> None:
    problems = check_path_safety(path)  # any folder may hold memories (Qwen Code 0.24)
    if problems:
        raise refuse(path + "/", problems[0], commit)


def _mode_problem(mode: int) -> str:
    if mode == 0o120000:
        return "is a symlink; memory files must be regular files"
    if mode == 0o160000:
        return "is a submodule (gitlink); memory files must be regular files"
    if mode == 0o100755:
        return "is executable; memory files must be mode 100644"
    return f"has mode {mode:06o}; memory files must be regular files (100644)"


def _check_tip_contents(objects: Objects, known: Known, tip: str, refuse: Refusal) -> None:
    """Files new in the tip tree reach the work tree: readable documents, no conflict markers.
    A known folder's files are all known (they passed when its tree arrived, or were made
    here): its tree is not read."""
    for path, sha in objects.files(tip, known).items():
        if _oid(sha) in known:
            continue
        problem = content_problem(path, objects.blob(sha))
        if problem:
            raise refuse(path, problem, tip)


def content_problem(path: str, data: bytes) -> str | None:
    """Why ``data`` may not be written as memory file ``path``; None when it may.

    Safety only (``core.holdback``: path, size, UTF-8, conflict markers, secrets), the rules
    every local commit follows, so a sync never refuses what a commit here let in, whatever its
    style: MEMORY.md too (Claude Code's is committed as it is, a byte order mark included);
    legacy topic files must also be readable as documents (no byte order mark).
    """
    if path not in LEGACY_TOPIC_FILES:
        from qmem_git.core.holdback import hold_reason

        return hold_reason(path, data)
    text, findings = decode_memory_bytes(path, data)
    errors = [f for f in findings if f.severity == "error"]
    if text is None or errors:
        return errors[0].message if errors else "file cannot be read as UTF-8"
    markers = check_conflict_markers(path, text)
    if markers:
        return f"line {markers[0].line}: {markers[0].message}"
    return None


# --- history ----------------------------------------------------------------------------------


class _Graph:
    """What dulwich.graph.find_merge_base needs from a repository (``object_store[id]``,
    ``parents_provider().get_parents``), answered from :class:`Objects`: its parsed commits
    are cached, and dulwich's ParentsProvider would import ``dulwich.repo`` (~5 ms of a push)
    for grafts and shallow commits a memory repository never has."""

    def __init__(self, objects: Objects) -> None:
        self.objects = objects
        self.object_store = self
        self.shallows: set[ObjectID] = set()

    def __getitem__(self, sha: ObjectID) -> Commit:
        return self.objects.commit(_hex(sha))

    def parents_provider(self) -> _Graph:
        return self

    def get_parents(self, sha: ObjectID, commit: Commit | None = None) -> list[ObjectID]:
        found = self.objects.commit(_hex(sha)) if commit is None else commit
        return list(found.parents)


def merge_base(objects: Objects, ours: str, theirs: str) -> str | None:
    from dulwich.graph import find_merge_base

    bases = find_merge_base(_Graph(objects), [_oid(ours), _oid(theirs)])  # type: ignore[arg-type]
    best = _independent(objects, [_hex(b) for b in bases])
    return min(best) if best else None


def _independent(objects: Objects, bases: list[str]) -> list[str]:
    """``bases`` without those another of them reaches: dulwich's date-ordered search can
    answer an older base beside the best one when committer clocks disagree (git removes
    such redundant bases the same way)."""
    if len(bases) < 2:
        return bases
    return [b for b in bases if not any(o != b and _reaches(objects, o, b) for o in bases)]


def _reaches(objects: Objects, start: str, target: str) -> bool:
    """Whether ``target`` is an ancestor of ``start`` (an exact walk; used only to settle
    between merge bases, which is rare)."""
    stack, seen = [start], set()
    while stack:
        sha = stack.pop()
        if sha == target:
            return True
        if sha not in seen:
            seen.add(sha)
            stack.extend(_hex(parent) for parent in objects.commit(sha).parents)
    return False


def relation(objects: Objects, local: str | None, remote: str | None) -> tuple[str, str | None]:
    """(``same``/``ahead``/``behind``/``diverged``/``empty``, merge base)."""
    if local == remote:
        return ("empty" if local is None else "same"), local
    if remote is None:
        return "ahead", None
    if local is None:
        return "behind", None
    # the usual cases first, without dulwich.graph: one side a few commits past the other (an
    # ancestor of a commit is its only best merge base with it)
    if _reaches_within(objects, local, remote, NEAR_COMMITS):
        return "ahead", remote
    if _reaches_within(objects, remote, local, NEAR_COMMITS):
        return "behind", local
    base = merge_base(objects, local, remote)
    if base == remote:
        return "ahead", base
    if base == local:
        return "behind", base
    return "diverged", base


def _reaches_within(objects: Objects, start: str, target: str, limit: int) -> bool:
    """Whether ``target`` is among the first ``limit`` commits of ``start``'s history (False
    says nothing: :func:`merge_base` decides then)."""
    queue, seen = [start], {start}
    for sha in queue:
        if sha == target:
            return True
        if len(queue) > limit:
            return False
        for parent in objects.info(sha).parents:
            if parent not in seen:
                seen.add(parent)
                queue.append(parent)
    return False


def is_ancestor(objects: Objects, ancestor: str, descendant: str) -> bool:
    return ancestor == descendant or merge_base(objects, ancestor, descendant) == ancestor


def last_change_times(objects: Objects, tip: str, paths: Collection[str]) -> dict[str, int]:
    """Committer time of the commit that last changed each path (first TREESAME parent).

    Each step compares a commit's tree with its parent's (identical subtrees are skipped), so
    a commit costs the size of its change, not the number of paths still looked for.
    """
    result: dict[str, int] = {}
    pending: dict[str, set[str]] = {tip: set(paths)}
    queue = [(-objects.info(tip).time, tip)]
    while queue:
        _, sha = heapq.heappop(queue)
        todo = pending.pop(sha, None)
        if not todo:
            continue
        facts = objects.info(sha)
        for parent in facts.parents:
            if not todo:
                break
            parent_tree = objects.tree_of(parent)
            same = (
                set(todo)
                if parent_tree == facts.tree
                else objects.diff(parent_tree, facts.tree).unchanged(todo)
            )
            if same:
                if parent not in pending:
                    heapq.heappush(queue, (-objects.info(parent).time, parent))
                pending.setdefault(parent, set()).update(same)
                todo -= same
        own = _own_times(objects.commit(sha)) if todo else {}
        for path in todo:
            result[path] = own.get(path, facts.time)
    return result


def touched_between(objects: Objects, old: str, new: str) -> TreeDiff:
    """Every path some commit between ``old`` and ``new`` (reachable from ``new`` only) changed
    against one of its parents: the only paths whose history time can differ between the two."""
    span = only_in(objects_info(objects), [new], [old])
    out = TreeDiff()
    for sha in span.new:
        commit = objects.commit(sha)
        tree = _hex(commit.tree)
        parents = [objects.tree_of(_hex(parent)) for parent in commit.parents]
        for parent_tree in parents or [None]:
            objects.diff(parent_tree, tree, out)
    return out


def _own_times(commit: Commit) -> dict[str, int]:
    """The ``Qmem-Mtime`` times a recover/snapshot/import commit recorded (message read once)."""
    if b"Qmem-Mtime:" not in commit.message:
        return {}
    return parse_commit_message(commit.message.decode("utf-8", "replace")).mtimes


# --- the merge --------------------------------------------------------------------------------


class MergePlan(NamedTuple):
    """The merged file map (path -> blob id and text for new blobs) and what was reconciled."""

    files: dict[str, str]
    new_blobs: dict[str, bytes]
    result: MergeResult
    ours_files: dict[str, str]
    theirs_files: dict[str, str]


def plan_merge(
    objects: Objects, ours: str, theirs: str, base: str | None, *, index_as_is: bool = False
) -> MergePlan:
    """Three-way merge of the two trees; only paths that differ between the sides are read.
    ``index_as_is``: MEMORY.md is merged by lines with the rest (``SyncOptions``)."""
    from qmem_git.core.merge import merge_trees  # only a diverged sync merges

    keep = dict if index_as_is else memory_files
    ours_files = keep(objects.files(ours))
    theirs_files = keep(objects.files(theirs))
    base_files = keep(objects.files(base))
    differing = {
        p for p in {*ours_files, *theirs_files} if ours_files.get(p) != theirs_files.get(p)
    }
    same = {p for p in ours_files if p not in differing}
    both_changed = {
        p
        for p in differing
        if ours_files.get(p) != base_files.get(p) and theirs_files.get(p) != base_files.get(p)
    }
    result = merge_trees(
        _texts(objects, base_files, differing),
        _texts(objects, ours_files, differing),
        _texts(objects, theirs_files, differing),
        ours_times=last_change_times(objects, ours, both_changed & set(ours_files)),
        theirs_times=last_change_times(objects, theirs, both_changed & set(theirs_files)),
        reserved=same,
        index_by_lines=index_as_is,
    )
    files = {p: ours_files[p] for p in same}
    new_blobs: dict[str, bytes] = {}
    for path, text in result.files.items():
        data = text.encode("utf-8", "surrogateescape")
        sha = blob_id(data)
        files[path] = sha
        if sha not in (ours_files.get(path), theirs_files.get(path)):
            problem = content_problem(path, data)
            if problem:
                raise InvalidMemoryFile(
                    f"the merge of {path} would not be a valid memory file ({problem})",
                    "nothing was changed; merge that file by hand in one of the machines",
                )
            new_blobs[sha] = data
    return MergePlan(files, new_blobs, result, ours_files, theirs_files)


def memory_files(files: dict[str, str]) -> dict[str, str]:
    """``files`` without MEMORY.md (the index is rebuilt, never merged or compared)."""
    return {p: sha for p, sha in files.items() if p != INDEX_NAME}


def _texts(objects: Objects, files: dict[str, str], paths: Collection[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for path in paths:
        text = objects.text(files.get(path))
        if text is not None:
            out[path] = text
    return out


# --- writing the work tree --------------------------------------------------------------------


def checkout(
    repo: Repository,
    old: Mapping[str, str],
    new: Mapping[str, str],
    times: Mapping[str, int],
    read: Callable[[str], bytes],
) -> dict[str, str | None]:
    """Make the work tree hold ``new`` (path -> blob id) with mtimes from ``times``.

    Returns the touched paths -> blob id (None = deleted), for the git index.
    """
    leaving = sorted(set(old) - set(new))
    check_writable(repo.root, new, leaving)
    touched: dict[str, str | None] = {}
    for path in leaving:  # first: a file may make way for a folder of the same name
        remove_file(repo.root, path)
        touched[path] = None
    dirs: set[str] = set()
    for path, sha in sorted(new.items()):
        full = os.path.join(repo.root, path)
        mtime_ns = times.get(path)
        wanted_ns = mtime_ns * 1_000_000_000 if mtime_ns is not None else None
        if old.get(path) != sha or not os.path.isfile(full):
            dirs.add(_replace_file(full, read(sha), wanted_ns))
            touched[path] = sha
        elif wanted_ns is not None and os.lstat(full).st_mtime_ns != wanted_ns:
            os.utime(full, ns=(wanted_ns, wanted_ns))
            touched[path] = sha
    for directory in sorted(dirs):
        fsync_dir(directory)
    return touched


def _replace_file(path: str, data: bytes, mtime_ns: int | None) -> str:
    """Temp file, mtime, rename; returns the folder (fsynced once per checkout).

    No fsync per file: a file torn by a power cut is invalid or differs from HEAD, and the
    next writer's recovery restores HEAD's version or commits it (``store.recovery``).
    """
    atomic_write(path, data, mtime_ns, durable=False, mode=FILE_MODE_BITS)
    return os.path.dirname(path)


def history_times(objects: Objects, tip: str) -> dict[str, int]:
    """Every file's history time at ``tip`` (MEMORY.md: the tip's own)."""
    memories = [p for p in objects.files(tip) if p != INDEX_NAME]
    times = last_change_times(objects, tip, memories)
    times[INDEX_NAME] = objects.commit(tip).commit_time
    return times


def fast_forward(
    repo: Repository,
    objects: Objects,
    local: str | None,
    remote: str,
    times: dict[str, int] | None = None,
) -> list[str]:
    """Work tree -> branch -> index, in that order (a crash is repaired by recovery).

    Files the new commits did not touch keep their time (it is already their history time);
    only the touched ones are timed from history, so the cost follows what changed.
    ``times``: the clone's, computed while it checked the history.
    """
    old = objects.files(local)
    new = objects.files(remote)
    if times is None:
        memories = [p for p in new if p != INDEX_NAME]
        if local is not None:
            touched_paths = touched_between(objects, local, remote)
            memories = [p for p in memories if touched_paths.differs(p) or old.get(p) != new[p]]
        times = last_change_times(objects, remote, memories)
        times[INDEX_NAME] = objects.commit(remote).commit_time
    with journaled(repo, _sync_record(old, new, local)):  # killed here: the old state
        touched = checkout(repo, old, new, times, objects.blob)
        branch, _ = repo.head(unborn_ok=local is None)  # the caller read ``local`` checked
        if not repo.move_branch(branch, local, remote, "sync: fast-forward"):
            raise _moved_locally()
    update_index(repo, touched, remote)  # an unusable index is left to recovery
    return sorted(p for p in touched if old.get(p) != new.get(p))


def _moved_locally() -> RepoLocked:
    return RepoLocked(
        "the memory branch moved while qmem-git was syncing",
        hint="another program committed in the memory folder; run the sync again",
    )


def commit_merge(
    repo: Repository,
    objects: Objects,
    plan: MergePlan,
    ours: str,
    theirs: str,
    *,
    remote: str,
    identity: Identity,
    host: str,
    now: datetime,
) -> tuple[str, list[str]]:
    """Write the merged files, regenerate MEMORY.md, commit with two parents, move main."""
    commit_time = int(now.timestamp())
    times = _merge_times(objects, plan, theirs, commit_time)
    for data in plan.new_blobs.values():
        repo.add(Blob.from_string(data))
    ours_all = objects.files(ours)
    index_merged = INDEX_NAME in plan.files  # the agent's own MEMORY.md: merged, not rebuilt
    old = ours_all if index_merged else {p: s for p, s in ours_all.items() if p != INDEX_NAME}

    def read(sha: str) -> bytes:
        return plan.new_blobs[sha] if sha in plan.new_blobs else objects.blob(sha)

    record = _sync_record(old, plan.files, ours)
    with journaled(repo, record):  # killed before the branch moved: the old state
        touched = _write_merge(repo, objects, plan, ours, old, times, read, now)
        message = render_commit_message(
            _merge_changeset(plan, touched.changes, remote, theirs), host, touched.changes
        )
        commit = repo.write_commit(touched.tree, [ours, theirs], identity, now, message)
        branch, _ = repo.head()
        if not repo.move_branch(branch, ours, commit, f"merge: {remote}/main"):
            raise _moved_locally()
    update_index(repo, touched.files, commit)
    return commit, sorted(c.path for c in touched.changes)


class _MergeWrite(NamedTuple):
    files: dict[str, str | None]  # touched path -> blob id (None: deleted), for the git index
    changes: list[FileChange]
    tree: str


def _write_merge(
    repo: Repository,
    objects: Objects,
    plan: MergePlan,
    ours: str,
    old: dict[str, str],
    times: Mapping[str, int],
    read: Callable[[str], bytes],
    now: datetime,
) -> _MergeWrite:
    """The merged files and MEMORY.md (regenerated, unless the plan merged it) into the work
    tree; the merge's tree."""
    ours_all = objects.files(ours)
    touched = checkout(repo, old, plan.files, times, read)
    new_files = dict(plan.files)
    if INDEX_NAME not in plan.files:
        new_files[INDEX_NAME] = _write_index(repo, ours_all.get(INDEX_NAME), touched, now)
    changes = _file_changes(ours_all, new_files)
    ours_tree = objects.tree_of(ours)
    assert ours_tree is not None
    # nothing differs from our side (the other side's changes were already here, or an edit
    # won over their forget): the merge commit keeps our tree; build_tree({}) is an empty tree
    updates = {c.path: new_files.get(c.path) for c in changes}
    tree = repo.build_tree(ours_tree, updates) if updates else ours_tree
    return _MergeWrite(touched, changes, tree)


def _write_index(
    repo: Repository, committed: str | None, touched: dict[str, str | None], now: datetime
) -> str:
    """Regenerate MEMORY.md from the merged files; its blob id."""
    index_data = render_index(repo.root).text.encode("utf-8")
    index_sha = repo.add(Blob.from_string(index_data))
    index_path = os.path.join(repo.root, INDEX_NAME)
    if committed != index_sha or not same_content(index_path, index_data):
        mtime_ns = int(now.timestamp()) * 1_000_000_000
        atomic_write(index_path, index_data, mtime_ns, mode=FILE_MODE_BITS)
        touched[INDEX_NAME] = index_sha
    return index_sha


def _sync_record(old: Mapping[str, str], new: Mapping[str, str], parent: str | None) -> Journal:
    """What a sync's checkout changes, journaled first (``store.journal``): killed before the
    branch moves, the next writer puts the old files back instead of committing the fetched
    ones as ``recover``. The work tree equals HEAD here (recovery ran under this lock)."""
    writes = {p: sha for p, sha in new.items() if old.get(p) != sha}
    deletes = sorted(set(old) - set(new))
    return Journal("sync", parent, writes, deletes)


def _merge_times(
    objects: Objects, plan: MergePlan, theirs: str, commit_time: int
) -> dict[str, int]:
    """History mtimes of the merge's files: a file equal to a parent's keeps that lineage's.

    Files equal to ours are already in the work tree with their time (the merge's first-parent
    lineage), so only theirs are timed: they differ from ours, so the walk stops where their
    side changed them.
    """
    from_ours = {p for p, s in plan.files.items() if plan.ours_files.get(p) == s}
    from_theirs = [
        p for p, s in plan.files.items() if p not in from_ours and plan.theirs_files.get(p) == s
    ]
    times = {p: commit_time for p in plan.files if p not in from_ours}
    times.update(last_change_times(objects, theirs, from_theirs))
    return times


def _file_changes(old: Mapping[str, str], new: Mapping[str, str]) -> list[FileChange]:
    changes = []
    for path in sorted({*old, *new}):
        before, after = old.get(path), new.get(path)
        if before != after:
            status = "A" if before is None else "D" if after is None else "M"
            changes.append(FileChange(status, path))
    return changes


def _merge_changeset(
    plan: MergePlan, changes: list[FileChange], remote: str, theirs: str
) -> ChangeSet:
    memory = [c for c in changes if c.path != INDEX_NAME]
    topics = sorted(
        {c.path.split("/", 1)[0] for c in memory if c.path.split("/", 1)[0] in MEMORY_TYPES}
    )
    notes = plan.result.reconciled
    subject = f"{remote}/main into main ({len(memory)} file(s) changed, {len(notes)} reconciled)"
    trailers = [("Qmem-Merged", theirs), ("Qmem-Remote", remote)]
    trailers += [("Qmem-Reconciled", f"{note.kind} {note.path}") for note in notes]
    return ChangeSet(
        op="merge",
        subject=subject,
        topics=tuple(topics),
        added=sum(c.status == "A" for c in memory),
        removed=sum(c.status == "D" for c in memory),
        trailers=tuple(trailers),
    )


# --- push -------------------------------------------------------------------------------------


def push(
    repo: Repository,
    transport: Transport,
    local: str,
    expected: str | None,
    progress: Progress | None,
    timeout: float,
) -> None:
    """Move the remote's ``main`` from ``expected`` to ``local``; RemoteMoved when it moved."""
    here = RepoObjects(repo)
    branch = Ref(transport.branch)

    def update_refs(refs: dict[Ref, ObjectID]) -> dict[Ref, ObjectID]:
        current = refs.get(branch)
        if (current.decode("ascii") if current else None) != expected:
            raise RemoteMoved()
        return {branch: _oid(local)}

    def whole_objects(
        have: Collection[ObjectID], want: Collection[ObjectID]
    ) -> tuple[int, Iterator[WholeObject]]:
        return pack_records(here, want, [sha for sha in have if sha in here])

    for attempt in range(1, LOCKED_PUSH_ATTEMPTS + 1):
        with _network(transport, "pushing to", timeout):
            result = _send_pack(transport, update_refs, whole_objects, progress)
        status = (result.ref_status or {}).get(branch)
        if not status:
            return
        if "cannot lock ref" not in status:
            break
        time.sleep(0.25 * attempt)  # another push holds the remote's main: let it finish
    else:
        raise RemoteError(
            f"the remote's main is locked: {status}",
            "another sync or git push is running there, or one was killed; if none is "
            "running, delete that .lock file, then sync again",
        )
    if _remote_main(transport, timeout) != expected:
        raise RemoteMoved()
    raise RemoteError(
        f"the remote refused the push: {status}",
        "check that the remote accepts pushes to main (receive.denyCurrentBranch, hooks)",
    )


WholeObjects = Callable[
    [Collection[ObjectID], Collection[ObjectID]], tuple[int, Iterator[WholeObject]]
]


def _send_pack(
    transport: Transport,
    update_refs: Callable[[dict[Ref, ObjectID]], dict[Ref, ObjectID]],
    whole_objects: WholeObjects,
    progress: Progress | None,
) -> SendResult | SendPackResult:
    """One push: a local remote's client takes the objects as they are read (stored loose
    there without dulwich's pack modules), a network client as dulwich's pack records."""
    from qmem_git.store.receive import LocalClient

    client = transport.client
    if isinstance(client, LocalClient):
        return client.send_pack(_path_bytes(transport), update_refs, whole_objects)

    def generate_pack_data(
        have: Collection[ObjectID],
        want: Collection[ObjectID],
        *,
        ofs_delta: bool = True,
        progress: Callable[..., None] | None = None,
    ) -> tuple[int, Iterator[UnpackedObject]]:
        del ofs_delta, progress  # whole objects, no deltas: nothing to choose
        count, records = whole_objects(have, want)
        return count, unpacked(records)

    return client.send_pack(
        _path_bytes(transport), update_refs, generate_pack_data, progress=_raw_progress(progress)
    )


def _path_bytes(transport: Transport) -> bytes:
    return transport.path.encode("utf-8")


def _remote_main(transport: Transport, timeout: float) -> str | None:
    """Where the remote's main is now (asked again after a refused push)."""
    with _network(transport, "reading refs of", timeout):
        refs = transport.client.get_refs(_path_bytes(transport)).refs
    value = refs.get(Ref(transport.branch))
    return value.decode("ascii") if value else None


def remote_branches(transport: Transport, timeout: float) -> dict[str, str]:
    """Every branch the remote advertises (name without ``refs/heads/`` -> commit): one ref
    advertisement, under the same caps and time bound as a sync's (``hub show``)."""
    with _network(transport, "reading refs of", timeout):
        refs = transport.client.get_refs(_path_bytes(transport)).refs
    prefix = b"refs/heads/"
    return {
        name[len(prefix) :].decode("utf-8", "replace"): sha.decode("ascii")
        for name, sha in refs.items()
        if name.startswith(prefix) and not name.endswith(b"^{}") and sha
    }


_OPENED: list[Repository] = []


def _open(root: str) -> Repository:
    """A Repository whose object store :func:`locked_writer` closes at the end.

    Packs stay mapped until their store is closed; left to the garbage collector they print
    "Exception ignored" noise at interpreter exit. One writer per process holds the lock, so
    a module-level list is enough.
    """
    repo = Repository(root)
    _OPENED.append(repo)
    return repo


def _close_opened() -> None:
    while _OPENED:
        _OPENED.pop().close()


# --- the whole sync ---------------------------------------------------------------------------


Locker = Callable[[bool], contextlib.AbstractContextManager["RecoveryReport | None"]]


def writer_locker(
    layout: Layout, *, identity: Identity, host: str, now: datetime, lock_timeout: float
) -> Locker:
    """Short tenures of the writer lock (``recover``: run recovery first), one per phase that
    writes: a sync never holds the lock while it waits on the network."""

    def lock(recover: bool) -> contextlib.AbstractContextManager[RecoveryReport | None]:
        return locked_writer(
            layout,
            identity=identity,
            host=host,
            now=now,
            lock_timeout=lock_timeout,
            recover=recover,
            close=False,
        )

    return lock


class _SyncRun(NamedTuple):
    """What every fetch-decide-push round of one sync shares (``reports``: what recovery did
    in each tenure, filled as they come)."""

    layout: Layout
    name: str
    transport_for: Callable[[bool], Transport]
    options: SyncOptions
    result: SyncResult
    identity: Identity
    host: str
    now: datetime
    progress: Progress | None
    lock: Locker
    reports: list[RecoveryReport]

    @contextlib.contextmanager
    def tenure(self, recover: bool) -> Iterator[None]:
        with self.lock(recover) as report:
            if report is not None:
                self.reports.append(report)
            yield


def sync_remote(
    layout: Layout,
    name: str,
    transport_for: Callable[[bool], Transport],
    options: SyncOptions,
    *,
    identity: Identity,
    host: str,
    now: datetime,
    lock: Locker,
    progress: Progress | None = None,
) -> tuple[SyncResult, RecoveryReport | None]:
    """The sync loop: fetch and check without the writer lock, apply under it (HEAD read
    again there), push without it; the tracking ref and packing in a last short tenure."""
    started = time.monotonic()
    try:
        transport = transport_for(False)
        url = redact_all(transport.url, transport.secrets)
        result = SyncResult(name, url, dry_run=options.dry_run)
        result.before = _open(layout.memory_root).head()[1]
        run = _SyncRun(
            layout, name, transport_for, options, result, identity, host, now, progress, lock, []
        )
        for attempt in range(1, MAX_PUSH_ATTEMPTS + 1):
            result.attempts = attempt
            if _sync_once(run, transport):
                break
        else:
            raise RemoteError(
                f"the remote's main kept moving during {MAX_PUSH_ATTEMPTS} sync attempts",
                "another machine is pushing right now; run the sync again in a moment",
            )
        if not options.dry_run:
            _finish(run)
        _say(progress, f"{result.action} in {time.monotonic() - started:.1f} s")
        return result, (run.reports[0] if run.reports else None)
    finally:
        _close_opened()


def _sync_once(run: _SyncRun, transport: Transport) -> bool:
    """One fetch-decide-push round; False when the push lost a race and must be repeated."""
    _say(run.progress, f"fetching from {run.name}")
    fetched = fetch(_open(run.layout.memory_root), transport, run.progress, run.options.timeout)
    try:
        with run.tenure(not run.options.dry_run):
            pending = _apply(run, fetched)
    finally:
        fetched.quarantine.discard()
    if pending is None:
        return True
    return _push_head(run, *pending)


def _apply(run: _SyncRun, fetched: Fetched) -> tuple[str, str | None] | None:
    """Under the writer lock: decide from the current HEAD, install the checked objects,
    fast-forward or merge; returns (head, what the remote had) to push, or None."""
    result, options = run.result, run.options
    repo = _open(run.layout.memory_root)
    remove_stale_quarantines(repo.git_dir)
    objects = fetched.objects
    remote_head = fetched.remote_head
    result.fetched += fetched.new_commits
    result.remote_head = remote_head
    _check_not_rewound(repo, objects, run.name, remote_head, options.force)
    local = repo.head()[1]
    kind, base = relation(objects, local, remote_head)
    if options.dry_run:
        if options.push and local is not None and kind in ("ahead", "diverged"):
            OutgoingCheck(objects, remote_head).check(local)  # what the real run refuses
        _describe_dry_run(result, objects, kind, local, remote_head, base, options)
        return None
    fetched.quarantine.install()
    repo = _open(repo.root)
    objects = Objects(RepoObjects(repo))
    if remote_head is not None:
        _set_tracking(repo, run.name, remote_head)
    return _act(run, repo, objects, kind, local, remote_head, base)


def _act(
    run: _SyncRun,
    repo: Repository,
    objects: Objects,
    kind: str,
    local: str | None,
    remote_head: str | None,
    base: str | None,
) -> tuple[str, str | None] | None:
    """Bring ``main`` and the remote together for ``kind`` (``relation``); the head to push
    (and the remote's) or None."""
    result = run.result
    if kind in ("same", "empty"):
        result.action = "up-to-date" if kind == "same" else "empty"
        result.head = local
        return None
    if kind == "behind":
        assert remote_head is not None
        head = _fast_forward_to(run, repo, objects, local, remote_head)
        if head is None:  # MEMORY.md was current: nothing of ours to push
            return None
    else:
        assert local is not None
        outgoing = OutgoingCheck(objects, remote_head) if run.options.push else None
        if outgoing is not None:  # before any merge: a refusal changes nothing here
            outgoing.check(local)
        head = _merge_if_diverged(run, repo, objects, kind, local, remote_head, base)
        if outgoing is not None and head != local:  # the merge too (two spellings of one name)
            outgoing.check(head)
    if not run.options.push:
        return None
    return head, remote_head


def _fast_forward_to(
    run: _SyncRun, repo: Repository, objects: Objects, local: str | None, remote_head: str
) -> str | None:
    """Fast-forward to the remote; the ``index`` commit to push when MEMORY.md was stale."""
    result = run.result
    _say(run.progress, f"fast-forwarding to {remote_head[:12]}")
    result.changed_paths = fast_forward(repo, objects, local, remote_head)
    result.action = "fast-forward"
    result.head = remote_head
    if run.options.index_as_is:  # the agent's own MEMORY.md, taken as the remote has it
        return None
    index_commit = rebuild_stale_index(
        run.layout, run.name, identity=run.identity, host=run.host, now=run.now
    )
    if index_commit is not None:
        result.index_commit = result.head = index_commit
    return index_commit


def _merge_if_diverged(
    run: _SyncRun,
    repo: Repository,
    objects: Objects,
    kind: str,
    local: str,
    remote_head: str | None,
    base: str | None,
) -> str:
    """The head to push: the merge commit when the histories diverged, else ``local``."""
    result = run.result
    head = local
    if kind == "diverged":
        assert remote_head is not None
        _say(run.progress, f"merging {run.name}/main")
        plan = plan_merge(objects, local, remote_head, base, index_as_is=run.options.index_as_is)
        head, changed = commit_merge(
            repo,
            objects,
            plan,
            local,
            remote_head,
            remote=run.name,
            identity=run.identity,
            host=run.host,
            now=run.now,
        )
        result.merge_commit = head
        result.reconciled += list(plan.result.reconciled)
        result.changed_paths = changed
    result.action = "merged" if result.merge_commit else "pushed"
    result.head = head
    if not run.options.push:
        result.action = "merged" if result.merge_commit else "ahead"
    return head


def _push_head(run: _SyncRun, head: str, remote_head: str | None) -> bool:
    """Push ``head`` over ``remote_head`` (without the writer lock: objects never change);
    False when the remote moved meanwhile."""
    _say(run.progress, f"pushing {head[:12]} to {run.name}")
    repo = _open(run.layout.memory_root)
    try:
        push(repo, run.transport_for(True), head, remote_head, run.progress, run.options.timeout)
    except RemoteMoved:
        _say(run.progress, f"{run.name} moved meanwhile; fetching again")
        return False
    result = run.result
    result.pushed = True
    result.remote_head = head
    return True


def _finish(run: _SyncRun) -> None:
    """The tracking ref of what was pushed, and packing, in one short tenure of the lock."""
    with run.tenure(False):
        repo = _open(run.layout.memory_root)
        if run.result.pushed and run.result.remote_head is not None:
            _set_tracking(repo, run.name, run.result.remote_head)
        run.result.packed = pack_objects(repo, LOOSE_OBJECTS_TO_PACK)


def rebuild_stale_index(
    layout: Layout, name: str, *, identity: Identity, host: str, now: datetime
) -> str | None:
    """One ``index`` commit when the fast-forwarded MEMORY.md is stale; its id, else None.

    MEMORY.md is generated, never merged (ARCHITECTURE §3), but a commit made on another
    machine with plain git may not have regenerated it; right after the fast-forward, under the
    same lock, it is rebuilt from the files (whose times now come from history).
    """
    from qmem_git.store.repo import apply_changeset

    cs = ChangeSet("index", f"rebuild MEMORY.md after fast-forward from {name}")
    return apply_changeset(layout, cs, identity=identity, host=host, now=now).commit


def _describe_dry_run(
    result: SyncResult,
    objects: Objects,
    kind: str,
    local: str | None,
    remote_head: str | None,
    base: str | None,
    options: SyncOptions,
) -> None:
    """What the sync would do, computed from the quarantine (which is then thrown away);
    without ``push`` local commits stay ``ahead``, as the real run leaves them."""
    result.head = local
    ahead = "pushed" if options.push else "ahead"
    names = {"same": "up-to-date", "empty": "empty", "behind": "fast-forward", "ahead": ahead}
    result.action = names.get(kind, "merged")
    if kind == "behind":
        assert remote_head is not None
        old, new = objects.files(local), objects.files(remote_head)
        result.changed_paths = sorted(p for p in {*old, *new} if old.get(p) != new.get(p))
    if kind == "diverged":
        assert local is not None and remote_head is not None
        plan = plan_merge(objects, local, remote_head, base, index_as_is=options.index_as_is)
        result.reconciled = list(plan.result.reconciled)
        ours = plan.ours_files
        result.changed_paths = sorted(
            p for p in {*ours, *plan.files} if ours.get(p) != plan.files.get(p)
        )


def _check_not_rewound(
    repo: Repository, objects: Objects, name: str, remote_head: str | None, force: bool
) -> None:
    """Refuse a remote whose main no longer contains what we last saw there (unless forced)."""
    seen = _read_ref(repo, Ref(tracking_ref(name)))
    if seen is None or force:
        return
    last = seen.decode("ascii")
    if remote_head is not None and is_ancestor(objects, last, remote_head):
        return
    now_at = remote_head[:12] if remote_head else "nothing (branch deleted)"
    raise QmemError(
        f"{name}/main was rewound or force-pushed: it was at {last[:12]}, now at {now_at}; "
        "syncing would drop commits",
        "nothing was changed; check the remote, or run `qmem-git sync --force` to merge "
        "with what the remote holds now",
    )


def _read_ref(repo: Repository, name: Ref) -> bytes | None:
    try:
        value: bytes = repo.refs[name]
    except KeyError:
        return None
    return value


def _set_tracking(repo: Repository, name: str, sha: str) -> None:
    """Move the tracking ref (fsynced, with its reflog line) unless it is there already, as
    ``git fetch`` leaves an unchanged one alone: a push would otherwise flush it twice."""
    ref = Ref(tracking_ref(name))
    if _read_ref(repo, ref) != _oid(sha):
        repo.refs.set_if_equals(ref, None, _oid(sha), message=b"qmem-git sync")


def _say(progress: Progress | None, text: str) -> None:
    if progress is not None:
        progress(text)


def pack_objects(repo: Repository, minimum: int = 1) -> int:
    """Pack the loose objects once there are ``minimum`` of them (automatic gc is off); fold
    packs together when they pile up (each fetch adds one), whether or not any were loose.
    Returns how many objects were packed (0: none)."""
    from qmem_git.store.packcheck import damaged_packs

    try:
        loose = count_loose(repo.objects_dir, minimum) >= minimum
        if not loose and _count_packs(repo.objects_dir) <= REPACK_THRESHOLD:
            return 0  # the common case: dulwich's store (and its modules) stay unopened
        store = repo.objects
        try:
            packed = pack_loose(store, repo.objects_dir) if loose else 0
            packs = store.packs
            if len(packs) > REPACK_THRESHOLD:
                _fold_small_packs(store, packs)
            return packed
        finally:
            close_store(store)
    finally:
        damaged_packs(repo.git_dir)  # the fetched packs and those just made, checked now


def _count_packs(objects_dir: str) -> int:
    """How many packs (``.idx`` files) ``objects_dir`` holds, as dulwich would list them."""
    try:
        names = os.listdir(os.path.join(objects_dir, "pack"))
    except OSError:
        return 0
    return sum(name.startswith("pack-") and name.endswith(".idx") for name in names)


def pack_loose(store: DiskObjectStore, objects_dir: str, prune: bool = True) -> int:
    """Write the loose objects into one new pack, then delete them; their count.

    dulwich's ``pack_loose_objects`` first compares the new pack's name with every existing
    pack's, computed by hashing the id of every object those packs hold: on each sync, a cost
    that grew with the history. Here the name (the same hash over the new objects' ids) is
    looked up as a file. Written as C git does: .pack, then .idx, each durable, then renamed
    (``write_pack`` writes each through a GitFile, which fsyncs it before its own rename; a
    second fsync here cost two more disk flushes per sync).
    """
    import hashlib

    from dulwich.pack import write_pack

    from qmem_git.store.loose import loose_ids, read_loose

    paths: list[str] = []
    found: list[ShaFile] = []
    for sha in loose_ids(objects_dir):
        obj = read_loose(objects_dir, sha, MAX_INCOMING_PACK_BYTES)
        if obj is not None:  # else damaged (or not a file): the full store's to judge
            found.append(obj)
            paths.append(os.path.join(objects_dir, sha[:2], sha[2:]))
    if not found:
        return 0
    pack_dir = os.path.join(objects_dir, "pack")
    os.makedirs(pack_dir, exist_ok=True)
    digest = hashlib.sha1(b"".join(sorted(obj.sha().digest() for obj in found))).hexdigest()
    final = os.path.join(pack_dir, "pack-" + digest)
    if not os.path.exists(final + ".idx"):
        from qmem_git.store.recovery import TEMP_PACK_PREFIX  # the next writer removes one left

        temp = os.path.join(pack_dir, TEMP_PACK_PREFIX + os.urandom(6).hex())
        try:
            write_pack(temp, found, store.object_format)  # each file fsynced (dulwich's GitFile)
            for suffix in (".pack", ".idx"):
                os.replace(temp + suffix, final + suffix)
        finally:
            for suffix in (".pack", ".idx"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temp + suffix)
        fsync_dir(pack_dir)
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    if prune:  # emptied folders go, as git prune-packed's: the next count lists fewer
        for folder in {os.path.dirname(path) for path in paths}:
            with contextlib.suppress(OSError):  # not empty
                os.rmdir(folder)
    return len(found)


def _fold_small_packs(store: DiskObjectStore, packs: list[Pack]) -> None:
    """Write the objects of every pack but the largest (a clone's history) into one, then
    remove those packs. dulwich's ``repack`` holds every object of the repository in memory
    at once (hundreds of MiB on a long history); here they stream one at a time and the
    history's pack is not read."""
    from dulwich.pack import full_unpacked_object

    packs = sorted(packs, key=len)[:-1]
    ids = sorted({sha for pack in packs for sha in pack})
    folded = store.add_pack_data(len(ids), (full_unpacked_object(store[sha]) for sha in ids))
    kept = folded.data.filename if folded is not None else None
    names = [pack.data.filename for pack in packs]
    close_store(store)
    for name in names:
        if name == kept:  # the same objects as before: already one of them
            continue
        base = os.path.join(store.pack_dir, name[: -len(".pack")])
        for suffix in (".idx", ".rev", ".bitmap", ".pack"):  # the index first, as git does
            with contextlib.suppress(FileNotFoundError):
                os.unlink(base + suffix)


def estimate_loose(objects_dir: str, folders: int) -> int:
    """How many loose objects ``objects_dir`` holds, estimated from the first ``folders`` of
    its 256 (as C git's ``gc --auto`` does from one): ids are uniformly spread."""
    count = 0
    for n in range(folders):
        with contextlib.suppress(OSError):  # absent: none there
            count += len(os.listdir(os.path.join(objects_dir, f"{n:02x}")))
    return count * 256 // folders


def count_loose(objects_dir: str, enough: int) -> int:
    """How many loose objects ``objects_dir`` holds, counted up to ``enough`` at least."""
    count = 0
    for name in os.listdir(objects_dir):
        if count >= enough:
            break
        if len(name) == 2:
            with contextlib.suppress(OSError):  # not a folder
                count += len(os.listdir(os.path.join(objects_dir, name)))
    return count


# --- clone ------------------------------------------------------------------------------------


def adopt_remote(
    layout: Layout,
    name: str,
    transport_for: Callable[[bool], Transport],
    options: SyncOptions,
    *,
    identity: Identity,
    host: str,
    now: datetime,
    lock: Locker,
    progress: Progress | None = None,
) -> SyncResult:
    """Make an empty local store hold the remote's history (clone).

    The fetch runs without the writer lock; taking the remote's history happens under it.
    When the remote's MEMORY.md is stale, one ``index`` commit rebuilds it and is pushed.
    """
    started = time.monotonic()
    try:
        transport = transport_for(False)
        url = redact_all(transport.url, transport.secrets)
        result = SyncResult(name, url, attempts=1)
        run = _SyncRun(
            layout, name, transport_for, options, result, identity, host, now, progress, lock, []
        )
        _adopt(run, transport)
    finally:
        _close_opened()
    _say(progress, f"{result.action} in {time.monotonic() - started:.1f} s")
    return result


def _adopt(run: _SyncRun, transport: Transport) -> None:
    result = run.result
    repo = _open(run.layout.memory_root)
    result.before = repo.head()[1]
    _say(run.progress, f"fetching from {run.name}")
    fetched = fetch(repo, transport, run.progress, run.options.timeout, clone=True)
    try:
        with run.tenure(False):
            _take_history(run, fetched)
    finally:
        fetched.quarantine.discard()
    if result.action == "empty":
        return
    if result.index_commit is not None and run.options.push:
        _push_index_after_clone(run)
    _finish(run)


def _take_history(run: _SyncRun, fetched: Fetched) -> None:
    """Under the lock: install the fetched objects and check out the remote's main."""
    result, layout = run.result, run.layout
    repo = _open(layout.memory_root)
    remove_stale_quarantines(repo.git_dir)
    if repo.head()[1] != result.before:
        raise _moved_locally()
    result.fetched = fetched.new_commits
    result.remote_head = remote_head = fetched.remote_head
    fetched.quarantine.install()
    if remote_head is None:
        result.action = "empty"
        return
    repo = _open(layout.memory_root)
    objects = Objects(repo.objects)
    result.changed_paths = fast_forward(repo, objects, result.before, remote_head, fetched.times)
    _set_tracking(repo, run.name, remote_head)
    result.action = "cloned"
    result.head = remote_head
    if run.options.index_as_is:  # the agent's own MEMORY.md, taken as the remote has it
        return
    result.index_commit = rebuild_stale_index(
        layout, run.name, identity=run.identity, host=run.host, now=run.now
    )
    if result.index_commit is not None:
        result.head = result.index_commit


def _push_index_after_clone(run: _SyncRun) -> None:
    """Push the clone's ``index`` commit; a remote that moved meanwhile gets it next sync."""
    result = run.result
    assert result.head is not None
    repo = _open(run.layout.memory_root)
    try:
        push(
            repo,
            run.transport_for(True),
            result.head,
            result.remote_head,
            run.progress,
            run.options.timeout,
        )
    except RemoteMoved:
        return
    except RemoteError as exc:
        raise RemoteError(
            f"cloned, but pushing the rebuilt MEMORY.md failed: {exc.message}",
            "the clone is complete; `qmem-git sync` pushes the rebuilt index later",
        ) from exc
    result.pushed = True
    result.remote_head = result.head


@contextlib.contextmanager
def locked_writer(
    layout: Layout,
    *,
    identity: Identity,
    host: str,
    now: datetime,
    lock_timeout: float,
    recover: bool = True,
    close: bool = True,
) -> Iterator[RecoveryReport | None]:
    """The writer lock and its tenure, with recovery first (so the work tree equals HEAD);
    ``close``: close the repositories this module opened, at the end."""
    from qmem_git.store import locks, recovery

    with locks.writer_tenure(layout, lock_timeout):
        try:
            report = None
            if recover:
                report, _ = recovery.recover_for_write(
                    layout, identity=identity, host=host, now=now
                )
            yield report
        finally:
            if close:
                _close_opened()


def tree_has_memories(layout: Layout) -> bool:
    """True when HEAD holds anything but MEMORY.md."""
    repo = Repository(layout.memory_root)
    objects = Objects(repo.objects)
    try:
        return any(p != INDEX_NAME for p in objects.files(repo.head()[1]))
    finally:
        close_store(repo.objects)
