"""Reading the memory repository's history with dulwich: log, revisions, diffs, blobs.

Everything here returns dataclasses and never prints. ``log`` reads each commit's operation,
topics and changed paths from its message (subject, ``A/M/D path`` lines, ``Qmem-*`` trailers)
because diffing trees for every listed commit is slow (ARCHITECTURE §6). The message is trusted
only for a commit that looks like ours and unmodified (:func:`_trusted`); commits made by other
tools, and ours after an amend or rebase, get their paths from a tree diff against the first
parent. Whether a commit changed one path (``history``, undo's conflict check) has one rule,
:meth:`History.changed`: its blob differs from every parent's.

History order follows ``git log``'s default: every parent is walked (merged-in operations are
listed too) and commits come out newest committer date first.
"""

from __future__ import annotations

import heapq
import os
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from types import TracebackType

from dulwich.errors import NotGitRepository, NotTreeError
from dulwich.object_store import BaseObjectStore, iter_tree_contents, tree_lookup_path
from dulwich.objects import Blob, Commit, ObjectID, ShaFile, Tag, valid_hexsha
from dulwich.refs import Ref
from dulwich.repo import Repo

from qmem_git.core.changes import CommitInfo, FileChange, parse_commit_message
from qmem_git.core.unidiff import colorize, render_file_diff
from qmem_git.errors import QmemError, RepoCorrupt, UsageError
from qmem_git.store.relocate import repository
from qmem_git.store.repo import close_store
from qmem_git.store.walk import read_if_regular

__all__ = [
    "DiffResult",
    "FileDiff",
    "History",
    "LogEntry",
    "ShowResult",
    "colorize",
    "diff_revs",
    "file_history",
    "is_commit_id",
    "open_history",
    "read_log",
    "resolve_rev",
    "show_commit",
    "touches",
]

MAIN_REF = b"refs/heads/main"
SHORT = 7
_GITLINK = 0o160000
_FILE_MODE = 0o100644
_Change = tuple[str, str, "bytes | None", "bytes | None", tuple[int, int]]
_REV = re.compile(r"^(?P<base>[^~^]+)(?P<ops>(?:[~^][0-9]*)*)$")
_STEP = re.compile(r"([~^])([0-9]*)")
_HEX = re.compile(r"^[0-9a-fA-F]{4,40}$")
_FULL_ID = 40
_COMMIT_ID = re.compile(r"^[0-9a-f]{40}$")
_REV_HINT = "use a commit id from `qmem-git log` (4+ hex digits), HEAD, HEAD~N, HEAD^ or main~N"


@dataclass(frozen=True)
class LogEntry:
    """One commit as ``log`` shows it; ``time``/``tz`` are committer time and UTC offset (s)."""

    commit: str
    parents: tuple[str, ...]
    author: str
    time: int
    tz: int
    info: CommitInfo

    @property
    def short(self) -> str:
        return self.commit[:SHORT]

    @property
    def op(self) -> str | None:
        return self.info.op

    @property
    def subject(self) -> str:
        return self.info.subject

    @property
    def is_merge(self) -> bool:
        return len(self.parents) > 1

    def date(self) -> datetime:
        """Committer time in the committer's own offset (what ``git log`` prints)."""
        return datetime.fromtimestamp(self.time, timezone(timedelta(seconds=self.tz)))

    def as_dict(self) -> dict[str, object]:
        """JSON-ready fields for ``--json`` output (stable keys)."""
        info = self.info
        return {
            "commit": self.commit,
            "short": self.short,
            "parents": list(self.parents),
            "author": self.author,
            "time": self.time,
            "tz": self.tz,
            "date": self.date().isoformat(),
            "subject": info.subject,
            "op": info.op,
            "session": info.session,
            "host": info.host,
            "topics": list(info.topics),
            "added": info.added,
            "removed": info.removed,
            "changes": [{"status": c.status, "path": c.path} for c in info.changes],
            "trailers": [[key, value] for key, value in info.trailers],
        }


