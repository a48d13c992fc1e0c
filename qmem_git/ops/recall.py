"""Recall over a memory directory on disk (spec §10): the per-prompt hook's operation.

Read-only and git-free (a plain directory works). Keep imports minimal: this module, its
imports and the interpreter are the whole start-up cost of the hook (ARCHITECTURE §6); a test
checks that dulwich, click, requests, yaml and filelock stay out.
"""

from __future__ import annotations

import os

from qmem_git.core.recall import MAX_RECALL_DOCS, RecallResult, resolve_recall
from qmem_git.store.doccache import scan_cached

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from qmem_git.core.recall import Selector
    from qmem_git.modelconfig import ModelConfig
    from qmem_git.store.doccache import CachedDoc


def recall(
    memory_root: str,
    state_dir: str | None,
    query: str,
    now_ms: int,
    limit: int = MAX_RECALL_DOCS,
    excluded: Iterable[str] = (),
    selector: Selector[CachedDoc] | None = None,
    model: ModelConfig | None = None,
    also: Sequence[tuple[str, str | None]] = (),
    *,
    nested_type: bool = False,
) -> RecallResult:
    """Scan (cached, top 200 in scan order), drop ``excluded`` paths, select and render.

    ``excluded`` holds paths already surfaced or written this turn, absolute or relative to the
    memory root; they are never selected and not counted in ``docs_scanned`` (spec §10.1).
    ``state_dir`` None disables the parse cache. ``model`` (when no ``selector`` is given)
    selects with the model of spec §10.6 (``ops.recallmodel``); the HTTP client is imported only
    when the model is actually asked. ``also``: more (memory root, state dir) stores recalled
    with this one, after it, as Qwen Code recalls the user tier with the project's; an
    absolute ``excluded`` path inside one of them excludes that memory there.
    ``nested_type``: Claude Code's folder (its memories nest ``type`` under ``metadata``).
    """
    skip = {relative_to_root(path, memory_root) for path in excluded}
    scanned = scan_cached(memory_root, state_dir, nested_type=nested_type)
    docs = [doc for doc in scanned if doc.relative_path not in skip]
    for root, state in also:
        there = {relative_to_root(path, root) for path in excluded if _inside(root, path)}
        docs += [doc for doc in scan_cached(root, state) if doc.relative_path not in there]
    if selector is None and model is not None:
        from qmem_git.ops.recallmodel import recall_selector

        selector = recall_selector(model)
    return resolve_recall(docs, query, now_ms, limit, (), selector)


def _inside(root: str, path: str) -> bool:
    if not os.path.isabs(path):
        return False
    return not relative_to_root(path, root).startswith("..")


def relative_to_root(path: str, memory_root: str) -> str:
    """``path`` as a ``/``-separated path relative to the memory root (symlinked roots too)."""
    if not os.path.isabs(path):
        return os.path.normpath(path).replace(os.sep, "/")
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(memory_root))
    if rel.startswith(".."):
        rel = os.path.relpath(os.path.realpath(path), os.path.realpath(memory_root))
    return rel.replace(os.sep, "/")


def result_to_json(result: RecallResult) -> dict[str, object]:
    """The ``--json`` shape of a recall: strategy, selected relative paths, count, prompt."""
    return {
        "strategy": result.strategy,
        "selected": [doc.relative_path for doc in result.selected],
        "docs_scanned": result.docs_scanned,
        "prompt": result.prompt,
    }
