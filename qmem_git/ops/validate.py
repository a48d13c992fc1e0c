"""Validate memory files on disk: walk the tree (or explicit paths), read safely, run the checks.

Reading is defensive because the files may come from anywhere (a clone, a sync, an agent):
nothing is followed through a symlink, nothing outside the memory root is opened, sizes are
checked with ``stat`` before reading and never more than 256 KiB + 1 bytes are read, and only
regular files are opened (a FIFO would block).

Paths in findings: :func:`validate_tree` reports paths relative to the memory root;
:func:`validate_paths` reports each file under the spelling the caller gave (a directory
argument prefixes what is found below it), so editors and pre-commit can jump to it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from qmem_git.core.index import IndexResult
from qmem_git.core.model import INDEX_NAME, MAX_FILE_BYTES
from qmem_git.core.names import (
    check_path_safety,
    collision_message,
    find_case_collisions,
    fold_name,
)
from qmem_git.core.validate import (
    INDEX_FIX,
    STAGED_INDEX_FIX,
    Finding,
    as_advice,
    check_index,
    check_memory_file,
    check_path,
    has_errors,
    size_limit_finding,
    sort_findings,
)
from qmem_git.ops.tierindex import expected_index

if TYPE_CHECKING:
    from qmem_git.store.staged import Staged, StagedFile

Display = Callable[[str], str]


@dataclass(frozen=True)
class Report:
    """Findings (sorted by path, line, column) and how many files were looked at."""

    findings: tuple[Finding, ...]
    files_checked: int

    @property
    def exit_code(self) -> int:
        """1 when any finding is an error (ARCHITECTURE §4: problems found), else 0."""
        return 1 if has_errors(self.findings) else 0

    def count(self, severity: str) -> int:
        return sum(1 for finding in self.findings if finding.severity == severity)

    def anchored(self, memory_root: str) -> Report:
        """Root-relative paths made absolute, for editors whose workspace is elsewhere."""
        root = os.path.abspath(memory_root)
        findings = tuple(
            f if os.path.isabs(f.path) else replace(f, path=os.path.join(root, f.path))
            for f in self.findings
        )
        return Report(findings, self.files_checked)


class _Unreadable(Exception):
    """A file that must not or cannot be read; ``finding`` says why."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.message)
        self.finding = finding


# ---------------------------------------------------------------------------------------------
# entry points


def validate_tree(memory_root: str | os.PathLike[str]) -> Report:
    """Every memory file under the root, MEMORY.md against the rebuilt index, name collisions."""
    root = os.path.abspath(memory_root)
    problem = _root_problem(root, os.fspath(memory_root))
    if problem is not None:
        return Report((problem,), 0)
    findings, checked = _check_dir(root, "", _relative)
    return Report(tuple(sort_findings(findings)), checked)


def validate_paths(
    memory_root: str | os.PathLike[str],
    paths: Iterable[str | os.PathLike[str]],
    base: str | os.PathLike[str] | None = None,
) -> Report:
    """Check the given files or folders; relative paths are resolved against ``base``.

    ``base`` defaults to the memory root (pass the working directory for paths a user or
    pre-commit typed). Anything that resolves outside the root is a ``path-unsafe`` finding and
    is never opened.
    """
    root = os.path.abspath(memory_root)
    problem = _root_problem(root, os.fspath(memory_root))
    if problem is not None:
        return Report((problem,), 0)
    start = os.path.abspath(base) if base is not None else root
    findings: list[Finding] = []
    checked = 0
    for given in paths:
        more, count = _check_given(root, start, os.fspath(given))
        findings += more
        checked += count
    return Report(tuple(sort_findings(findings)), checked)


