"""Qwen Code 0.24.4's scan order over whole documents: the reference the writer's own order
(``store.workdir``, which orders files by time and path before parsing them) is held to."""

from __future__ import annotations

from collections.abc import Iterable

from qmem_git.core.index import qwen_order
from qmem_git.core.model import MAX_SCANNED_DOCUMENTS, Document


def order_documents(docs: Iterable[Document], limit: int = MAX_SCANNED_DOCUMENTS) -> list[Document]:
    """Newest mtime first, ties by the basename's ``localeCompare`` (ICU collation), then by
    relative path in UTF-16 code unit order; the first ``limit``."""
    ordered = qwen_order(list(docs), lambda doc: (doc.mtime_ms, doc.relative_path))
    return ordered[:limit]
