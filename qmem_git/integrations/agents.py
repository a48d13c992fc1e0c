"""What the agent hooks do besides recall: find transcripts, pick the mode, run background work.

``qmem_git.hookentry`` (the only module that reads the environment and prints) calls these with
plain values. Module-level imports stay at ``os``/``sys``/``time`` because the per-prompt hook
may load this module (its log and the first-prompt index); heavier imports sit in the functions
that need them (ARCHITECTURE §6).

Background work runs in a detached worker, ``python -m qmem_git.integrations.agents``, which
runs qmem-git commands one after another (``extract`` then ``dream`` at session end) so the hook
returns at once and the agent's kill timer (Claude: ~1.5 s at SessionEnd) cannot stop it.
"""

from __future__ import annotations

import os
import sys
import time

from qmem_git.core.limits import INDEX_NAME
from qmem_git.core.paths import git_dir_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

LOG_NAME = "hook.log"
LOG_CAP_BYTES = 256 * 1024
ENGINE = "engine"
COMPANION = "companion"
INDEX_HEADING = "## Memory index"
INDEX_INTRO = "Memories saved for this project (paths are relative to {root}):"
# Claude writes its transcript asynchronously (agent-integration §3.5): let it land first.
CLAUDE_FLUSH_DELAY_S = 1.0


# --------------------------------------------------------------------------- hook log


def log_path(state_dir: str) -> str:
    return os.path.join(state_dir, LOG_NAME)


def append_log(path: str, message: str, cap: int = LOG_CAP_BYTES) -> None:
    """One timestamped line; past ``cap`` the log moves to ``hook.log.1``. Never raises."""
    from qmem_git.store.telemetry import append_rotating

    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    line = f"{stamp} [{os.getpid()}] {message.replace(chr(10), ' | ')}\n".encode()
    append_rotating(path, line, cap)


# --------------------------------------------------------------------------- context


def index_context(memory_root: str, limit: int = 64 * 1024) -> list[str]:
    """The MEMORY.md entry lines under a heading (the caller caps them); [] if none."""
    try:
        with open(os.path.join(memory_root, INDEX_NAME), encoding="utf-8", errors="replace") as f:
            text = f.read(limit)
    except OSError:
        return []
    entries = [line for line in text.splitlines() if line.startswith("- [")]
    if not entries:
        return []
    return [INDEX_HEADING, "", INDEX_INTRO.format(root=memory_root), *entries]


# --------------------------------------------------------------------------- transcripts


def find_transcript(
    agent: str, project_dir: str, session_id: str, env: Mapping[str, str], home: str
) -> str | None:
    """Where the session's transcript is when the hook gave none (implementation note 10)."""
    if not session_id or "/" in session_id or "\\" in session_id or session_id in (".", ".."):
        return None
    if agent == "qwen":
        return _qwen_transcript(project_dir, session_id, env, home)
    return _claude_transcript(session_id, env, home)


def _qwen_transcript(
    project_dir: str, session_id: str, env: Mapping[str, str], home: str
) -> str | None:
    from qmem_git.core.paths import chats_dir, runtime_base_dir
    from qmem_git.store.qwensettings import runtime_output_dir

    output_dir = runtime_output_dir(env, home, project_dir, project_dir)
    chats = chats_dir(project_dir, env, home, project_dir, output_dir)
    direct = os.path.join(chats, f"{session_id}.jsonl")
    if os.path.isfile(direct):
        return direct
    base = runtime_base_dir(env, home, project_dir, output_dir, project_dir)
    return _first_match(base, "projects", "*", "chats", f"{session_id}.jsonl")


def _claude_transcript(session_id: str, env: Mapping[str, str], home: str) -> str | None:
    from qmem_git.core.paths import expand_dir

    override = env.get("CLAUDE_CONFIG_DIR", "")
    config = expand_dir(override, home, home) if override else os.path.join(home, ".claude")
    return _first_match(config, "projects", "*", f"{session_id}.jsonl")


def _first_match(*parts: str) -> str | None:
    """First path matching ``parts`` joined, where only a part that is exactly ``*`` is a glob."""
    import glob

    pattern = os.path.join(*(part if part == "*" else glob.escape(part) for part in parts))
    matches = sorted(glob.glob(pattern))
    return matches[0] if matches else None


# --------------------------------------------------------------------------- mode


def detect_mode(
    agent: str,
    env: Mapping[str, str],
    project_dir: str,
    home: str,
    report: Callable[[str], None] | None = None,
) -> str:
    """``engine`` (qmem-git extracts) or ``companion`` (Qwen Code writes, we commit).

    ``QMEM_MODE`` decides when set. Otherwise Qwen Code with its managed auto-memory on (the
    default, unless ``memory.enableManagedAutoMemory`` is false in the project's or the user's
    settings) is companion mode; everything else, Claude Code included, is engine mode.
    ``report`` hears about settings files that cannot be read (the hooks log them).
    """
    chosen = env.get("QMEM_MODE", "").strip().lower()
    if chosen in (ENGINE, COMPANION):
        return chosen
    if agent != "qwen":
        return ENGINE
    return COMPANION if qwen_managed_memory_on(project_dir, home, report) else ENGINE


