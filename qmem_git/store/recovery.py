"""Crash recovery, run under the writer lock at the start of every writing command.

A writer's effects happen in the order work tree -> MEMORY.md -> objects -> ref -> git index
(``store.repo``), so after a crash the repo is in one of three states, each repaired here:
files on disk newer than HEAD (committed now as one ``recover`` commit), HEAD newer than the
index (index entries refreshed, nothing committed), or leftovers (temp files, ``.lock`` files,
temp objects: removed). Detection is cheap: one ``lstat`` per memory file compared with the
git index; only files whose stat differs are read and hashed. The full HEAD tree is walked only
when the index was not written by us for the current HEAD (see ``store.gitindex``).

A file that must not be committed (``core.holdback``: a secret, too large, not UTF-8, an
unsafe path, a symlink, still being written) is never moved: it stays where it is, is left
out of the commit (HEAD's version of its path is kept) and is reported.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import datetime
from typing import NamedTuple

from qmem_git.core.changes import ChangeSet, FileChange
from qmem_git.core.codec import parse_document
from qmem_git.core.holdback import BEING_WRITTEN, SYMLINK, hold_reason
from qmem_git.core.model import INDEX_NAME, is_memory_type
from qmem_git.core.paths import Layout
from qmem_git.store import gitindex, journal, locks, survey
from qmem_git.store.gitindex import GitIndex
from qmem_git.store.repo import (
    Identity,
    Repository,
    WorkState,
    apply_changeset,
    blob_id,
    undo_interrupted,
    update_config,
)
from qmem_git.store.walk import behind_link, is_versioned_path, memory_paths, read_if_regular
from qmem_git.store.workdir import without_exec_bits

Validator = Callable[[str, bytes], "str | None"]  # why a file may not be committed, or None
INDEX_REWRITTEN = (
    "MEMORY.md was edited by hand; it is generated from the memory files, so it was rewritten "
    "(edit those files instead)"
)
TEMP_OBJECT_PREFIX = "tmp_obj_qmem_"  # temp objects of qmem-git versions before dulwich wrote them
TEMP_PACK_PREFIX = "tmp_pack_qmem_"  # a pack a sync was writing under the lock when killed


class RecoveryReport(NamedTuple):
    """What recovery repaired; the CLI prints removed locks and held-back files on stderr.

    A NamedTuple like ``store.repo``'s results (cheaper to define than a frozen dataclass).
    """

    commit: str | None = None
    changes: tuple[FileChange, ...] = ()
    held: tuple[tuple[str, str], ...] = ()  # (path, why) left out of every commit
    removed_locks: tuple[str, ...] = ()
    removed_temp_files: tuple[str, ...] = ()
    index_rebuilt: bool = False
    warnings: tuple[str, ...] = ()

    def messages(self) -> list[str]:
        """One line per thing worth telling the user on stderr."""
        lines = [f"removed stale lock file {path}" for path in self.removed_locks]
        lines += list(self.warnings)
        if self.index_rebuilt:
            lines.append("rebuilt the damaged git index of the memory repository")
        if self.commit:
            files = sum(change.path != INDEX_NAME for change in self.changes)
            what = f"{files} uncommitted memory file(s)" if files else "a hand-edited MEMORY.md"
            lines.append(f"committed {what} as {self.commit[:12]} (op recover)")
        return lines

    @property
    def acted(self) -> bool:
        """True when recovery changed anything a user may want to hear about."""
        return bool(self.commit or self.removed_locks or self.removed_temp_files)


class _Found:
    """What the candidates turned out to be: to commit, to delete, to hold back (and why)."""

    def __init__(self) -> None:
        self.writes: dict[str, str] = {}
        self.deletes: list[str] = []
        self.held: dict[str, str] = {}
        self.new: list[str] = []  # written files HEAD does not have
        self.index_stale = False
        self.index_new = False  # MEMORY.md is not in HEAD (a store that never committed it)

    def refuse_new(self, reasons: dict[str, str]) -> None:
        """Move new files that turned out unsafe (name collisions) from writes to held."""
        for rel, reason in reasons.items():
            self.writes.pop(rel, None)
            self.new.remove(rel)
            self.held[rel] = reason


def case_collisions(new: Iterable[str], paths: Collection[str]) -> dict[str, str]:
    """The ``new`` paths a case-insensitive disk would merge with another path, and why
    (``core.names.new_name_collisions`` in the ``rule: message`` shape of the other problems)."""
    from qmem_git.core.names import collision_message, new_name_collisions

    clashes = new_name_collisions(new, paths)
    return {rel: "path-collision: " + collision_message(*pair) for rel, pair in clashes.items()}


def recover(
    layout: Layout,
    *,
    identity: Identity,
    host: str,
    now: datetime,
    problem_of: Validator | None = None,
    quiet_seconds: float = 0.0,
) -> RecoveryReport:
    """Repair what an interrupted writer left; RepoCorrupt (nothing touched) on damaged git data."""
    report, _ = recover_for_write(
        layout,
        identity=identity,
        host=host,
        now=now,
        problem_of=problem_of,
        quiet_seconds=quiet_seconds,
    )
    return report


def recover_for_write(
    layout: Layout,
    *,
    identity: Identity,
    host: str,
    now: datetime,
    problem_of: Validator | None = None,
    commit_changes: bool = True,
    pending: survey.Pending | None = None,
    quiet_seconds: float = 0.0,
) -> tuple[RecoveryReport, WorkState]:
    """:func:`recover`, also returning the scan so the writer's commit needs no second one.

    ``pending``: a survey the caller started under the same lock (``store.survey.start``).
    ``quiet_seconds``: a file changed more recently is held back as still being written
    (``core.holdback.QUIET_SECONDS`` for files an agent writes; 0 holds none back for that).
    """
    rules = _Rules(problem_of or hold_reason, time.time_ns() - int(quiet_seconds * 1e9))
    with Repository(layout.memory_root) as repo:
        return _recover(repo, layout, identity, host, now, rules, commit_changes, pending)


class _Rules(NamedTuple):
    """What keeps a changed file out of the commit: its content, or being newer than ``quiet``."""

    problem_of: Validator
    quiet_ns: int  # files with an mtime after this may still be being written


def _check_packs(git_dir: str) -> None:
    from qmem_git.errors import RepoCorrupt
    from qmem_git.store.packcheck import damaged_packs

    damaged = damaged_packs(git_dir)
    if damaged:
        raise RepoCorrupt(
            f"memory repository is corrupt: pack {damaged[0]} is damaged (its checksum does "
            "not match its content)",
            hint="nothing was written; restore the memory folder from a clone "
            "(qmem-git clone URL) or a backup, or see `git fsck --full` in the memory folder",
        )


def _recover(
    repo: Repository,
    layout: Layout,
    identity: Identity,
    host: str,
    now: datetime,
    rules: _Rules,
    commit_changes: bool,
    pending: survey.Pending | None,
) -> tuple[RecoveryReport, WorkState]:
    started = time.time_ns()  # files are read from here on (WorkState.since_ns)
    _, head = repo.head()
    head_tree = repo.tree_of(head)
    if head_tree is not None:
        repo.load_tree(head_tree)  # a damaged root tree must stop us before we change anything
    _check_packs(repo.git_dir)  # so must a damaged pack, which readers would trip over
    update_config(repo.git_dir, repo.root)  # git warns about deprecated settings on every command
    removed_locks = _remove_stale_locks(repo.git_dir)
    undone = _undo_interrupted(repo, head)
    seen = pending.result() if pending is not None else survey.survey(repo.root)
    if undone is not None and undone[1]:  # the survey may predate the files put back
        seen = survey.survey(repo.root)
    removed_temp = _remove_temp_files(repo, seen.temp_files)
    rebuilt = seen.index is None
    index = GitIndex() if seen.index is None else seen.index
    head_map = None if index.head == head and not rebuilt else repo.flatten(head_tree)
    found = _Found()
    candidates = _candidates(seen, index, head_map)
    for rel in sorted(candidates):
        head_sha = head_map.get(rel) if head_map is not None else repo.lookup(head_tree, rel)
        _classify(repo, rel, head_sha, seen.files, index, found, rules)
    found.refuse_new(case_collisions(found.new, seen.files))
    for rel in seen.links:  # never followed, never committed: said once, where they stand
        if rel.endswith(".md"):
            found.held.setdefault(rel, SYMLINK)
    cuts = {} if seen.cut is None else {survey.NEWEST: seen.cut}
    state = WorkState(_render_files(seen.files, seen.linked), index, cuts, candidates, started)
    warnings = [] if undone is None else [_undone_message(*undone)]
    commit, changes = _commit(layout, found, identity, host, now, state, commit_changes)
    if commit_changes and found.index_stale and not found.index_new and commit is None:
        warnings.append(INDEX_REWRITTEN)
    if commit is None and state.index is not None and (index.changed or index.head != head):
        index.head = head
        with contextlib.suppress(OSError):
            gitindex.write_index(repo.git_dir, index)
    report = RecoveryReport(
        commit=commit,
        changes=tuple(changes),
        held=tuple(sorted(found.held.items())),
        removed_locks=tuple(removed_locks),
        removed_temp_files=tuple(removed_temp),
        index_rebuilt=rebuilt,
        warnings=tuple(warnings),
    )
    return report, state


def clear_interrupted(repo: Repository) -> RecoveryReport:
    """What a killed writer left in a folder whose files are committed as they are
    (``store.asis``, Claude Code's): stale lock files removed, a half-applied write's files put
    back. Nothing is committed and MEMORY.md is not rebuilt: the caller commits as is."""
    removed = _remove_stale_locks(repo.git_dir)
    undone = _undo_interrupted(repo, repo.head()[1])
    warnings = () if undone is None else (_undone_message(*undone),)
    return RecoveryReport(removed_locks=tuple(removed), warnings=warnings)


def _undone_message(op: str, paths: list[str]) -> str:
    put_back = f"put back {', '.join(paths)}" if paths else "no file had changed yet"
    return f"an interrupted {op} was undone: {put_back}"


def _undo_interrupted(repo: Repository, head: str | None) -> tuple[str, list[str]] | None:
    """A ChangeSet a killed writer left half applied (``store.journal``): when the branch
    never moved, put its files back; when it did, the commit was made. (op, paths put back)."""
    record = journal.read(repo.git_dir)
    if record is None:
        return None
    if record is False or record.parent != head:
        journal.end(repo.git_dir)  # unreadable: killed while writing it, before any file
        return None
    paths = undo_interrupted(repo, record)
    journal.end(repo.git_dir)
    return record.op, paths


def _remove_stale_locks(git_dir: str) -> list[str]:
    removed: list[str] = []
    for path in locks.stale_git_locks(git_dir, locks.dead_writer_since(git_dir)):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
            removed.append(path)
    return removed


def _remove_temp_files(repo: Repository, temp_files: list[str]) -> list[str]:
    """Our temp files are only ever created by lock holders, so under the lock they are stale."""
    objects = repo.objects_dir
    paths = list(temp_files)
    for folder, prefix in (
        (objects, TEMP_OBJECT_PREFIX),
        (os.path.join(objects, "pack"), TEMP_PACK_PREFIX),
    ):
        with contextlib.suppress(OSError):
            names = [n for n in os.listdir(folder) if n.startswith(prefix)]
            paths += [os.path.join(folder, n) for n in names]
    removed: list[str] = []
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
            removed.append(path)
    return removed


def changed_paths(root: str) -> set[str]:
    """Paths whose file may differ from HEAD: stat against the git index, as ``git status``
    finds them (one ``lstat`` per file; the HEAD tree only when the index is not ours for
    HEAD). What a snapshot reads, instead of every file; under a writer, what its recovery
    found (``store.workdir.shared_scan``), so the folder is not surveyed twice."""
    from qmem_git.store.workdir import changed_in_scan

    known = changed_in_scan(root)
    if known is not None:
        return set(known)
    with Repository(root) as repo:
        _, head = repo.head()
        seen = survey.survey(repo.root)
        index = GitIndex() if seen.index is None else seen.index
        fresh = seen.index is not None and index.head == head
        return _candidates(seen, index, None if fresh else repo.flatten(repo.tree_of(head)))


class WorkChange(NamedTuple):
    """A memory file whose work-tree content differs from HEAD (``data`` None = deleted)."""

    status: str  # "A", "M" or "D"
    path: str
    data: bytes | None
    old_data: bytes | None


def worktree_changes(root: str, paths: Collection[str] | None = None) -> list[WorkChange]:
    """Memory files that differ from HEAD, listed by the store's one rule (``store.walk``).

    Any-size ``*.md`` files (oversized ones are the caller's to hold back) and dot-files
    count; dot-directories, symlinks and every ``MEMORY.md`` (the top-level one is the
    generated index) do not. Every file read is hashed rather than trusting the git index's
    stat data: it can be stale or unreadable, and a snapshot must not miss an edit.
    ``paths``: look at these only (:func:`changed_paths`), not at every file. Read with
    ``store.repo`` (loose objects without dulwich's pack code), on the branch a commit moves.
    """
    with Repository(root) as repo:
        tree = repo.tree_of(repo.head()[1])
        committed: dict[str, str] | None = None
        if paths is None:  # every file: HEAD's, bar what a sparse checkout left out, and disk's
            sparse = _left_out_by_sparse_checkout(repo.git_dir)
            entries = repo.flatten_entries(tree).items()
            committed = {p: sha for p, (mode, sha) in entries if _is_file(mode) and p not in sparse}
            paths = {*committed, *memory_paths(root)}
        changes: list[WorkChange] = []
        for rel in sorted(p for p in paths if is_versioned_path(p)):
            old_id = committed.get(rel) if committed is not None else _file_id(repo, tree, rel)
            data = None if behind_link(root, rel) else read_if_regular(os.path.join(root, rel))
            if (data is None and old_id is None) or (data is not None and old_id == blob_id(data)):
                continue
            old_data = repo.read_blob(old_id) if old_id else None
            status = "A" if old_id is None else "D" if data is None else "M"
            changes.append(WorkChange(status, rel, data, old_data))
    return changes


def _file_id(repo: Repository, tree: str | None, rel: str) -> str | None:
    found = repo.lookup_entry(tree, rel)
    return found[1] if found is not None and _is_file(found[0]) else None


def _is_file(mode: int) -> bool:
    return stat.S_ISREG(mode) or stat.S_ISLNK(mode)


def _left_out_by_sparse_checkout(git_dir: str) -> set[str]:
    """Paths the git index marks skip-worktree: missing from disk on purpose, not deleted."""
    try:
        index = gitindex.read_index(git_dir)
    except gitindex.IndexUnreadable:
        return set()
    return {p for p in index.paths() if index.skips_worktree(p)}


def _candidates(seen: survey.Survey, index: GitIndex, head_map: dict[str, str] | None) -> set[str]:
    """Paths whose stat, index entry or HEAD entry disagree: the only files worth reading."""
    found = set(seen.dirty)
    gone = seen.gone or ()  # None: the index was unreadable, so nothing is tracked yet
    found.update(p for p in gone if "\0" not in p and _in_scope(p) and not index.skips_worktree(p))
    if head_map is not None:
        for rel in {*head_map, *index.paths()}:
            entry = index.get(rel)
            if (entry.sha if entry else None) != head_map.get(rel):
                found.add(rel)
    return found


def _in_scope(rel: str) -> bool:
    return rel == INDEX_NAME or is_versioned_path(rel)


def _classify(
    repo: Repository,
    rel: str,
    head_sha: str | None,
    files: Collection[str],
    index: GitIndex,
    found: _Found,
    rules: _Rules,
) -> None:
    """Decide one candidate: refresh its index entry, commit it, delete it or hold it back."""
    if rel not in files and not _in_scope(rel):
        _refresh_other(repo, rel, head_sha, index)
        return
    link = _linked_folder(repo.root, rel)
    if link is not None:  # never looked through: what lies behind it is not ours to read
        found.held[rel] = f"{SYMLINK} ({link}/ is a symlink)"
        return
    path = os.path.join(repo.root, rel)
    try:
        st = os.lstat(path)  # before reading: an edit after it makes the index entry stale
    except (FileNotFoundError, NotADirectoryError):  # gone, or a folder on its path became a file
        st = None
    if st is None and index.skips_worktree(rel):
        return  # left out by a sparse checkout, not deleted
    if st is not None and stat.S_ISLNK(st.st_mode):
        found.held[rel] = SYMLINK  # a link where HEAD has a file: HEAD's file is kept
        return
    if st is None or rel not in files or not stat.S_ISREG(st.st_mode):
        if head_sha is None:
            index.remove(rel)
        elif rel == INDEX_NAME:
            found.index_stale = True
        else:
            found.deletes.append(rel)
        return
    data = _read(path)
    sha = blob_id(data)
    if sha == head_sha:
        index.set(rel, without_exec_bits(path, st), sha, gitindex.FILE_MODE)
    elif rel == INDEX_NAME:
        found.index_stale = True
        found.index_new = head_sha is None
    elif (problem := rules.problem_of(rel, data)) is not None:
        found.held[rel] = problem
    elif st.st_mtime_ns > rules.quiet_ns:
        found.held[rel] = BEING_WRITTEN
    else:
        found.writes[rel] = data.decode("utf-8")
        if head_sha is None:
            found.new.append(rel)


def _linked_folder(root: str, rel: str) -> str | None:
    """The folder on ``rel``'s path that is a symlink, or None."""
    parts = rel.split("/")[:-1]
    for depth in range(1, len(parts) + 1):
        prefix = "/".join(parts[:depth])
        if os.path.islink(os.path.join(root, prefix)):
            return prefix
    return None


def _refresh_other(repo: Repository, rel: str, head_sha: str | None, index: GitIndex) -> None:
    """A tracked non-memory file whose index entry differs from HEAD: fix it only if clean."""
    path = os.path.join(repo.root, rel)
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        if head_sha is None:
            index.remove(rel)
        return
    if stat.S_ISREG(st.st_mode) and blob_id(_read(path)) == head_sha:
        index.set(rel, st, head_sha, gitindex.blob_mode(st))


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def _render_files(
    files: Mapping[str, tuple[int, ...]], linked: Mapping[str, tuple[int, ...]]
) -> dict[str, tuple[int, ...]]:
    """rel -> (mtime_ns, size, ...) of the files MEMORY.md is built from, as Qwen Code lists
    them (``tests/qwen/test_index_differential.py``): ``files`` (any size: Qwen reads what
    qmem-git holds back), what Qwen reaches through symlinks (``linked``), not MEMORY.md. The
    copy is made in C, not by a comprehension over 10,000 files."""
    render = dict(files)
    render.update(linked)
    render.pop(INDEX_NAME, None)
    return render


def _commit(
    layout: Layout,
    found: _Found,
    identity: Identity,
    host: str,
    now: datetime,
    state: WorkState,
    enabled: bool,
) -> tuple[str | None, list[FileChange]]:
    """One ``recover`` commit of everything that differs from HEAD and may be committed; the
    files held back are named in its message."""
    if not enabled or not (found.writes or found.deletes or found.index_stale):
        return None, []
    count = len(found.writes) + len(found.deletes)
    subject = f"commit {count} uncommitted memory file(s) left in the work tree"
    files = state.files or {}
    cs = ChangeSet(
        op="recover",
        subject=subject if count else _index_subject(found),
        mtimes={rel: files[rel][0] // 1_000_000_000 for rel in found.writes if rel in files},
        writes=found.writes,
        deletes=tuple(found.deletes),
        topics=_topics(found),
        added=len(found.new),
        removed=len(found.deletes),
        held=found.held,
    )
    result = apply_changeset(layout, cs, identity=identity, host=host, now=now, state=state)
    return result.commit, result.changes


def _index_subject(found: _Found) -> str:
    return "add MEMORY.md" if found.index_new else "rebuild MEMORY.md, edited by hand"


def _topics(found: _Found) -> tuple[str, ...]:
    """Memory types touched: from the frontmatter of written files, the folder of deleted ones."""
    kinds: set[str] = set()
    for rel, text in found.writes.items():
        doc = parse_document(text, rel, 0.0)
        if doc is not None:
            kinds.add(doc.type)
    kinds.update(rel.split("/", 1)[0] for rel in found.deletes if is_memory_type(rel.split("/")[0]))
    return tuple(sorted(kinds))
