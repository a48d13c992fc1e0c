"""Fixed names and limits of the memory format (spec §1), in a module that costs nothing to import.

The per-prompt recall path reads these; ``core.model`` re-exports them for everyone else.
"""

INDEX_NAME = "MEMORY.md"
MAX_SCANNED_DOCUMENTS = 200
MAX_FILE_BYTES = 256 * 1024
# summary + why + how of one new fact: a memory is a fact, not a document (keeps files far below
# MAX_FILE_BYTES, which validate enforces)
MAX_FACT_CHARS = 16 * 1024
TYPE_NAMES = ("user", "feedback", "project", "reference")
# Machine-local state files in the state dir (spec §3): created with the scaffold.
META_NAME = "meta.json"
CURSOR_NAME = "extract-cursor.json"
SESSIONS_NAME = "extract-sessions.json"  # ours: the offsets of the last sessions (store.state)
# Folders writers and hooks make in the state dir (recall cache, hook state).
STATE_DIR_NAMES = ("cache", "hooks", "extract-queue")
# Files qmem-git keeps in a memory repository's .git: the record of the commit the git index was
# written for (store.gitindex) and the writer lock (store.locks). Either marks a memory folder.
INDEX_RECORD_NAME = "qmem-index"
# user.name / user.email from the git config, with the stat of its files (store.identity).
IDENTITY_RECORD_NAME = "qmem-identity"
WRITER_LOCK_NAME = "qmem.lock"
# a file whose mtime is this recent may still be being written (an agent truncates, then
# writes): writers hold it back from their commit until a later one finds it quiet
QUIET_SECONDS = 2.0
