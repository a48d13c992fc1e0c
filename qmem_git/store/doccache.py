"""Parsed memory documents cached in the state dir, keyed by (path, mtime_ns, size).

Recall runs on every prompt (ARCHITECTURE §6), so a warm scan is one directory walk with
``lstat`` plus one ``marshal`` load; only files whose key changed are read and parsed. The
module deliberately imports only ``os`` and ``marshal``: ``store.workdir`` pulls in
``tempfile`` and ``core.model`` pulls in ``dataclasses``/``typing`` (together ~40-50 ms of
start-up on the hook path), so the scan rules of ``workdir.iter_memory_files`` and the lenient
parse of ``codec.parse_document`` are mirrored here; tests pin both to the originals.
"""

from __future__ import annotations

import marshal
import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmem_git.core.model import Document, MemoryType

    # (type, title, description, body, frontmatter) of a memory document, None for other files
    Fields = tuple[str, str, str, str, str]
    # cache value: (mtime_ns, size, fields or None)
    Entry = tuple[int, int, Fields | None]
    # a walked file; sorting these gives scan order: (-mtime_ms, basename, rel, mtime_ns, size)
    Found = tuple[float, str, str, int, int]

CACHE_FILE = os.path.join("cache", "recall-docs.marshal")
CACHE_FORMAT = "qmem-recall-docs/1"
INDEX_NAME = "MEMORY.md"  # = core.model.INDEX_NAME
MAX_FILE_BYTES = 256 * 1024  # = core.model.MAX_FILE_BYTES
MAX_SCANNED_DOCUMENTS = 200  # = core.model.MAX_SCANNED_DOCUMENTS
_TYPES: dict[str, MemoryType] = {
    "user": "user",
    "feedback": "feedback",
    "project": "project",
    "reference": "reference",
}


class CachedDoc:
    """A memory document as recall needs it (the attributes of ``core.model.Document``)."""

    __slots__ = ("body", "description", "frontmatter", "mtime_ms", "relative_path", "title", "type")

    def __init__(
        self, relative_path: str, fields: Fields, kind: MemoryType, mtime_ms: float
    ) -> None:
        self.relative_path = relative_path
        self.type: MemoryType = kind
        self.title = fields[1]
        self.description = fields[2]
        self.body = fields[3]
        self.frontmatter = fields[4]
        self.mtime_ms = mtime_ms

    @property
    def filename(self) -> str:
        return self.relative_path.rsplit("/", 1)[-1]

    def to_document(self) -> Document:
        """The equivalent ``core.model.Document`` (imports the model module on first use)."""
        from qmem_git.core.model import Document

        return Document(
            type=self.type,
            relative_path=self.relative_path,
            title=self.title,
            description=self.description,
            body=self.body,
            mtime_ms=self.mtime_ms,
            frontmatter=self.frontmatter,
        )

    def __repr__(self) -> str:
        return f"CachedDoc({self.relative_path!r}, type={self.type!r}, title={self.title!r})"


def cache_path(state_dir: str) -> str:
    return os.path.join(state_dir, CACHE_FILE)


def scan_cached(
    memory_root: str, state_dir: str | None, limit: int = MAX_SCANNED_DOCUMENTS
) -> list[CachedDoc]:
    """The newest ``limit`` documents in scan order (spec §5), parsing only changed files.

    The cache holds exactly the files this scan looked at (the newest ones, up to ``limit``
    documents), so it stays small and loads in about a millisecond however big the store is.
    Without a state dir nothing is cached. The cache is written back only when it changed and
    never fails the scan (read-only state dirs, races with other writers).
    """
    root = os.path.abspath(memory_root)
    found = walk_memory_files(root)
    found.sort()  # spec §5: newest first, then basename, then relative path
    path = cache_path(state_dir) if state_dir else None
    old = load_cache(path, root) if path else {}
    docs, new, parsed = collect_documents(root, found, old, limit)
    if path and (parsed or new.keys() != old.keys()):
        save_cache(path, root, new)
    return docs