@dataclass(frozen=True)
class FileDiff:
    """One changed file between two trees; a ``None`` text means the file is absent there."""

    path: str
    status: str  # "A", "M" or "D"
    old_text: str | None
    new_text: str | None
    old_id: str = ""
    new_id: str = ""
    binary: bool = False
    old_mode: int = 0  # git's file mode on each side (0: absent); e.g. 0o100755 after chmod +x
    new_mode: int = 0

    def as_dict(self) -> dict[str, object]:
        found: dict[str, object] = {"path": self.path, "status": self.status}
        if self.old_mode and self.new_mode and self.old_mode != self.new_mode:
            found["old_mode"], found["new_mode"] = f"{self.old_mode:o}", f"{self.new_mode:o}"
        return {**found, "binary": self.binary}


@dataclass(frozen=True)
class DiffResult:
    """Changed files plus the git-style unified diff text (uncoloured)."""

    files: list[FileDiff] = field(default_factory=list)
    text: str = ""
    old_commit: str | None = None
    new_commit: str | None = None


@dataclass(frozen=True)
class ShowResult:
    """One commit, its full message and the diff it introduced (against its first parent)."""

    entry: LogEntry
    diff_text: str
    files: list[FileDiff] = field(default_factory=list)
    message: str = ""


def is_commit_id(text: str) -> bool:
    """A whole commit id as :meth:`History.resolve` returns it (40 lowercase hex digits)."""
    return _COMMIT_ID.match(text) is not None


def touches(info: CommitInfo, path: str) -> bool:
    """True when a commit's changed paths include ``path`` or lie below it (a directory)."""
    prefix = path.strip("/")
    if prefix in ("", "."):
        return True
    return any(p == prefix or p.startswith(prefix + "/") for p in info.paths)


