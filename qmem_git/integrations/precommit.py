"""pre-commit framework hooks: ``main(argv) -> int`` entry points around the pure checkers.

Console scripts (pyproject): qmem-validate, qmem-index, qmem-secrets, qmem-no-conflict-markers.
Findings are printed one per line as ``path:line:col: severity: message [rule]`` with paths as
pre-commit passed them. pre-commit hands ``qmem-validate`` every staged ``*.md`` file of the
repository, so files outside a memory directory are ignored rather than reported.

Memory lives in a repository in three ways, and all three are found by shape: a project's
``.qwen/memory`` (Qwen Code's local mode, committed with the project), a project's
``.qwen/team-memory`` (Qwen Code's team tier) and a repository whose root is a memory folder.
The team folder's MEMORY.md has Qwen Code's own team format (sorted by path, equal descriptions
grouped, :mod:`qmem_git.core.teamindex`): the hooks check and fix it in that format.
"""

from __future__ import annotations

import argparse
import functools
import os
import stat
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence

from qmem_git.core import paths
from qmem_git.core.index import index_is_current
from qmem_git.core.model import INDEX_NAME, MEMORY_TYPES
from qmem_git.core.names import LEGACY_TOPIC_FILES
from qmem_git.core.paths import MEMORY_DIR_NAME
from qmem_git.core.validate import Finding, check_conflict_markers, check_secrets, format_findings
from qmem_git.ops.tierindex import expected_index
from qmem_git.ops.validate import validate_paths
from qmem_git.store.workdir import atomic_write

SCAN_LIMIT_BYTES = 16 * 1024 * 1024  # secrets/conflict hooks run on any text file
BINARY_SNIFF_BYTES = 8000  # git's own heuristic: a NUL in the first 8000 bytes means binary


# ---------------------------------------------------------------------------------------------
# qmem-validate


def validate_main(argv: Sequence[str] | None = None) -> int:
    """Validate the memory files among ``filenames``; exit 1 when any error is found."""
    parser = _parser("qmem-validate", "Check memory files (frontmatter, secrets, names, index).")
    _memory_root_option(parser, "default: found from each file (a folder holding MEMORY.md)")
    args = parser.parse_args(argv)
    groups: dict[str, list[str]] = {}
    for name in args.filenames:
        root = _root_for(name, args.memory_root)
        if root is not None:
            groups.setdefault(root, []).append(name)
    status = 0
    for root, names in sorted(groups.items()):
        report = validate_paths(root, names, base=os.getcwd())
        _emit(report.findings)
        status = max(status, report.exit_code)
    return status


def _root_for(name: str, explicit: Sequence[str]) -> str | None:
    path = os.path.abspath(name)
    if not explicit:
        return find_memory_root(path)
    for root in explicit:
        absolute = os.path.abspath(root)
        if path == absolute or path.startswith(absolute.rstrip(os.sep) + os.sep):
            return absolute
    return None


def find_memory_root(path: str) -> str | None:
    """The nearest ancestor of ``path`` that is a memory root, or None."""
    current = os.path.dirname(os.path.abspath(path))
    while True:
        if is_memory_root(current):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def is_team_root(directory: str) -> bool:
    """Qwen Code's team tier: ``<project>/.qwen/team-memory`` (``core.paths.is_team_root``)."""
    return paths.is_team_root(os.path.abspath(directory).replace(os.sep, "/"))


@functools.lru_cache(maxsize=1024)
def is_memory_root(directory: str) -> bool:
    """A folder with MEMORY.md and a type folder or legacy topic file, a ``memory`` folder
    with a type folder, or Qwen Code's ``.qwen/team-memory``. Requiring two signs keeps an
    unrelated MEMORY.md (say, project docs) from being taken for a memory index and rewritten."""
    if is_team_root(directory) and os.path.isdir(directory):
        return True
    has_index = os.path.isfile(os.path.join(directory, INDEX_NAME))
    has_types = any(os.path.isdir(os.path.join(directory, kind)) for kind in MEMORY_TYPES)
    has_legacy = any(os.path.isfile(os.path.join(directory, name)) for name in LEGACY_TOPIC_FILES)
    if has_index:
        return has_types or has_legacy
    return has_types and os.path.basename(directory) == MEMORY_DIR_NAME


# ---------------------------------------------------------------------------------------------
# qmem-index


def index_main(argv: Sequence[str] | None = None) -> int:
    """Rebuild MEMORY.md of every memory root; exit 1 when a file had to be rewritten."""
    parser = _parser("qmem-index", "Rebuild MEMORY.md from the memory files (a fixer).")
    _memory_root_option(parser, "default: every folder of the repository holding MEMORY.md")
    args = parser.parse_args(argv)
    roots = args.memory_root or discover_memory_roots(os.getcwd())
    status = 0
    for root in roots:
        code, lines = fix_index(root)
        _print_lines(lines)
        status = max(status, code)
    return status