def validate_staged(memory_root: str | os.PathLike[str], index_file: str | None = None) -> Report:
    """What a commit made now would add or change (the memory repo's pre-commit hook).

    Each staged file whose content differs from HEAD is checked as it is staged (its blob, not
    the work tree); name collisions among every path the commit would hold; MEMORY.md as staged
    against the index rebuilt from the staged files. Files already in HEAD were checked when
    they were committed, and files that are not staged are not part of the commit.
    ``index_file``: the index the commit is made from (``GIT_INDEX_FILE`` in a hook).
    Raises ``store.staged.IndexNotReadable`` for index forms it cannot read.
    """
    from qmem_git.store.staged import iter_blobs, staged_changes

    root = os.path.abspath(memory_root)
    problem = _root_problem(root, os.fspath(memory_root))
    if problem is not None:
        return Report((problem,), 0)
    staged = staged_changes(root, index_file)
    findings = _collisions(sorted(staged.files), _relative)
    findings += [_unmerged_finding(rel) for rel in staged.conflicted]
    readable: list[StagedFile] = []
    for item in staged.changed:
        if item.path == INDEX_NAME:
            continue  # checked with the index below
        refused = _staged_refusal(item)
        if refused is None:
            readable.append(item)
        else:
            findings += refused
    blobs = iter_blobs(root, [item.sha for item in readable])
    for item, (_, data) in zip(readable, blobs, strict=True):
        findings += _staged_blob_findings(item.path, data)
    findings += _check_staged_index(root, staged)
    checked = len(readable) + (INDEX_NAME in staged.files)
    return Report(tuple(sort_findings(findings)), checked)


def _staged_refusal(item: StagedFile) -> list[Finding] | None:
    """Findings for a staged entry whose content is not read (not *.md, not a regular file,
    too big); None when the content should be checked."""
    rel = item.path
    if not rel.endswith(".md"):  # not a memory: the person's to commit, only its name matters
        return [as_advice(finding) for finding in check_path(rel)]
    if stat.S_ISLNK(item.mode):
        message = "symlink; memory files must be regular files inside the memory root"
        return [*check_path(rel), Finding(rel, 1, 1, "error", message, "symlink")]
    if not stat.S_ISREG(item.mode):
        message = "not a regular file; memory files must be plain files"
        return [*check_path(rel), Finding(rel, 1, 1, "error", message, "path-layout")]
    if item.size > MAX_FILE_BYTES:
        return [*check_path(rel), size_limit_finding(rel, item.size)]
    return None


def _staged_blob_findings(rel: str, data: bytes | None) -> list[Finding]:
    if data is not None:
        return check_memory_file(rel, data)
    message = f"the staged content is larger than {MAX_FILE_BYTES:,} bytes or cannot be read"
    return [*check_path(rel), Finding(rel, 1, 1, "error", message, "size-limit")]


def _unmerged_finding(rel: str) -> Finding:
    message = "the merge conflict in this file is not resolved; resolve it and stage the file"
    return Finding(rel, 1, 1, "error", message, "conflict-marker")


def _check_staged_index(root: str, staged: Staged) -> list[Finding]:
    """MEMORY.md as the commit would record it, against the index rebuilt from staged files."""
    from qmem_git.store.staged import iter_blobs, render_staged_index

    if INDEX_NAME in staged.conflicted:
        return []  # reported as unmerged
    entry = staged.files.get(INDEX_NAME)
    refused = None if entry is None else _staged_refusal(entry)
    if refused is not None:
        return refused
    data = None if entry is None else next(iter(iter_blobs(root, [entry.sha])))[1]
    if entry is not None and data is None:
        return _staged_blob_findings(INDEX_NAME, None)
    return _check_index_data(data, lambda: render_staged_index(root, staged), STAGED_INDEX_FIX)


# ---------------------------------------------------------------------------------------------
# roots and explicit paths


def _root_problem(root: str, shown: str) -> Finding | None:
    """The memory root must be a real directory: a symlinked root would let writes escape it."""
    if os.path.islink(root):
        message = f"the memory root {shown} is a symlink; point qmem-git at the real directory"
        return Finding(shown, 1, 1, "error", message, "symlink")
    if not os.path.isdir(root):
        message = f"the memory root {shown} does not exist or is not a directory"
        return Finding(shown, 1, 1, "error", message, "file-unreadable")
    return None