class History:
    """An open memory repository for reading; use as a context manager to close it."""

    def __init__(self, memory_root: str) -> None:
        self.root = memory_root
        self._git_dir = repository(memory_root)
        self._repo = _open_repo(memory_root, self._git_dir)
        self._store = self._repo.object_store
        self._commits: dict[bytes, Commit] = {}

    def __enter__(self) -> History:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        close_store(self._repo)  # a damaged pack must not hide the RepoCorrupt being raised

    def _opener(self) -> BaseObjectStore:
        return self._store

    def _head_branch(self) -> bytes | None:
        try:
            names, _ = self._repo.refs.follow(Ref(b"HEAD"))
        except Exception:
            return None
        return bytes(names[-1]) if names else None

    # -- refs and revisions -------------------------------------------------------------

    def head(self) -> str | None:
        """The tip of ``main`` (or of HEAD when main is missing); None in an empty repo.

        A ``main`` missing, empty or garbled in a repository with history is BranchLost
        (exit 6, ``store.branchref``), never an empty history.
        """
        from qmem_git.store import branchref

        sha = self._ref(MAIN_REF) or self._ref(b"HEAD")
        if sha is None:
            if self._head_branch() in (MAIN_REF, None):  # HEAD on an orphan branch: new
                opener = self._opener
                branchref.check_unborn(self._git_dir, self._repo.refs, opener, Ref(MAIN_REF))
            return None
        if not valid_hexsha(sha):
            problem = f"holds {sha[:40].decode('ascii', 'replace')!r}, not a commit id"
            refs = self._repo.refs
            raise branchref.lost_branch(self._git_dir, refs, self._opener, Ref(MAIN_REF), problem)
        return sha.decode("ascii")

    def resolve(self, rev: str) -> str:
        """Full commit id for ``rev``: hex (≥4 digits, unique), HEAD, main, refs, ``~N``, ``^N``."""
        match = _REV.match(rev.strip())
        if not match:
            raise _unknown(rev)
        sha = self._resolve_base(rev, match.group("base"))
        for kind, digits in _STEP.findall(match.group("ops")):
            sha = self._step(rev, sha, kind, digits)
        return sha.decode("ascii")

    def _resolve_base(self, rev: str, base: str) -> bytes:
        if base in ("HEAD", "@"):
            head = self.head()
            if head is None:
                raise _no_commits()
            return head.encode("ascii")
        for name in _ref_candidates(base):
            sha = self._ref(name)
            if sha is not None:
                return self._peel(sha)
        if _HEX.match(base):
            return self._by_prefix(rev, base.lower())
        raise _unknown(rev)

    def _step(self, rev: str, sha: bytes, kind: str, digits: str) -> bytes:
        count = int(digits) if digits else 1
        if kind == "^":
            if count == 0:
                return sha
            parents = self._commit(sha).parents
            if count > len(parents):
                raise _past_root(rev)
            return bytes(parents[count - 1])
        for _ in range(count):
            parents = self._commit(sha).parents
            if not parents:
                raise _past_root(rev)
            sha = bytes(parents[0])
        return sha

    def _by_prefix(self, rev: str, prefix: str) -> bytes:
        if len(prefix) == _FULL_ID:  # a whole id needs no scan, only a lookup
            return self._by_full_id(rev, prefix.encode("ascii"))
        matches = {sha for sha in self._ids_with_prefix(prefix) if self._is_commit(sha)}
        if len(matches) > 1:
            raise _ambiguous(rev, sorted(matches))
        if not matches:
            raise _unknown(rev)
        return matches.pop()

    def _ids_with_prefix(self, prefix: str) -> list[bytes]:
        """Every object id starting with ``prefix``; RepoCorrupt (exit 6) when a pack index is
        damaged (dulwich raises struct.error, ValueError, ... while it loads one)."""
        try:
            return [bytes(sha) for sha in self._store.iter_prefix(prefix.encode("ascii"))]
        except KeyError:
            return []
        except Exception as err:
            raise _corrupt(f"the object store is damaged ({_why(err)})") from err

    def _by_full_id(self, rev: str, sha: bytes) -> bytes:
        """A 40-hex commit id: unknown when absent or not a commit, RepoCorrupt when damaged."""
        try:
            present = ObjectID(sha) in self._store
        except Exception as err:
            raise _corrupt(f"the object store is damaged ({_why(err)})") from err
        if not present or not self._is_commit(sha):
            raise _unknown(rev)
        return sha

    def _is_commit(self, sha: bytes) -> bool:
        return isinstance(self._object(sha), Commit)

    def _ref(self, name: bytes) -> bytes | None:
        try:
            return bytes(self._repo.refs[Ref(name)])
        except KeyError:
            return None

    def _peel(self, sha: bytes) -> bytes:
        obj = self._object(sha)
        while isinstance(obj, Tag):
            obj = self._object(obj.object[1])
        return bytes(obj.id)

    # -- objects ------------------------------------------------------------------------

    def _object(self, sha: bytes) -> ShaFile:
        """The object, or RepoCorrupt (exit 6): dulwich raises KeyError when it is missing and
        zlib.error, ObjectFormatException, ChecksumMismatch, ... when it is damaged."""
        name = sha.decode("ascii", "replace")
        try:
            return self._store[ObjectID(sha)]
        except KeyError as err:
            raise _corrupt(f"object {name} is missing") from err
        except Exception as err:
            raise _corrupt(f"object {name} is damaged ({_why(err)})") from err

    def _commit(self, sha: bytes) -> Commit:
        cached = self._commits.get(sha)
        if cached is not None:
            return cached
        obj = self._object(sha)
        if not isinstance(obj, Commit):
            raise _unknown(sha.decode("ascii", "replace"))
        self._commits[sha] = obj
        return obj

    def blob(self, rev: str | None, path: str) -> bytes | None:
        """File content at a commit (``rev`` already resolved), None when absent there."""
        return self._blob_in_tree(self._tree_of(rev), path)

    def is_symlink(self, rev: str | None, path: str) -> bool:
        """True when ``path`` is a symlink at ``rev``: its blob is a link target, not content."""
        found = self._tree_entry(self._tree_of(rev), path)
        return found is not None and stat.S_ISLNK(found[0])

    def changed(self, rev: str, path: str) -> bool:
        """Whether commit ``rev`` changed ``path``: its blob differs from every parent's.

        Undo's conflict check (``history`` applies the same rule, :meth:`_touches`, with the
        file lines standing in for the tree diff). For a plain commit it is the
        diff against its parent (the empty tree for a root commit). A merge changed a path only
        when it resolved it to a version no parent had, as git's history simplification sees
        it: a merge that kept one side's version brought that version in, it did not write it.
        """
        commit = self._commit(rev.encode("ascii"))
        mine = self._blob_id_in_tree(bytes(commit.tree), path)
        trees: list[bytes | None] = [bytes(self._commit(bytes(p)).tree) for p in commit.parents]
        return all(mine != self._blob_id_in_tree(tree, path) for tree in trees or [None])

    def _tree_of(self, sha: str | None) -> bytes | None:
        return bytes(self._commit(sha.encode("ascii")).tree) if sha else None

    def _blob_in_tree(self, tree: bytes | None, path: str) -> bytes | None:
        blob_id = self._blob_id_in_tree(tree, path)
        return self._blob_data(blob_id) if blob_id else None

    def _blob_id_in_tree(self, tree: bytes | None, path: str) -> bytes | None:
        found = self._tree_entry(tree, path)
        return found[1] if found is not None else None

    def _tree_entry(self, tree: bytes | None, path: str) -> tuple[int, bytes] | None:
        """(mode, blob id) of a file or symlink at ``path``; None when absent or not a file."""
        found = self._lookup(tree, path)
        return found if found is not None and _is_file(found[0]) else None

    def _lookup(self, tree: bytes | None, path: str) -> tuple[int, bytes] | None:
        """(mode, id) of the file or folder at ``path`` in ``tree``; None when absent."""
        if tree is None:
            return None
        try:
            mode, sha = tree_lookup_path(self._store.__getitem__, ObjectID(tree), path.encode())
        except (KeyError, NotTreeError):
            return None
        return mode, bytes(sha)

    def _blob_data(self, sha: bytes) -> bytes:
        obj = self._object(sha)
        if not isinstance(obj, Blob):
            raise _corrupt(f"object {sha.decode('ascii')} is not a file")
        return bytes(obj.as_raw_string())

    def tree_files(self, rev: str | None) -> dict[str, str]:
        """Every file in a commit's tree: relative path -> blob id (empty for None)."""
        tree = self._tree_of(rev)
        if tree is None:
            return {}
        return {
            # surrogateescape: the same str as the file system's name for it
            entry.path.decode("utf-8", "surrogateescape"): entry.sha.decode("ascii")
            for entry in iter_tree_contents(self._store, ObjectID(tree))
            if entry.mode is not None and entry.mode != _GITLINK and entry.path and entry.sha
        }

    # -- log ------------------------------------------------------------------------------

    def entry(self, rev: str) -> LogEntry:
        """The log entry of one resolved commit id."""
        return self._entry(self._commit(rev.encode("ascii")))

    def message(self, rev: str) -> str:
        """The full commit message of a resolved commit id (for ``show``)."""
        return _decode(self._commit(rev.encode("ascii")).message)

    def _entry(self, commit: Commit) -> LogEntry:
        info = parse_commit_message(_decode(commit.message))
        if not _trusted(commit, info):
            # another tool's commit, or ours rewritten: its file lines (if any) may not match
            # its tree, so diff against the first parent
            parent = bytes(commit.parents[0]) if commit.parents else None
            old_tree = bytes(self._commit(parent).tree) if parent else None
            changes = tuple(self._file_changes(old_tree, bytes(commit.tree)))
            info = info._replace(changes=changes)
        return LogEntry(
            commit=commit.id.decode("ascii"),
            parents=tuple(p.decode("ascii") for p in commit.parents),
            author=_decode(commit.author),
            time=int(commit.commit_time),
            tz=int(commit.commit_timezone),
            info=info,
        )

    def walk(self, starts: Sequence[str], excludes: Sequence[str] = ()) -> Iterator[LogEntry]:
        """Commits reachable from ``starts`` but not from ``excludes``, newest first (git log).

        Like git's revision walk, a commit popped before the excluded side reaches it (clock
        skew) may still be listed.
        """
        queue: list[tuple[int, int, bytes]] = []
        hidden: dict[bytes, bool] = {}
        counter = 0

        def push(sha: bytes, uninteresting: bool) -> None:
            nonlocal counter
            if sha in hidden:
                hidden[sha] = hidden[sha] or uninteresting
                return
            hidden[sha] = uninteresting
            counter += 1
            heapq.heappush(queue, (-int(self._commit(sha).commit_time), counter, sha))

        for rev in excludes:
            push(rev.encode("ascii"), True)
        for rev in starts:
            push(rev.encode("ascii"), False)
        while queue and not all(hidden[item[2]] for item in queue):
            _, _, current = heapq.heappop(queue)
            commit = self._commit(current)
            for parent in commit.parents:
                push(bytes(parent), hidden[current])
            if not hidden[current]:
                yield self._entry(commit)

    def log(
        self,
        *,
        limit: int | None = None,
        op: str | None = None,
        path: str | None = None,
        start: str | None = None,
    ) -> list[LogEntry]:
        """Newest-first operations, filtered by op and/or path (from the message file lines)."""
        head = start or self.head()
        if head is None or (limit is not None and limit <= 0):
            return []
        entries: list[LogEntry] = []
        for entry in self.walk([head]):
            if op is not None and entry.info.op != op:
                continue
            if path is not None and not self._touches(entry, path):
                continue
            entries.append(entry)
            if limit is not None and len(entries) >= limit:
                break
        return entries

    def since(self, rev: str) -> list[LogEntry]:
        """Commits after ``rev`` up to HEAD (``git log rev..HEAD``), newest first."""
        head = self.head()
        return list(self.walk([head], [rev])) if head else []

    def file_history(self, path: str) -> list[LogEntry]:
        """Every commit that created, changed or deleted one file, newest first."""
        path = path.strip("/")
        head = self.head()
        if head is None:
            return []
        return [entry for entry in self.walk([head]) if self._touches(entry, path)]

    def _touches(self, entry: LogEntry, path: str) -> bool:
        """Whether a commit changed the file or folder ``path`` (``log --path``, ``history``).
        File lines answer for a plain commit (ours, trusted; or the tree diff ``_entry`` made).
        A merge not known to be ours counts only when what it holds at ``path`` differs from
        what every parent held, as git's history simplification sees it (see :meth:`changed`):
        a merge that kept one side's version brought it in, it did not write it."""
        if not touches(entry.info, path):
            return False
        commit = self._commit(entry.commit.encode("ascii"))
        if not entry.is_merge or _trusted(commit, entry.info):
            return True
        prefix = path.strip("/")
        if prefix in ("", "."):
            return True
        mine = self._lookup(bytes(commit.tree), prefix)
        parents = [bytes(self._commit(bytes(p)).tree) for p in commit.parents]
        return all(mine != self._lookup(tree, prefix) for tree in parents)

    # -- diffs ----------------------------------------------------------------------------

    def _file_changes(self, old_tree: bytes | None, new_tree: bytes) -> Iterator[FileChange]:
        for diff in self._tree_diff(old_tree, new_tree):
            yield FileChange(diff[0], diff[1])

    def _tree_diff(self, old_tree: bytes | None, new_tree: bytes | None) -> Iterator[_Change]:
        """(status, path, old blob id, new blob id, modes) per changed file, in tree order."""
        for status, raw, old_id, new_id, modes in self._raw_tree_diff(old_tree, new_tree):
            yield status, raw.decode("utf-8", "replace"), old_id, new_id, modes

    def _raw_tree_diff(
        self, old_tree: bytes | None, new_tree: bytes | None
    ) -> Iterator[tuple[str, bytes, bytes | None, bytes | None, tuple[int, int]]]:
        """:meth:`_tree_diff` with each path as the tree stores it (bytes, any encoding)."""
        from dulwich.diff_tree import tree_changes  # lazy: ``log`` of qmem commits never diffs

        old = ObjectID(old_tree) if old_tree else None
        new = ObjectID(new_tree) if new_tree else None
        for change in tree_changes(self._store, old, new):
            before = change.old if change.old and _is_file(change.old.mode) else None
            after = change.new if change.new and _is_file(change.new.mode) else None
            if before is None and after is None:
                continue
            path = (after or before).path  # type: ignore[union-attr]
            status = "A" if before is None else "D" if after is None else "M"
            yield (
                status,
                path or b"",
                bytes(before.sha) if before and before.sha else None,
                bytes(after.sha) if after and after.sha else None,
                (before.mode or 0 if before else 0, after.mode or 0 if after else 0),
            )

    def diff(self, old: str | None, new: str | None) -> list[FileDiff]:
        """Files that differ between two resolved commits (None = the empty tree)."""
        return [
            self._file_diff(status, path, old_id, new_id, modes)
            for status, path, old_id, new_id, modes in self._tree_diff(
                self._tree_of(old), self._tree_of(new)
            )
        ]

    def changes_of(self, rev: str) -> list[FileDiff]:
        """What one commit changed against its first parent (all files for a root commit)."""
        parents = self._commit(rev.encode("ascii")).parents
        return self.diff(parents[0].decode("ascii") if parents else None, rev)

    def changed_paths(self, rev: str) -> list[str]:
        """Paths one commit changed against its first parent, from the trees, never the message.

        A name that is not UTF-8 keeps its bytes as surrogates (``surrogateescape``), so a
        caller can tell it apart rather than act on a look-alike path.
        """
        commit = self._commit(rev.encode("ascii"))
        parent = bytes(self._commit(bytes(commit.parents[0])).tree) if commit.parents else None
        return [
            raw.decode("utf-8", "surrogateescape")
            for _, raw, _, _, _ in self._raw_tree_diff(parent, bytes(commit.tree))
        ]

    def _file_diff(
        self,
        status: str,
        path: str,
        old_id: bytes | None,
        new_id: bytes | None,
        modes: tuple[int, int] = (0, 0),
    ) -> FileDiff:
        old_data = self._blob_data(old_id) if old_id else None
        new_data = self._blob_data(new_id) if new_id else None
        binary = any(data is not None and b"\0" in data for data in (old_data, new_data))
        if old_data is not None and new_data is not None and old_data != new_data:
            # bytes that are not UTF-8 read alike once decoded: say the files differ, as
            # binary ones, rather than print no diff at all
            binary = binary or _text(old_data) == _text(new_data)
        return FileDiff(
            path=path,
            status=status,
            old_text=_text(old_data),
            new_text=_text(new_data),
            old_id=old_id.decode("ascii")[:SHORT] if old_id else "",
            new_id=new_id.decode("ascii")[:SHORT] if new_id else "",
            binary=binary,
            old_mode=modes[0],
            new_mode=modes[1],
        )

    # -- work tree ------------------------------------------------------------------------

    def worktree_file(self, path: str) -> bytes | None:
        """Content of one work-tree file; None when absent, a symlink or not a regular file
        (the store's crash recovery counts all of those as deleted)."""
        return read_if_regular(os.path.join(self.root, path))