def fix_index(root: str) -> tuple[int, list[str]]:
    """Rewrite ``root/MEMORY.md`` when it differs from the rebuilt index.

    Returns 1 and what was done when the file was rewritten (or refused), else 0. A single
    trailing newline is left alone so end-of-file fixers and this hook do not fight.
    """
    index = os.path.join(root, INDEX_NAME)
    if os.path.islink(root) or os.path.islink(index) or not os.path.isdir(root):
        problem = "is a symlink or not a directory; not touching it"
        return 1, [f"{_shown(index)}:1:1: error: {_shown(root)} {problem} [symlink]"]
    expected = expected_index(root)  # a team folder's in Qwen's team format
    if index_is_current(_read_index(index), expected):
        return 0, []
    atomic_write(index, expected.text.encode("utf-8"))
    lines = [f"Fixing {_shown(index)}"]
    if expected.dropped:
        count = len(expected.dropped)
        lines.append(f"note: the index limits leave {count} memories out of MEMORY.md")
    return 1, lines


def _read_index(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            data = handle.read(1024 * 1024)
    except OSError:
        return None
    return data.decode("utf-8", errors="replace")


def discover_memory_roots(top: str) -> list[str]:
    """Memory roots of the repository at ``top``: folders whose MEMORY.md git knows about.

    Run inside a memory folder, that folder: git is not asked there, as the ``.git`` it would
    find is one the agent may have written, whose config (``core.fsmonitor``) git would run.
    """
    enclosing = find_memory_root(os.path.join(top, INDEX_NAME))
    if enclosing is not None:
        return [enclosing]
    candidates = _git_index_files(top)
    if candidates is None:
        candidates = _walk_index_files(top)
    roots = sorted({os.path.dirname(path) for path in candidates})
    roots = [root for root in roots if is_memory_root(root)]
    return [root for root in roots if not any(_below(root, other) for other in roots)]


def _git_index_files(top: str) -> list[str] | None:
    command = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    pathspecs = [INDEX_NAME, f":(glob)**/{INDEX_NAME}"]
    try:
        result = subprocess.run(
            [*command, "--", *pathspecs], cwd=top, capture_output=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    names = result.stdout.decode("utf-8", errors="surrogateescape").split("\0")
    return [os.path.join(top, name) for name in names if name]


def _walk_index_files(top: str) -> list[str]:
    found = []
    for directory, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if d not in (".git", "node_modules")]
        if INDEX_NAME in files:
            found.append(os.path.join(directory, INDEX_NAME))
    return found


def _below(path: str, other: str) -> bool:
    return path != other and path.startswith(other.rstrip(os.sep) + os.sep)


# ---------------------------------------------------------------------------------------------
# qmem-secrets, qmem-no-conflict-markers


def secrets_main(argv: Sequence[str] | None = None) -> int:
    """Refuse files that contain credentials (spec §14 rules); exit 1 when any is found."""
    args = _parser("qmem-secrets", "Find credentials in files.").parse_args(argv)
    return _scan_files(args.filenames, check_secrets)


def conflict_markers_main(argv: Sequence[str] | None = None) -> int:
    """Refuse files that contain git conflict markers; exit 1 when any is found."""
    parser = _parser("qmem-no-conflict-markers", "Find git conflict markers in files.")
    args = parser.parse_args(argv)
    return _scan_files(args.filenames, check_conflict_markers)


def _scan_files(names: Iterable[str], check: Callable[[str, str], list[Finding]]) -> int:
    findings: list[Finding] = []
    for name in names:
        text = read_text_for_scan(name)
        if text is not None:
            findings += check(name, text)
    _emit(findings)
    return 1 if findings else 0


def read_text_for_scan(path: str) -> str | None:
    """Text of a regular, non-binary file (LF line ends), or None when it should be skipped.

    Symlinks are skipped (their target is checked where it lives); larger files than
    SCAN_LIMIT_BYTES are scanned up to that limit.
    """
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode):
            return None
        with open(path, "rb") as handle:
            data = handle.read(SCAN_LIMIT_BYTES)
    except OSError:
        return None
    if b"\0" in data[:BINARY_SNIFF_BYTES]:
        return None
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n")


# ---------------------------------------------------------------------------------------------
# shared


def _parser(prog: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("filenames", nargs="*", help="files to check (pre-commit passes them)")
    return parser


def _memory_root_option(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument(
        "--memory-root",
        action="append",
        default=[],
        metavar="DIR",
        help=f"memory root(s); {default}",
    )


def _emit(findings: Iterable[Finding]) -> None:
    """Print findings in the gcc format."""
    text = format_findings(findings, "gcc")
    if text:
        _print_lines(text.split("\n"))


def _print_lines(lines: list[str]) -> None:
    """Write UTF-8 whatever the terminal's encoding; unencodable characters never crash a hook."""
    if not lines:
        return
    data = ("\n".join(lines) + "\n").encode("utf-8", "backslashreplace")
    buffer = getattr(sys.stdout, "buffer", None)
    sys.stdout.flush()
    if buffer is not None:
        buffer.write(data)
        buffer.flush()
    else:
        sys.stdout.write(data.decode("utf-8"))


def _shown(path: str) -> str:
    """A path relative to the working directory when it is below it (pre-commit's view)."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative
