"""What the agent hooks do besides recall: find transcripts, pick the mode, run background work.

``qmem_git.hookentry`` (the only module that reads the environment and prints) calls these with
plain values. Module-level imports stay at ``os``/``sys``/``time`` because the per-prompt hook
may load this module (its log and the first-prompt index); heavier imports sit in the functions
that need them (ARCHITECTURE §6).

Background work runs in a detached worker, ``python -m qmem_git.integrations.agents``, which
runs qmem-git commands one after another (an ``extract`` after a turn) so the hook returns at
once and the agent's kill timer (Claude: ~1.5 s at SessionEnd) cannot stop it; it then stays
on as the store's watcher (``integrations.watcher``) unless one already runs. The worker is
started in a session of its own with no pipe of the hook's: Qwen Code kills a hook's process
group when it exits, and an agent waits for a hook's pipes to close.
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
MAX_SETTINGS_BYTES = 16 * 1024 * 1024  # an agent settings file is a few KB; never read 4 GB
# What may stand between an agent and the hook it runs: Claude Code 2.1 starts hooks with
# `/bin/sh -c` (seen in tests/claude); Qwen Code 0.24's hook is the node process's own child
# (seen in tests/qwen), unless the hook command is a compound one a shell runs.
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox", "fish"})


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
    """``engine`` (qmem-git extracts) or ``companion`` (the agent writes, we commit).

    ``QMEM_MODE`` decides when set. Otherwise an agent whose own memory is on is companion
    mode: Qwen Code with its managed auto-memory on (the default, unless
    ``memory.enableManagedAutoMemory`` is false in the project's or the user's settings),
    Claude Code with its auto-memory on (the default, unless ``autoMemoryEnabled`` is false or
    ``CLAUDE_CODE_DISABLE_AUTO_MEMORY`` is set, ``store.claudesettings``); else engine mode.
    ``report`` hears about settings files that cannot be read (the hooks log them).
    """
    chosen = env.get("QMEM_MODE", "").strip().lower()
    if chosen in (ENGINE, COMPANION):
        return chosen
    if agent == "claude":
        from qmem_git.store.claudesettings import auto_memory_on

        return COMPANION if auto_memory_on(env, project_dir, home) else ENGINE
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
    """The file's setting, read with the JSON scanner the prompt hook already has; only a file
    that does not parse pays for the full settings reader, which says why."""
    settings = _light_settings(path)
    if settings is None:
        from qmem_git.errors import QmemError
        from qmem_git.integrations.hooksettings import read_settings

        try:
            settings, _ = read_settings(path)
        except QmemError as exc:
            if report is not None:
                report(f"{exc.message}; its Qwen Code memory setting is taken as unset")
            return None
    return managed_memory_setting(settings)


def _light_settings(path: str) -> Mapping[str, object] | None:
    """The settings object ({} when there is no file), or None when it does not read cleanly."""
    from qmem_git.core.jsonc import loads, strip_jsonc
    from qmem_git.regularfile import read_regular

    try:
        text = read_regular(path, MAX_SETTINGS_BYTES).decode("utf-8").lstrip("\ufeff")
        value = loads(strip_jsonc(text)) if text.strip() else {}
    except FileNotFoundError:
        return {}
    except Exception:  # unreadable, not UTF-8, not JSON: the full reader reports it
        return None
    return value if isinstance(value, dict) else None


def managed_memory_setting(settings: Mapping[str, object]) -> bool | None:
    """Qwen Code's ``memory.enableManagedAutoMemory`` in one settings object; None when unset.

    The nested ``{"memory": {...}}`` form wins over the flat ``"memory.enableManagedAutoMemory"``
    key; a value that is not a boolean reads as unset.
    """
    memory = settings.get("memory")
    value = memory.get("enableManagedAutoMemory") if isinstance(memory, dict) else None
    if value is None:
        value = settings.get("memory.enableManagedAutoMemory")
    return value if isinstance(value, bool) else None


# --------------------------------------------------------------------------- background work


def worker_steps(
    event: str,
    mode: str,
    scope: Sequence[str],
    transcript: str | None,
    session_id: str,
    sync: bool = False,
    others: Sequence[tuple[Sequence[str], bool]] = (),
) -> list[list[str]]:
    """The qmem-git commands (after ``qmem-git``) for a turn's end or a session's end.

    ``scope`` holds the global options (``--project``/``--memory-dir``). After a turn (Stop,
    PreCompact) engine mode extracts; companion mode runs nothing here, as the watcher commits
    what Qwen Code writes once it goes quiet. At a session's end engine mode extracts and
    dreams, companion mode takes a last snapshot (Qwen Code extracts and dreams itself), and
    with ``sync`` (a remote is configured) both push-sync. ``others``: (scope, sync) of the
    other stores the agent writes itself (Qwen Code's user tier, ``--tier user``): at a
    session's end each takes a snapshot, and push-syncs when it has a remote.
    """
    base = list(scope)  # not -q: their warnings go to the hook log
    session = ["--session-id", session_id] if session_id else []
    steps: list[list[str]] = []
    if mode == COMPANION:
        if event == "SessionEnd":
            steps.append([*base, "snapshot"])
    else:
        if transcript:
            steps.append([*base, "extract", "--transcript", transcript, *session])
        if event == "SessionEnd":
            dream = [*base, "dream", *session]
            if transcript:  # the agent's own transcripts: Claude Code's are not in Qwen's chats
                dream += ["--transcripts-dir", os.path.dirname(os.path.abspath(transcript))]
            steps.append(dream)
    if sync and event == "SessionEnd":
        steps.append(sync_step(base))
    for other, other_sync in others if event == "SessionEnd" else ():
        steps.append([*other, "snapshot"])
        steps += [sync_step(other)] if other_sync else []
    return steps


def sync_step(scope: Sequence[str], *options: str) -> list[str]:
    """``sync`` of exactly the store ``scope`` points at: with a hub set, a ``sync`` naming no
    store would sync every store of the project, so the project tier is named when nothing is."""
    named = any(flag in scope for flag in ("--tier", "--agent", "--memory-dir"))
    return [*scope, *([] if named else ["--tier", "project"]), "sync", *options]


def can_sync(memory_root: str, hub: bool) -> bool:
    """A store syncs after a session (and pulls at its start) when it has a remote of its
    own, or when the machine has a hub (``qmem-git hub set``)."""
    return hub or has_remote(memory_root)


def has_remote(memory_root: str) -> bool:
    """True when the memory repository has a git remote to sync with (reads .git/config)."""
    try:
        with open(os.path.join(git_dir_of(memory_root), "config"), encoding="utf-8") as handle:
            return '[remote "' in handle.read()
    except OSError:
        return False


def agent_process(parent: int) -> int:
    """The agent process that ran a hook whose parent is ``parent``: that parent, or, when it
    is a shell running a command (``sh -c``), the process that started the shell. Reads Linux
    ``/proc``; elsewhere the parent as it is."""
    pid = parent
    for _ in range(4):  # a shell that ran a shell at most, never a walk up to init
        found = _command_shell_parent(pid)
        if found is None or found <= 1:
            return pid
        pid = found
    return pid


def _command_shell_parent(pid: int) -> int | None:
    """The parent of ``pid`` when ``pid`` is a shell given a command (``-c``, ``-lc``): a
    user's interactive shell is the end of the line, not a step on the way to the agent."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            args = handle.read().split(b"\0")
    except OSError:
        return None
    close = stat.rfind(b")")  # the name may itself hold spaces and parentheses
    fields = stat[close + 2 :].split()
    name = stat[stat.find(b"(") + 1 : close].decode("utf-8", "replace")
    if close < 0 or len(fields) < 2 or not fields[1].isdigit() or name not in SHELLS:
        return None
    command = any(arg[:1] == b"-" and arg[1:2] != b"-" and b"c" in arg for arg in args[1:])
    return int(fields[1]) if command else None


WATCH_LOCK = "watcher.lock"


def watcher_running(sessions_dir: str) -> bool:
    """True while some process holds the store's watcher lock (``watcher.lock`` in the folder
    of the session files)."""
    path = os.path.join(sessions_dir, WATCH_LOCK)
    if not os.path.exists(path):
        return False
    from qmem_git.store.locks import TryLock

    lock = TryLock(path)
    if not lock.acquire():
        return True
    lock.release()
    return False


def worker_argv(
    steps: Sequence[Sequence[str]], log: str, delay: float, watch: Mapping[str, object] | None
) -> list[str]:
    """``LOG DELAY STEPS_JSON [WATCH_JSON]``: the steps, then the watcher (see
    ``integrations.watcher.WatchConfig`` for what ``watch`` holds)."""
    import json

    argv = [sys.executable, "-m", "qmem_git.integrations.agents", log, str(delay)]
    argv.append(json.dumps([list(step) for step in steps]))
    return argv + ([json.dumps(dict(watch))] if watch is not None else [])


def spawn_detached(argv: Sequence[str], cwd: str | None) -> int:
    """Start ``argv`` in its own session, outliving the hook; returns its pid.

    No descriptor of ours is inherited (stdin, stdout and stderr are ``/dev/null``): an agent
    reading the hook's output would otherwise wait for the worker to end.
    """
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


def run_step(step: Sequence[str], log: str) -> int:
    """Run one qmem-git command; its failure and its ``warning:`` lines go to the hook log."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "qmem_git", *step],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
    )
    name = command_name(step)
    error = done.stderr.decode("utf-8", "replace").strip()
    if done.returncode:
        append_log(log, f"worker {name}: exit {done.returncode}: {error[-600:]}")
        return done.returncode
    for line in error.splitlines():
        if line.startswith("warning:"):
            append_log(log, f"worker {name}: {line[:600]}")
    return 0


def run_steps(log: str, steps: Sequence[Sequence[str]]) -> int:
    """Each step runs even if an earlier one failed; the last failure's exit status."""
    worst = 0
    for step in steps:
        worst = run_step(step, log) or worst
    return worst


def command_name(step: Sequence[str]) -> str:
    """The qmem-git command a worker step runs (what follows the global options)."""
    from qmem_git.fastpath import take_globals

    opts: dict[str, object] = {}
    name = next(iter(take_globals(list(step), opts)), "step")
    tier = opts.get("tier")
    return f"{name} --tier {tier}" if isinstance(tier, str) and tier != "project" else name


def worker_main(argv: Sequence[str]) -> int:
    """``LOG DELAY STEPS_JSON [WATCH_JSON]``: wait DELAY seconds, run the steps, then watch."""
    if len(argv) not in (3, 4):
        return 2
    log = argv[0]
    try:
        import json

        time.sleep(max(0.0, min(float(argv[1]), 30.0)))
        code = run_steps(log, json.loads(argv[2]))
        if len(argv) == 4:
            from qmem_git.integrations.watcher import WatchConfig, watch

            watch(WatchConfig.from_json(argv[3], log))
        return code
    except Exception as exc:  # the worker has no one to report to but the log
        append_log(log, f"worker failed: {type(exc).__name__}: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