# -- module-level API (each opens and closes the repository) ---------------------------------


def open_history(memory_root: str) -> History:
    """Open the memory repository for several reads (ops use this to stay dulwich-free)."""
    return History(memory_root)


def read_log(
    memory_root: str,
    *,
    limit: int | None = None,
    op: str | None = None,
    path: str | None = None,
) -> list[LogEntry]:
    """Newest-first memory operations from ``main``; ``[]`` for a repository without commits.

    ``path`` matches a message file line exactly or as a directory prefix (``user`` or
    ``user/``); ``limit`` counts entries after filtering.
    """
    with History(memory_root) as history:
        return history.log(limit=limit, op=op, path=path)


def resolve_rev(memory_root: str, rev: str) -> str:
    """Full commit id for a revision; ``UsageError`` (exit 2) with a hint when unknown."""
    with History(memory_root) as history:
        return history.resolve(rev)


def show_commit(memory_root: str, rev: str = "HEAD") -> ShowResult:
    """One commit and its diff against its first parent (the empty tree for the root)."""
    with History(memory_root) as history:
        sha = history.resolve(rev)
        files = history.changes_of(sha)
        return ShowResult(history.entry(sha), _render(files), files, history.message(sha))


def diff_revs(memory_root: str, rev_a: str | None = None, rev_b: str | None = None) -> DiffResult:
    """Review changes between revisions.

    - no revision: what the last operation changed (``HEAD^..HEAD``; the root commit is
      compared with the empty tree) — the question a reviewer asks most;
    - ``diff A``: everything that changed since A (``A..HEAD``), e.g. ``diff HEAD~5``;
    - ``diff A B``: ``A..B``;
    - ``rev_b`` alone: the changes introduced by that commit (like ``show``).

    Unlike ``git diff REV`` the work tree is never compared: memory changes are committed by
    every operation, and ``snapshot`` is the tool for uncommitted edits.
    """
    with History(memory_root) as history:
        head = history.head()
        if head is None:
            return DiffResult()
        old, new = _diff_pair(history, head, rev_a, rev_b)
        files = history.diff(old, new)
        return DiffResult(files, _render(files), old, new)