def collect_documents(
    root: str, found: list[Found], old: dict[str, Entry], limit: int
) -> tuple[list[CachedDoc], dict[str, Entry], int]:
    """Walk files in scan order until ``limit`` documents; returns docs, entries, parse count."""
    docs: list[CachedDoc] = []
    new: dict[str, Entry] = {}
    parsed = 0
    for neg_mtime_ms, _, rel, mtime_ns, size in found:
        if len(docs) >= limit:
            break
        entry = old.get(rel)
        if entry is None or not _fresh(entry, mtime_ns, size):
            entry = (mtime_ns, size, parse_fields(read_text(os.path.join(root, rel))))
            parsed += 1
        new[rel] = entry
        fields = entry[2]
        kind = _TYPES.get(fields[0]) if fields else None
        if fields and kind:
            docs.append(CachedDoc(rel, fields, kind, -neg_mtime_ms))
    return docs, new, parsed


def walk_memory_files(root: str) -> list[Found]:
    """Regular ``*.md`` files except MEMORY.md, dot-dirs, symlinks and files over 256 KiB.

    Same rules as ``store.workdir.iter_memory_files`` but yields plain tuples (cheaper than
    10,000 dataclass instances) that sort straight into scan order.
    """
    found: list[Found] = []
    stack = [("", root)]
    while stack:
        prefix, directory = stack.pop()
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    _visit(entry, prefix, stack, found)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
    return found


def _visit(
    entry: os.DirEntry[str], prefix: str, stack: list[tuple[str, str]], found: list[Found]
) -> None:
    name = entry.name
    if entry.is_symlink():
        return
    if entry.is_dir(follow_symlinks=False):
        if name[0] != ".":
            stack.append((prefix + name + "/", entry.path))
        return
    if not name.endswith(".md") or name == INDEX_NAME:
        return
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:  # removed by a concurrent writer between listing and stat
        return
    if stat.S_ISREG(info.st_mode) and info.st_size <= MAX_FILE_BYTES:
        mtime_ns = info.st_mtime_ns
        # float milliseconds first, as core.index.scan_order_key sorts
        found.append((-(mtime_ns / 1_000_000), name, prefix + name, mtime_ns, info.st_size))


def read_text(path: str) -> str | None:
    """File text as UTF-8, or None when it cannot be read or decoded (as store.workdir)."""
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def parse_fields(text: str | None) -> Fields | None:
    """Mirror of ``core.codec.parse_document`` (spec §4.2) returning a plain tuple."""
    if text is None:
        return None
    text = text.replace("\r\n", "\n")
    if not text.startswith("---\n"):
        return None
    end = text.find("\n---", 3)
    if end < 0:
        return None
    frontmatter = text[4:end]
    if not frontmatter.strip():
        return None
    rest = end + 4
    if text.startswith("\n", rest):
        rest += 1
    kind = _field(frontmatter, "type")
    if kind is None or kind not in _TYPES:
        return None
    title = _field(frontmatter, "name") or _field(frontmatter, "title") or kind
    description = _field(frontmatter, "description") or ""
    return (kind, title, description, text[rest:].strip(), frontmatter)


def _field(frontmatter: str, key: str) -> str | None:
    prefix = key + ":"
    for line in frontmatter.split("\n"):
        if line.startswith(prefix):
            return line[len(prefix) :].strip() or None
    return None


def load_cache(path: str, root: str) -> dict[str, Entry]:
    """Cached entries for this memory root; {} when missing, unreadable, corrupt or foreign."""
    try:
        with open(path, "rb") as handle:
            data = marshal.loads(handle.read())
    except Exception:  # marshal raises EOFError, ValueError, TypeError on damaged input
        return {}
    valid = type(data) is tuple and len(data) == 3 and data[:2] == (CACHE_FORMAT, root)
    return data[2] if valid and type(data[2]) is dict else {}


def _fresh(entry: object, mtime_ns: int, size: int) -> bool:
    """Key match plus a shape check, so a damaged entry only costs a re-parse, never a crash."""
    if type(entry) is not tuple or len(entry) != 3 or entry[:2] != (mtime_ns, size):
        return False
    fields = entry[2]
    return fields is None or (
        type(fields) is tuple and len(fields) == 5 and all(type(f) is str for f in fields)
    )


def save_cache(path: str, root: str, entries: dict[str, Entry]) -> bool:
    """Replace the cache atomically (temp file + rename); False when the state dir is read-only.

    No fsync: a cache lost in a crash is rebuilt on the next scan, and fsync on every changed
    prompt would cost more than the parse it saves.
    """
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as handle:
            handle.write(marshal.dumps((CACHE_FORMAT, root, entries)))
        os.replace(tmp, path)
    except OSError:
        try:  # noqa: SIM105 - contextlib would add start-up time to the hook path
            os.unlink(tmp)
        except OSError:
            pass
        return False
    return True
