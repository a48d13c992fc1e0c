"""The memory work tree on disk: atomic writes and scanning (spec §5, ARCHITECTURE §3)."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from qmem_git.core.codec import parse_document
from qmem_git.core.index import IndexResult, build_index, order_documents
from qmem_git.core.model import INDEX_NAME, MAX_FILE_BYTES, MAX_SCANNED_DOCUMENTS, Document

TEMP_MARKER = ".qmem-tmp-"


@dataclass(frozen=True)
class FileInfo:
    """A candidate memory file found by the scan (relative path uses ``/``)."""

    relative_path: str
    path: str
    mtime_ns: int
    size: int

    @property
    def filename(self) -> str:
        return self.relative_path.rsplit("/", 1)[-1]


def atomic_write(path: str, data: bytes, mtime_ns: int | None = None) -> None:
    """Temp file in the same dir, fsync, replace, fsync the dir; mtime (optional) set first."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + TEMP_MARKER, dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        if mtime_ns is not None:
            os.utime(tmp, ns=(mtime_ns, mtime_ns))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(directory)


def fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def iter_memory_files(root: str) -> Iterator[FileInfo]:
    """Regular ``*.md`` files under root, except MEMORY.md, dot-dirs, symlinks and big files.

    Dot-*files* ending in ``.md`` are listed: spec §5 lists every ``*.md`` file, and Qwen Code
    indexes them, so skipping them would make our MEMORY.md differ from its.
    """
    stack = [("", root)]
    while stack:
        prefix, directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        for entry in entries:
            name = entry.name
            if entry.is_symlink():
                continue
            rel = prefix + name
            if entry.is_dir(follow_symlinks=False):
                if not name.startswith("."):
                    stack.append((rel + "/", entry.path))
                continue
            if not name.endswith(".md") or name == INDEX_NAME:
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:  # removed by a concurrent writer between listing and stat
                continue
            if stat.S_ISREG(info.st_mode) and info.st_size <= MAX_FILE_BYTES:
                yield FileInfo(rel, entry.path, info.st_mtime_ns, info.st_size)


def read_text(path: str) -> str | None:
    """File text as UTF-8, or None when it cannot be read or decoded."""
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def load_document(info: FileInfo) -> Document | None:
    text = read_text(info.path)
    if text is None:
        return None
    return parse_document(text, info.relative_path, info.mtime_ns / 1_000_000)


def scan_documents(
    root: str, limit: int = MAX_SCANNED_DOCUMENTS, files: Iterable[FileInfo] | None = None
) -> list[Document]:
    """Newest ``limit`` valid documents in scan order; parses only as many files as needed.

    ``files`` (same filter as :func:`iter_memory_files`) spares a writer that already scanned
    the tree a second ``lstat`` pass (~10,000 syscalls at 10,000 files).
    """
    # Same key as core.index.scan_order_key (float milliseconds): two files whose nanosecond
    # mtimes differ but collapse to one float must not be ordered differently here than there.
    files = sorted(
        iter_memory_files(root) if files is None else files,
        key=lambda f: (-(f.mtime_ns / 1_000_000), f.filename, f.relative_path),
    )
    docs: list[Document] = []
    for info in files:
        doc = load_document(info)
        if doc is not None:
            docs.append(doc)
            if len(docs) >= limit:
                break
    return order_documents(docs, limit)


def render_index(root: str, files: Iterable[FileInfo] | None = None) -> IndexResult:
    """The MEMORY.md text for the documents on disk now (``files``: see scan_documents)."""
    return build_index(scan_documents(root, files=files))


def index_path(root: str) -> str:
    return os.path.join(root, INDEX_NAME)