def _check_given(root: str, start: str, given: str) -> tuple[list[Finding], int]:
    target = os.path.abspath(os.path.join(start, given))
    rel = os.path.relpath(target, root).replace(os.sep, "/")
    if rel == ".." or rel.startswith("../") or os.path.isabs(rel):
        message = "path is outside the memory root; only memory files can be checked"
        return [Finding(given, 1, 1, "error", message, "path-unsafe")], 0
    if rel == ".":
        return _check_dir(root, "", _under(given, ""))
    unsafe = check_path_safety(rel)
    if unsafe:
        return [Finding(given, 1, 1, "error", problem, "path-unsafe") for problem in unsafe], 0
    try:
        mode = _lstat_below(root, rel, given)
    except _Unreadable as exc:
        return [exc.finding], 0
    if stat.S_ISDIR(mode):
        return _check_dir(root, rel + "/", _under(given, rel + "/"))
    if rel == INDEX_NAME:
        return _shown(_check_index_file(root, present=True), given), 1
    return _shown(_check_file(root, rel, rel), given), 1


def _lstat_below(root: str, rel: str, given: str) -> int:
    """Mode of ``root/rel`` after making sure no component on the way is a symlink."""
    path = root
    for segment in rel.split("/"):
        path = os.path.join(path, segment)
        try:
            info = os.lstat(path)
        except OSError as exc:
            message = f"cannot read: {exc.strerror or exc}"
            raise _Unreadable(Finding(given, 1, 1, "error", message, "file-unreadable")) from exc
        if stat.S_ISLNK(info.st_mode):
            raise _Unreadable(_symlink_finding(root, path, given))
    return info.st_mode


def _relative(rel: str) -> str:
    return rel


def _under(given: str, rel_dir: str) -> Display:
    """Show files found below a directory argument under the caller's spelling of it."""
    prefix = given.rstrip("/" + os.sep)

    def display(rel: str) -> str:
        inside = rel[len(rel_dir) :]
        return f"{prefix}/{inside}" if prefix else inside

    return display


# ---------------------------------------------------------------------------------------------
# directories


def _check_dir(root: str, rel_dir: str, display: Display) -> tuple[list[Finding], int]:
    """Walk ``root/rel_dir``; the whole root also gets the index and collision checks."""
    findings: list[Finding] = []
    files: list[str] = []
    seen: list[str] = []
    for rel, kind in _walk(root, rel_dir):
        seen.append(rel)
        if kind == "symlink":
            findings.append(_symlink_finding(root, os.path.join(root, rel), display(rel)))
        elif kind == "git-name":
            findings += _shown(check_path(rel), display(rel))
        elif rel != INDEX_NAME:
            files.append(rel)
            findings += _shown(_check_file(root, rel, rel), display(rel))
    if rel_dir == "":
        findings += _shown(_check_index_file(root, INDEX_NAME in seen), display(INDEX_NAME))
        findings += _collisions(seen, display)
    return findings, len(files) + (1 if rel_dir == "" and INDEX_NAME in seen else 0)


def _walk(root: str, rel_dir: str) -> Iterable[tuple[str, str]]:
    """``(relative path, kind)`` for every entry worth reporting, sorted, depth first.

    Dot-entries are skipped (``.git``, editor and atomic-write temp files) except ``*.md``
    dot-files, which Qwen Code would index, and look-alikes of ``.git`` such as ``.GIT``.
    """
    stack = [rel_dir]
    while stack:
        prefix = stack.pop()
        try:
            with os.scandir(os.path.join(root, prefix) if prefix else root) as listing:
                entries = sorted(listing, key=lambda entry: entry.name, reverse=True)
        except OSError:
            continue
        for entry in entries:
            rel = prefix + entry.name
            kind = _kind(entry)
            if kind == "dir":
                stack.append(rel + "/")
            elif kind:
                yield rel, kind