def file_history(memory_root: str, path: str) -> list[LogEntry]:
    """Every commit that touched one memory file (creation and deletion included), newest first.

    Uses the message file lines; commits without them (other tools) are checked by looking
    the path up in the commit's and its parents' trees.
    """
    with History(memory_root) as history:
        return history.file_history(path)


# -- helpers ---------------------------------------------------------------------------------


def _diff_pair(
    history: History, head: str, rev_a: str | None, rev_b: str | None
) -> tuple[str | None, str]:
    if rev_a is not None:
        new = history.resolve(rev_b) if rev_b is not None else head
        return history.resolve(rev_a), new
    new = history.resolve(rev_b) if rev_b is not None else head
    parents = history.entry(new).parents
    return (parents[0] if parents else None), new


def _render(files: list[FileDiff]) -> str:
    return "".join(
        render_file_diff(
            f.path,
            f.old_text,
            f.new_text,
            old_id=f.old_id,
            new_id=f.new_id,
            binary=f.binary,
            old_mode=f"{f.old_mode or _FILE_MODE:o}",
            new_mode=f"{f.new_mode or _FILE_MODE:o}",
        )
        for f in files
    )


def _open_repo(memory_root: str, git_dir: str) -> Repo:
    """dulwich's Repo for ``git_dir`` (``store.relocate.repository``) with ``memory_root``
    as its work tree: never the ``.git`` an agent may have written in the memory root."""
    if not os.path.isdir(git_dir):
        raise _not_a_repo(memory_root)
    try:
        return Repo(controldir=git_dir, worktree=memory_root)
    except NotGitRepository as err:
        raise _not_a_repo(memory_root) from err
    except ValueError as err:  # dulwich reads the config as it opens the repository
        from qmem_git.store.gitconfig import config_damaged

        raise config_damaged(git_dir, err) from err


