"""The documents the last writer parsed, kept for the next one (``.git/qmem-docs``).

Every write plans against, and renders MEMORY.md from, the 200 newest memory documents; reading
and parsing them is ~13 ms of a ``remember`` at any store size. The writer keeps what it parsed,
each with the full ``lstat`` stamp of the file it came from (mtime and ctime in nanoseconds,
size, inode: see ``store.survey``), and the next writer uses a kept document only while its file
still has that stamp. The record is checked (CRC-32) and versioned with the package; a damaged
or foreign one is ignored.
"""

from __future__ import annotations

import os

from qmem_git import __version__
from qmem_git.core.limits import DOCS_RECORD_NAME
from qmem_git.core.model import Document
from qmem_git.store.cachefile import read_checked, write_checked

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

_MAGIC = f"qmem-docs/1 {__version__}\n".encode()
MAX_KEPT_TEXT = 16 * 1024  # a bigger document is parsed each time rather than kept
_FIELDS = len(Document._fields)

# rel -> (the file's stamp, the document's fields, or None for a file that is no document)
Kept = dict[str, tuple[tuple[int, ...], "tuple[object, ...] | None"]]


def load_kept(git_dir: str) -> Kept:
    """The kept documents; empty when there are none or the record cannot be trusted."""
    import marshal

    body = read_checked(os.path.join(git_dir, DOCS_RECORD_NAME), _MAGIC)
    if body is None:
        return {}
    try:
        kept = marshal.loads(body)
    except (EOFError, ValueError, TypeError):
        return {}
    return kept if isinstance(kept, dict) else {}


def kept_document(
    kept: Kept, rel: str, stamp: tuple[int, ...] | None
) -> tuple[bool, Document | None]:
    """(True, the document kept for ``rel``, None for no document) when its file still has
    ``stamp``; (False, None) when nothing usable is kept."""
    entry = kept.get(rel)
    if entry is None or stamp is None or len(stamp) != 4 or entry[0] != stamp:
        return False, None
    fields = entry[1]
    if fields is None:
        return True, None
    if len(fields) != _FIELDS or not isinstance(fields[5], float):
        return False, None
    if not all(isinstance(value, str) for i, value in enumerate(fields) if i != 5):
        return False, None
    return True, Document._make(fields)


def save_kept(
    git_dir: str, docs: Mapping[str, Document | None], stamps: Mapping[str, tuple[int, ...]]
) -> None:
    """Keep ``docs`` (rel -> document, None for no document) whose files' ``stamps`` are full
    ones (a file written by this command has only its mtime and size: parsed next time)."""
    import marshal

    kept: Kept = {}
    for rel, doc in docs.items():
        stamp = stamps.get(rel)
        if stamp is None or len(stamp) != 4:
            continue
        if doc is not None and len(doc.body) + len(doc.frontmatter) > MAX_KEPT_TEXT:
            continue
        kept[rel] = (stamp, None if doc is None else tuple(doc))
    try:  # noqa: SIM105 - contextlib is not imported on this path
        write_checked(os.path.join(git_dir, DOCS_RECORD_NAME), _MAGIC, marshal.dumps(kept))
    except OSError:  # only the shortcut is lost
        pass