def _kind(entry: os.DirEntry[str]) -> str:
    """What to check: ``*.md`` files (what qmem-git versions), folders to descend, and links
    named like memories; other files (logs, images) are the agent's, not versioned."""
    name = entry.name
    if name.startswith(".") and name != ".git" and fold_name(name).rstrip(" .") == ".git":
        return "git-name"
    if name.startswith(".") and not (name.endswith(".md") and entry.is_file(follow_symlinks=False)):
        return ""
    if entry.is_symlink():
        return "symlink" if name.endswith(".md") else ""
    if entry.is_dir(follow_symlinks=False):
        return "dir"
    return "file" if name.endswith(".md") else ""


def _collisions(paths: list[str], display: Display) -> list[Finding]:
    findings = []
    for group in find_case_collisions(paths):
        first, *others = group
        for other in others:
            message = collision_message(other, first) + "; `qmem-git repair` renames one"
            findings.append(Finding(display(other), 1, 1, "error", message, "path-collision"))
    return findings


# ---------------------------------------------------------------------------------------------
# files


def _check_file(root: str, rel: str, shown: str) -> list[Finding]:
    """Name checks always; content checks for regular ``*.md`` files within the size limit."""
    if not rel.endswith(".md"):
        return _shown([as_advice(finding) for finding in check_path(rel)], shown)
    try:
        data = _read_bounded(os.path.join(root, rel), rel)
    except _Unreadable as exc:
        return _shown([*check_path(rel), exc.finding], shown)
    return _shown(check_memory_file(rel, data), shown)


def _check_index_file(root: str, present: bool) -> list[Finding]:
    """MEMORY.md: the text checks, then equality with the index rebuilt from the files."""
    path = os.path.join(root, INDEX_NAME)
    if present and os.path.islink(path):
        return []  # already reported by the walk as a symlink
    try:
        data = _read_bounded(path, INDEX_NAME) if present else None
    except _Unreadable as exc:
        return [exc.finding]
    if data is None:
        return check_index(None, expected_index(root))
    return _check_index_data(data, lambda: expected_index(root))


def _check_index_data(
    data: bytes | None, expected: Callable[[], IndexResult], fix: str = INDEX_FIX
) -> list[Finding]:
    """MEMORY.md's text checks, then equality with ``expected()`` (None: it is missing)."""
    if data is None:
        return check_index(None, expected(), fix=fix)
    findings = check_memory_file(INDEX_NAME, data)
    if any(f.rule in ("size-limit", "nul-byte", "utf8") for f in findings):
        return findings
    return findings + check_index(data.decode("utf-8"), expected(), fix=fix)


def _read_bounded(path: str, rel: str) -> bytes:
    """Read a regular file without following a symlink, never more than the limit + 1 bytes."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        message = f"cannot read: {exc.strerror or exc}"
        raise _Unreadable(Finding(rel, 1, 1, "error", message, "file-unreadable")) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            message = "not a regular file; memory files must be plain files"
            raise _Unreadable(Finding(rel, 1, 1, "error", message, "path-layout"))
        if info.st_size > MAX_FILE_BYTES:
            raise _Unreadable(size_limit_finding(rel, info.st_size))
        data = _read_at_most(fd, MAX_FILE_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:  # grew between fstat and read
        raise _Unreadable(size_limit_finding(rel, len(data)))
    return data


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    remaining = limit
    while remaining > 0:
        chunk = os.read(fd, min(remaining, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _symlink_finding(root: str, path: str, shown: str) -> Finding:
    try:
        target = os.path.realpath(path)
    except OSError:
        target = ""
    real_root = os.path.realpath(root)
    outside = not (target == real_root or target.startswith(real_root + os.sep))
    where = " pointing outside the memory root" if outside else ""
    message = f"symlink{where}; memory files must be regular files inside the memory root"
    return Finding(shown, 1, 1, "error", message, "symlink")


def _shown(findings: list[Finding], shown: str) -> list[Finding]:
    return [replace(finding, path=shown) for finding in findings]