def _ref_candidates(name: str) -> list[bytes]:
    raw = name.encode("utf-8")
    if raw.startswith(b"refs/"):
        return [raw]
    return [b"refs/heads/" + raw, b"refs/tags/" + raw, b"refs/remotes/" + raw]


def _is_file(mode: int | None) -> bool:
    return mode is not None and (stat.S_ISREG(mode) or stat.S_ISLNK(mode))


def _trusted(commit: Commit, info: CommitInfo) -> bool:
    """Whether a commit's message file lines can stand for its tree diff (ARCHITECTURE §6).

    Our writer stamps one identity and one time as both author and committer. An amend,
    rebase or cherry-pick keeps our message but sets a new committer time (or committer),
    so a commit whose two signatures differ may have a tree its file lines do not describe.
    Not proof (an amend in the same second passes), but free: no tree is read. Our commits
    always list their files (never an empty commit), so a ``Qmem-Op`` trailer without file
    lines was written by hand.
    """
    return (
        info.op is not None
        and bool(info.changes)
        and commit.author == commit.committer
        and commit.author_time == commit.commit_time
        and commit.author_timezone == commit.commit_timezone
    )


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "replace")


def _unknown(rev: str) -> QmemError:
    return UsageError(f"unknown revision {rev!r}", _REV_HINT)


def _ambiguous(rev: str, shas: list[bytes]) -> QmemError:
    listed = ", ".join(s.decode("ascii")[: SHORT + 3] for s in shas[:5])
    return UsageError(f"revision {rev!r} is ambiguous ({listed})", "type more hex digits")


def _past_root(rev: str) -> QmemError:
    return UsageError(f"revision {rev!r} goes past the first commit", "use a smaller N")


def _no_commits() -> QmemError:
    return UsageError("the memory repository has no commits yet", "record a memory first")


def _not_a_repo(root: str) -> QmemError:
    return UsageError(f"{root} is not a memory repository", "run `qmem-git init`")


def _why(err: Exception) -> str:
    return f"{type(err).__name__}: {err}"


def _corrupt(message: str) -> QmemError:
    return RepoCorrupt(message, "run `qmem-git doctor`")
