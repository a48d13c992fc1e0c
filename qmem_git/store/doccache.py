"""Parsed memory documents cached in the state dir, keyed by (path, mtime_ns, size).

Recall runs on every prompt (ARCHITECTURE §6), so a warm scan is one directory walk with
``lstat`` plus one ``marshal`` load; only files whose key changed are read and parsed. The
module imports only ``os``, ``marshal`` and the light modules it shares with the rest of the
store (``store.walk`` for the file rules, ``core.frontmatter`` for the lenient parse), keeping
``dataclasses``/``typing`` (~40-50 ms of start-up) off the hook path.
"""

from __future__ import annotations

import marshal
import os

from qmem_git.core.frontmatter import parse_fields
from qmem_git.core.lexicon import LEXICON_VERSION
from qmem_git.core.limits import MAX_SCANNED_DOCUMENTS
from qmem_git.core.recall import search_index
from qmem_git.store.walk import read_text
from qmem_git.store.walk import walk as walk_memory_files

__all__ = ["CachedDoc", "load_cache", "parse_fields", "read_text", "save_cache", "scan_cached"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmem_git.core.frontmatter import Fields
    from qmem_git.core.model import Document, MemoryType
    from qmem_git.store.walk import Found

    # recall's search index of a document: weighted term counts and weighted length
    Index = tuple[dict[str, float], float]
    # cache value: (mtime_ns, size, fields or None, search index or None)
    Entry = tuple[int, int, Fields | None, Index | None]

CACHE_FILE = os.path.join("cache", "recall-docs.marshal")
CACHE_FORMAT = f"qmem-recall-docs/2+lexicon{LEXICON_VERSION}"
_TYPES: dict[str, MemoryType] = {
    "user": "user",
    "feedback": "feedback",
    "project": "project",
    "reference": "reference",
}


class CachedDoc:
    """A memory document as recall needs it (the attributes of ``core.model.Document``)."""

    __slots__ = (
        "body",
        "description",
        "frontmatter",
        "mtime_ms",
        "relative_path",
        "search_index",
        "title",
        "type",
    )

    def __init__(
        self,
        relative_path: str,
        fields: Fields,
        kind: MemoryType,
        mtime_ms: float,
        index: Index | None = None,
    ) -> None:
        self.relative_path = relative_path
        self.type: MemoryType = kind
        self.title = fields[1]
        self.description = fields[2]
        self.body = fields[3]
        self.frontmatter = fields[4]
        self.mtime_ms = mtime_ms
        self.search_index = index  # recall's term index, built once per file change

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
    memory_root: str,
    state_dir: str | None,
    limit: int = MAX_SCANNED_DOCUMENTS,
    *,
    nested_type: bool = False,
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
    key = root + "\0nested-type" if nested_type else root  # the other reading is not reused
    old = load_cache(path, key) if path else {}
    docs, new, parsed = collect_documents(root, found, old, limit, nested_type)
    if path and (parsed or new.keys() != old.keys()):
        save_cache(path, key, new)
    return docs


def collect_documents(
    root: str, found: list[Found], old: dict[str, Entry], limit: int, nested_type: bool = False
) -> tuple[list[CachedDoc], dict[str, Entry], int]:
    """Walk files in scan order until ``limit`` documents; returns docs, entries, parse count."""
    docs: list[CachedDoc] = []
    new: dict[str, Entry] = {}
    parsed = 0
    for neg_mtime_ms, _, rel, mtime_ns, size in found:
        if len(docs) >= limit:
            break
        entry = old.get(rel)
        if entry is None or not fresh(entry, mtime_ns, size):
            entry = parse_entry(os.path.join(root, rel), mtime_ns, size, nested_type)
            parsed += 1
        new[rel] = entry
        fields = entry[2]
        kind = _TYPES.get(fields[0]) if fields else None
        if fields and kind:
            docs.append(CachedDoc(rel, fields, kind, -neg_mtime_ms, entry[3]))
    return docs, new, parsed


def parse_entry(path: str, mtime_ns: int, size: int, nested_type: bool = False) -> Entry:
    """A fresh cache entry: the parsed fields and, for a document, its search index
    (``nested_type``: Claude Code's ``metadata: type:`` counts, ``frontmatter.parse_fields``)."""
    fields = parse_fields(read_text(path), nested_type=nested_type)
    index = search_index(fields[1], fields[2], fields[3]) if fields else None
    return (mtime_ns, size, fields, index)


def load_cache(path: str, root: str) -> dict[str, Entry]:
    """Cached entries for this memory root; {} when missing, unreadable, corrupt or foreign."""
    try:
        with open(path, "rb") as handle:
            data = marshal.loads(handle.read())
    except Exception:  # marshal raises EOFError, ValueError, TypeError on damaged input
        return {}
    valid = type(data) is tuple and len(data) == 3 and data[:2] == (CACHE_FORMAT, root)
    return data[2] if valid and type(data[2]) is dict else {}


def fresh(entry: object, mtime_ns: int, size: int) -> bool:
    """Key match plus a shape check, so a damaged entry only costs a re-parse, never a crash."""
    if type(entry) is not tuple or len(entry) != 4 or entry[:2] != (mtime_ns, size):
        return False
    fields, index = entry[2], entry[3]
    if fields is None:
        return index is None
    return (
        type(fields) is tuple
        and len(fields) == 5
        and all(type(f) is str for f in fields)
        and type(index) is tuple
        and len(index) == 2
        and type(index[0]) is dict
        and type(index[1]) is float
    )


def save_cache(path: str, root: str, entries: dict[str, Entry]) -> bool:
    """Replace the cache atomically (temp file + rename); False when the state dir is read-only.

    No fsync: a cache lost in a crash is rebuilt on the next scan, and fsync on every changed
    prompt would cost more than the parse it saves.
    """
    if os.path.islink(os.path.dirname(path)):  # a project's .qwen/cache -> elsewhere: no cache
        return False
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