def qwen_managed_memory_on(
    project_dir: str, home: str, report: Callable[[str], None] | None = None
) -> bool:
    """The project's ``.qwen/settings.json`` wins over the user's; the default is on (§4).

    A file that cannot be read or parsed (not UTF-8, not JSON) counts as one without the
    setting, and ``report`` is told why.
    """
    for base in (project_dir, home):
        value = _managed_memory_setting(os.path.join(base, ".qwen", "settings.json"), report)
        if value is not None:
            return value
    return True


def _managed_memory_setting(path: str, report: Callable[[str], None] | None) -> bool | None:
    from qmem_git.errors import QmemError
    from qmem_git.integrations.hooksettings import managed_memory_setting, read_settings

    try:
        settings, _ = read_settings(path)
    except QmemError as exc:
        if report is not None:
            report(f"{exc.message}; its Qwen Code memory setting is taken as unset")
        return None
    return managed_memory_setting(settings)


# --------------------------------------------------------------------------- background work


def worker_steps(
    event: str,
    mode: str,
    scope: Sequence[str],
    transcript: str | None,
    session_id: str,
    sync: bool = False,
) -> list[list[str]]:
    """The qmem-git commands (after ``qmem-git``) a Stop/PreCompact/SessionEnd hook runs.

    ``scope`` holds the global options (``--project``/``--memory-dir``). Companion mode only
    commits what Qwen Code wrote (no second extraction, no second dream). With ``sync`` (a
    remote is configured) the session ends with a push-sync.
    """
    base = ["-q", *scope]
    steps: list[list[str]] = []
    if mode == COMPANION:
        steps.append([*base, "snapshot"])
    else:
        if transcript:
            session = ["--session-id", session_id] if session_id else []
            steps.append([*base, "extract", "--transcript", transcript, *session])
        if event == "SessionEnd":
            dream = [*base, "dream", *(["--session-id", session_id] if session_id else [])]
            if transcript:  # the agent's own transcripts: Claude Code's are not in Qwen's chats
                dream += ["--transcripts-dir", os.path.dirname(os.path.abspath(transcript))]
            steps.append(dream)
    if sync and event == "SessionEnd":
        steps.append([*base, "sync"])
    return steps


def has_remote(memory_root: str) -> bool:
    """True when the memory repository has a git remote to sync with (reads .git/config)."""
    try:
        with open(os.path.join(git_dir_of(memory_root), "config"), encoding="utf-8") as handle:
            return '[remote "' in handle.read()
    except OSError:
        return False


def worker_argv(steps: Sequence[Sequence[str]], log: str, delay: float) -> list[str]:
    import json

    payload = json.dumps([list(step) for step in steps])
    return [sys.executable, "-m", "qmem_git.integrations.agents", log, str(delay), payload]


def spawn_detached(argv: Sequence[str], cwd: str | None) -> int:
    """Start ``argv`` in its own session, outliving the hook; returns its pid."""
    import subprocess

    detached = getattr(subprocess, "DETACHED_PROCESS", 0)
    new_group = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
    process = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=cwd if cwd and os.path.isdir(cwd) else None,
        close_fds=True,
        start_new_session=os.name != "nt",
        creationflags=detached | new_group if os.name == "nt" else 0,
    )
    return process.pid


def run_steps(argv: Sequence[str]) -> int:
    """Worker body: ``LOG DELAY STEPS_JSON``; each step runs even if an earlier one failed."""
    import json
    import subprocess

    log, delay, payload = argv
    steps = json.loads(payload)
    time.sleep(max(0.0, min(float(delay), 30.0)))
    worst = 0
    for step in steps:
        done = subprocess.run(
            [sys.executable, "-m", "qmem_git", *step],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            check=False,
        )
        if done.returncode:
            worst = done.returncode
            error = done.stderr.decode("utf-8", "replace").strip()[-600:]
            append_log(log, f"worker {_command_name(step)}: exit {done.returncode}: {error}")
    return worst


def _command_name(step: Sequence[str]) -> str:
    """The qmem-git command a worker step runs (what follows the global options)."""
    from qmem_git.fastpath import take_globals

    return next(iter(take_globals(list(step), {})), "step")


def worker_main(argv: Sequence[str]) -> int:
    if len(argv) != 3:
        return 2
    try:
        return run_steps(argv)
    except Exception as exc:  # the worker has no one to report to but the log
        append_log(argv[0], f"worker failed: {type(exc).__name__}: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
