"""Which files a commit must leave out, and why: safety, never style (issue 18).

The memory folder belongs to the agent, so nothing in it is moved or refused; a file that must
not enter history stays where it is and is held back from the commit (HEAD's version of its
path, if any, is kept). The same rules gate what a push sends and a fetch brings in, so a
commit made here never makes a later sync refuse. No YAML here: every writer calls this.
"""

from __future__ import annotations

from qmem_git.core.limits import MAX_FILE_BYTES
from qmem_git.core.names import check_path_safety
from qmem_git.core.secrets import scan_for_secrets
from qmem_git.core.text import CONFLICT_LINE

SYMLINK = "symlink: memory files must be regular files inside the memory root (not followed)"
BEING_WRITTEN = "busy: changed a moment ago, still being written (committed once it is quiet)"


def hold_reason(rel: str, data: bytes) -> str | None:
    """``rule: message`` saying why ``data`` at ``rel`` must not be committed, or None: an
    unsafe path, over the size limit, not UTF-8 text (or a NUL byte), a conflict marker (a
    merge being resolved) or a credential in it. The writers refuse to write the same."""
    unsafe = check_path_safety(rel)
    if unsafe:
        return f"path-unsafe: {unsafe[0]}"
    if len(data) > MAX_FILE_BYTES:
        return f"size-limit: file is {len(data):,} bytes; the limit is {MAX_FILE_BYTES:,}"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "utf8: not UTF-8 text"
    if "\x00" in text:
        return "nul-byte: file contains a NUL byte (binary data)"
    marker = CONFLICT_LINE.search(text)
    if marker is not None:  # a merge in progress: the person resolving it is still writing
        return f"conflict-marker: git conflict marker '{marker.group()[:7]}'; resolve the conflict"
    secrets = scan_for_secrets(text)
    return (
        f"secret: possible secret: {secrets[0].label} ({secrets[0].rule_id})" if secrets else None
    )


def held_lines(held: dict[str, str]) -> list[str]:
    """``warning: PATH: REASON; not committed`` for each held file (stderr, hook log)."""
    return [f"warning: {rel}: {why}; not committed" for rel, why in sorted(held.items())]
