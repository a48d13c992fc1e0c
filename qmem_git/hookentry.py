"""``qmem-git hook [--agent qwen|claude] EVENT``: the Qwen Code / Claude Code hook adapter.

The agent sends one JSON object on stdin; we print at most one JSON object on stdout and always
exit 0 (agent-integration §3.3-§3.4, implementation note 8): an exit code of 2 would block the
user's prompt. Problems go to ``<state dir>/hook.log`` (never the prompt text).

UserPromptSubmit runs before every prompt, so its path imports only ``os``, ``sys``, the C JSON
scanner and the recall operation: no click, dulwich, yaml, and not even ``json`` (which pulls in
``re``) or ``settings`` (``dataclasses``, ``socket``: ~50 ms together). The memory layout is
therefore resolved with ``store.qwensettings.qwen_layout`` (light to import) rather than through
``settings.build_settings``; model settings load only when a model may be configured. Every other
event is rare and may import what it likes.

Per-session state (note 7) lives in ``<state dir>/hooks/<session>.json``: ``awaiting`` is set at
SessionStart and Stop and cleared by the next prompt, so tool-result continuations, crons and
subagent notices get no recall; ``offset`` is the transcript size last handed to extraction;
``mode`` (engine or companion) is decided once, at SessionStart, so the prompt hook reads no
settings file. Stop, PreCompact and SessionEnd add what the background watcher needs to end the
session when the agent's process is gone (``integrations.watcher``): ``agent_pid``, ``session``,
``scope``, ``transcript``, ``delay``, and ``ended`` once SessionEnd fired. The watcher removes
the file when it has run the session-end steps; SessionStart removes files a week old.
"""

from __future__ import annotations

import os
import posixpath
import sys

from qmem_git.core.jsonc import loads
from qmem_git.core.paths import expand_dir
from qmem_git.envvalues import watch_seconds
from qmem_git.fastpath import hub_set
from qmem_git.store.qwensettings import qwen_layout

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from qmem_git.modelconfig import ModelConfig

ENGINE = "engine"  # = integrations.agents.ENGINE / COMPANION (light to compare here)
COMPANION = "companion"
MARKER = "[qmem-git recall]"  # = integrations.transcripts.RECALL_MARKER (a test checks)
CONTEXT_CAP_BYTES = 8000  # note 9: ~6-8 KB; Claude moves >10,000 chars out to a file
SESSION_INDEX_BYTES = 6000
FIRST_PROMPT_INDEX_BYTES = 3000
HOOK_MODEL_CONNECT_SECONDS = 2.0  # one attempt: 2 s to connect, 5 s to answer, inside the
HOOK_MODEL_SECONDS = 5.0  # 10 s our settings snippets give the prompt hook
SESSION_DIR = "hooks"
STALE_SESSION_SECONDS = 7 * 24 * 3600  # a session state file untouched this long is dropped
AGENTS = ("qwen", "claude")
EVENTS = {
    "UserPromptSubmit": "UserPromptSubmit",
    "prompt": "UserPromptSubmit",
    "SessionStart": "SessionStart",
    "session-start": "SessionStart",
    "Stop": "Stop",
    "stop": "Stop",
    "PreCompact": "PreCompact",
    "pre-compact": "PreCompact",
    "SessionEnd": "SessionEnd",
    "session-end": "SessionEnd",
}
_VALUE_OPTIONS = ("--agent", "--project", "--memory-dir")
_IGNORED_FLAGS = ("--json", "-q", "--quiet", "-v", "--verbose")


class Hook:
    """One hook call: the agent, the event, what it sent, and where the memory lives."""

    __slots__ = (
        "agent",
        "event",
        "home",
        "memory_dir",
        "memory_root",
        "payload",
        "project",
        "state_dir",
    )

    def __init__(
        self,
        agent: str,
        event: str,
        payload: dict[str, object],
        project: str,
        memory_dir: str | None,
        home: str,
        layout: tuple[str, str],
    ) -> None:
        self.agent = agent
        self.event = event
        self.payload = payload
        self.project = project
        self.memory_dir = memory_dir
        self.home = home
        self.memory_root, self.state_dir = layout

    def text(self, key: str) -> str:
        value = self.payload.get(key)
        return value if isinstance(value, str) else ""

    @property
    def session(self) -> str:
        return self.text("session_id")

    def log(self, message: str) -> None:
        from qmem_git.integrations.agents import append_log, log_path

        append_log(log_path(self.state_dir), f"{self.agent} {self.event}: {message}")


def main(argv: list[str], stdin: bytes | None = None) -> int:
    """Run one hook call; whatever happens, the exit status is 0."""
    env = os.environ
    hook: Hook | None = None
    try:
        hook = prepare(argv, stdin, env)
        if hook is not None:
            HANDLERS[hook.event](hook, env)
    except Exception as exc:
        _log_crash(hook, argv, env, exc)
    except KeyboardInterrupt:
        pass
    return 0


# --------------------------------------------------------------------------- input


def prepare(argv: list[str], stdin: bytes | None, env: Mapping[str, str]) -> Hook | None:
    """Parse argv and the payload; log and return None when there is nothing we can act on."""
    opts, problem = parse_args(argv)
    raw = read_stdin() if stdin is None else stdin
    payload = parse_payload(raw)
    cwd = os.getcwd()
    home = env.get("HOME") or os.path.expanduser("~")
    cwd_value = payload.get("cwd") if payload else None
    project = (
        opts.get("--project")
        or (cwd_value if isinstance(cwd_value, str) and cwd_value else None)
        or env.get("QWEN_PROJECT_DIR")
        or env.get("CLAUDE_PROJECT_DIR")
        or cwd
    )
    project = expand_dir(project, home, cwd)
    memory_dir = opts.get("--memory-dir")
    memory_dir = expand_dir(memory_dir, home, cwd) if memory_dir else None
    event = EVENTS.get(opts.get("event") or "") or EVENTS.get(_text(payload, "hook_event_name"))
    agent = opts.get("--agent") or detect_agent(env, _text(payload, "transcript_path"))
    layout = memory_layout(project, memory_dir, env, home, agent)
    hook = Hook(agent, event or "?", payload or {}, project, memory_dir, home, layout)
    if problem or payload is None or event is None:
        reason = problem or ("unreadable or empty payload" if payload is None else "unknown event")
        hook.log(f"ignored: {reason} (argv: {' '.join(argv)[:200]})")
        return None
    if memory_dir is None and not os.path.isdir(project):
        return None  # no folder, no store: not even a hook.log (it would make the state dir)
    return hook


def parse_args(argv: list[str]) -> tuple[dict[str, str], str | None]:
    """``[--agent A] [--project P] [--memory-dir D] EVENT`` in any order; a problem or None."""
    opts: dict[str, str] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, _, inline = arg.partition("=")
        if name in _VALUE_OPTIONS:
            value = inline if inline else (argv[i + 1] if i + 1 < len(argv) else "")
            i += 1 if inline else 2
            opts[name] = value
        elif arg in _IGNORED_FLAGS:
            i += 1
        elif arg.startswith("-") or "event" in opts:
            return opts, f"unexpected argument {arg!r}"
        else:
            opts["event"] = arg
            i += 1
    agent = opts.get("--agent")
    if agent is not None and agent not in AGENTS:
        return opts, f"unknown agent {agent!r}"
    if opts.get("event") and opts["event"] not in EVENTS:
        return opts, f"unknown event {opts['event']!r}"
    return opts, None


MAX_PAYLOAD_BYTES = 16 * 1024 * 1024  # an event is a few KB; prompts are long, never this long


def read_stdin() -> bytes:
    """The event payload; one larger than ``MAX_PAYLOAD_BYTES`` (``</dev/zero``) reads as empty."""
    stream = sys.stdin
    if stream is None or stream.isatty():
        return b""
    data = stream.buffer.read(MAX_PAYLOAD_BYTES + 1)
    return b"" if len(data) > MAX_PAYLOAD_BYTES else data


def parse_payload(raw: bytes) -> dict[str, object] | None:
    """The event object, or None for empty input, garbage or a non-object."""
    text = raw.decode("utf-8", "replace").lstrip("\ufeff")
    try:
        value = loads(text)
    except Exception:
        return None
    return value if isinstance(value, dict) else None


def dumps_string(value: str) -> str:
    try:
        from _json import encode_basestring_ascii
    except ImportError:
        import json

        return json.dumps(value)
    return str(encode_basestring_ascii(value))


def _text(payload: dict[str, object] | None, key: str) -> str:
    value = payload.get(key) if payload else None
    return value if isinstance(value, str) else ""


def detect_agent(env: Mapping[str, str], transcript_path: str) -> str:
    """§3.6: Qwen sets QWEN_PROJECT_DIR; else the transcript's folder tells; else Claude."""
    if env.get("QWEN_PROJECT_DIR"):
        return "qwen"
    path = transcript_path.replace("\\", "/")
    if "/.qwen/" in path:
        return "qwen"
    return "claude"


# --------------------------------------------------------------------------- layout


def memory_layout(
    project: str, memory_dir: str | None, env: Mapping[str, str], home: str, agent: str = "qwen"
) -> tuple[str, str]:
    """(memory root, state dir) exactly as ``settings.build_settings`` resolves them: for
    Claude Code in companion mode (its own auto-memory on), Claude's folder."""
    if agent == "claude" and memory_dir is None and claude_companion(env, project, home):
        from qmem_git.store.claudesettings import claude_store

        layout = claude_store(project, env, home, os.getcwd())
    else:
        layout = qwen_layout(project, memory_dir, env, home, os.getcwd())
    return layout.memory_root, layout.state_dir


def claude_companion(env: Mapping[str, str], project: str, home: str) -> bool:
    """Whether a Claude Code session runs in companion mode (``agents.detect_mode``)."""
    from qmem_git.integrations.agents import detect_mode

    return detect_mode("claude", env, project, home) == COMPANION


# --------------------------------------------------------------------------- session state


def session_file(state_dir: str, session: str) -> str:
    """A file name from the session id: safe characters kept, the rest ``_``."""
    safe = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "-_.") else "_" for ch in session)
    safe = safe[:128].lstrip(".") or "_"
    return posixpath.join(state_dir, SESSION_DIR, safe + ".json")


def read_session(state_dir: str, session: str) -> dict[str, object] | None:
    """The session's state, None when no hook has recorded this session (or it has no id)."""
    if not session:
        return None
    try:
        with open(session_file(state_dir, session), "rb") as handle:
            data = parse_payload(handle.read())
    except OSError:
        return None
    return data if data is not None else {}


def write_session(state_dir: str, session: str, state: Mapping[str, object]) -> None:
    """Replace the session's state atomically (only where a memory state dir exists)."""
    if not session or not os.path.isdir(state_dir):
        return
    path = session_file(state_dir, session)
    os.makedirs(posixpath.dirname(path), exist_ok=True)
    temp = f"{path}.{os.getpid()}.tmp"
    with open(temp, "w", encoding="utf-8") as handle:
        handle.write(to_json(dict(state)) + "\n")
    os.replace(temp, path)


def to_json(value: object) -> str:
    """JSON text for the plain values a session state holds (no ``json``: the prompt hook)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return repr(value) if value == value and abs(value) != float("inf") else "null"
    if isinstance(value, str):
        return dumps_string(value)
    if isinstance(value, list):
        return "[" + ",".join(to_json(item) for item in value) + "]"
    if isinstance(value, dict):
        pairs = (f"{dumps_string(str(key))}:{to_json(item)}" for key, item in value.items())
        return "{" + ",".join(pairs) + "}"
    return "null"


def prune_sessions(state_dir: str, now: float) -> None:
    """Remove session files (and temp files) untouched for ``STALE_SESSION_SECONDS``: sessions
    whose end no hook or watcher saw (an agent killed along with its watcher)."""
    folder = posixpath.join(state_dir, SESSION_DIR)
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if not entry.name.endswith((".json", ".tmp")):
            continue
        try:
            if now - entry.stat(follow_symlinks=False).st_mtime > STALE_SESSION_SECONDS:
                os.unlink(entry.path)
        except OSError:
            continue


def _offset(state: Mapping[str, object] | None) -> int:
    value = state.get("offset") if state else None
    return value if isinstance(value, int) else 0


# --------------------------------------------------------------------------- output


def emit(event: str, context: str) -> None:
    """Note 8: one line, one object, context under hookSpecificOutput; nothing if empty."""
    if not context:
        return
    stream = sys.stdout
    if stream is None:  # started with stdout closed (``>&-``): there is no one to tell
        return
    line = (
        f'{{"hookSpecificOutput":{{"hookEventName":{dumps_string(event)},'
        f'"additionalContext":{dumps_string(context)}}}}}\n'
    )
    binary = getattr(stream, "buffer", None)
    if binary is not None:
        binary.write(line.encode("ascii"))
    else:
        stream.write(line)
    stream.flush()


def cap_lines(lines: list[str], budget: int) -> str:
    """Whole lines joined by newlines, stopping before ``budget`` UTF-8 bytes."""
    out: list[str] = []
    used = 0
    for line in lines:
        used += len(line.encode("utf-8")) + 1
        if used > budget:
            break
        out.append(line)
    return "\n".join(out)


def build_context(*blocks: str) -> str:
    """Marker line + blocks, capped at whole lines; our marker never appears twice (note 6)."""
    body = "\n\n".join(block.replace(MARKER, "[qmem-git]").strip("\n") for block in blocks if block)
    if not body.strip():
        return ""
    return cap_lines([MARKER, *body.split("\n")], CONTEXT_CAP_BYTES)


# --------------------------------------------------------------------------- events


def on_prompt(hook: Hook, env: Mapping[str, str]) -> None:
    """Recall for a user's prompt (the hot path); continuations get nothing (note 7), and
    neither does any prompt in companion mode: Qwen Code 0.24 recalls from the same memories
    before each prompt itself, and a memory must not reach the model twice."""
    if not os.path.isdir(hook.memory_root):
        return
    state = read_session(hook.state_dir, hook.session)
    mode = session_mode(hook, env, state)
    submitted = hook.payload.get("submitted_prompt")
    turn = isinstance(submitted, str) or state is None or state.get("awaiting") is True
    if state is None or state.get("mode") != mode or (turn and state.get("awaiting") is not False):
        update = {"mode": mode, **({"awaiting": False} if turn else {})}
        write_session(hook.state_dir, hook.session, {**(state or {}), **update})
    if mode == COMPANION or not turn:
        return
    query = submitted if isinstance(submitted, str) and submitted.strip() else hook.text("prompt")
    marker = query.find(MARKER)  # old Qwen builds merged our context into the prompt
    query = query if marker < 0 else query[:marker]
    index = ""
    if state is None and hook.agent == "claude":
        from qmem_git.integrations.agents import index_context

        index = cap_lines(index_context(hook.memory_root), FIRST_PROMPT_INDEX_BYTES)  # #10373
    emit("UserPromptSubmit", build_context(index, recall_block(hook, query, env)))


def session_mode(hook: Hook, env: Mapping[str, str], state: Mapping[str, object] | None) -> str:
    """The mode SessionStart recorded; without one (hooks installed mid-session, no session
    id) it is decided now, from ``QMEM_MODE`` and the agent's settings."""
    mode = state.get("mode") if state else None
    if mode in (ENGINE, COMPANION):
        return str(mode)
    from qmem_git.integrations.agents import detect_mode

    return detect_mode(hook.agent, env, hook.project, hook.home, hook.log)


def recall_block(hook: Hook, query: str, env: Mapping[str, str]) -> str:
    import time

    from qmem_git.core.paths import Layout
    from qmem_git.fastpath import record_recall, user_tier_too
    from qmem_git.ops.recall import recall

    if not query.strip():
        return ""
    started = time.monotonic()
    model = hook_model(hook, env)
    also: list[tuple[str, str | None]] = []
    if hook.agent == "qwen":  # Qwen Code recalls its user tier with the project's
        layout = Layout(hook.memory_root, hook.state_dir, "global", hook.project)
        also = user_tier_too(layout, hook.memory_dir, env, hook.home)
    now_ms = int(time.time() * 1000)
    result = recall(hook.memory_root, hook.state_dir, query, now_ms, model=model, also=also)
    if model is not None and result.strategy == "heuristic":
        hook.log("recall: the model did not answer in time or usably; used word matching")
    record_recall(env, hook.state_dir, query, result, started)
    return result.prompt


def hook_model(hook: Hook, env: Mapping[str, str]) -> ModelConfig | None:
    """The configured model for recall (spec §10.1 step 3), within the prompt hook's budget.

    The agent waits for this hook, so the model gets one attempt with short timeouts;
    otherwise recall falls back to word matching. Model settings (and the HTTP client) are
    loaded only when a model may be configured at all (``fastpath.configured_model``).
    """
    from qmem_git.fastpath import configured_model

    config = configured_model(env, hook.home)
    if config is None:
        return None
    from dataclasses import replace

    return replace(
        config,
        connect_timeout=min(config.connect_timeout, HOOK_MODEL_CONNECT_SECONDS),
        read_timeout=min(config.read_timeout, HOOK_MODEL_SECONDS),
        max_retries=0,
    )


def on_session_start(hook: Hook, env: Mapping[str, str]) -> None:
    """Decide the session's mode, arm recall for the first prompt, drop week-old session
    files; in engine mode show the MEMORY.md index.

    Companion mode means Qwen Code's own managed memory is on and already loads MEMORY.md,
    which must not be injected twice (§4 (3)).
    """
    import time

    from qmem_git.integrations import agents
    from qmem_git.integrations.agents import index_context

    prune_sessions(hook.state_dir, time.time())
    state = read_session(hook.state_dir, hook.session)
    mode = agents.detect_mode(hook.agent, env, hook.project, hook.home, hook.log)
    write_session(hook.state_dir, hook.session, {**(state or {}), "awaiting": True, "mode": mode})
    # pull in the background (through the hub when the store has no remote); never block
    if agents.can_sync(hook.memory_root, hub_set(env, hook.home)):
        pull = [agents.sync_step(_scope(hook), "--no-push")]
        log = agents.log_path(hook.state_dir)
        agents.spawn_detached(agents.worker_argv(pull, log, 0.0, None), hook.project)
    if mode == COMPANION:
        return
    index = cap_lines(index_context(hook.memory_root), SESSION_INDEX_BYTES)
    emit("SessionStart", build_context(index))


def on_stop(hook: Hook, env: Mapping[str, str]) -> None:
    """End of a turn: arm recall for the next prompt, extract the new part in the background."""
    if hook.payload.get("stop_hook_active"):
        return
    schedule(hook, env, awaiting=True)


def on_pre_compact(hook: Hook, env: Mapping[str, str]) -> None:
    """Extract what compaction is about to fold away; never block it (§3.3)."""
    schedule(hook, env, awaiting=None)


def on_session_end(hook: Hook, env: Mapping[str, str]) -> None:
    """Mark the session ended: the watcher runs its final extraction, gated dream (companion
    mode: snapshot) and push-sync once the folder is quiet (Claude kills us at ~1.5 s)."""
    schedule(hook, env, awaiting=False)


def schedule(hook: Hook, env: Mapping[str, str], awaiting: bool | None) -> None:
    """Record the session for the watcher and start the background worker for this event.

    ``awaiting`` None keeps the session's flag as it is. After a turn engine mode extracts the
    transcript's new part at once; everything else (companion mode's snapshots, the session's
    end) is the watcher's, and one already running for the store needs no new process.
    """
    from qmem_git.integrations import agents

    state = read_session(hook.state_dir, hook.session) or {}
    mode = session_mode(hook, env, state)
    transcript = transcript_for(hook, env) if mode == ENGINE else None
    size = _size(transcript)
    ended = hook.event == "SessionEnd"
    delay = agents.CLAUDE_FLUSH_DELAY_S if hook.agent == "claude" and transcript else 0.0
    agent = agents.agent_process(os.getppid())
    os.makedirs(posixpath.join(hook.state_dir, SESSION_DIR), exist_ok=True)
    if hook.memory_dir:  # the worker's commands refuse a missing --memory-dir; first use makes it
        os.makedirs(hook.memory_dir, exist_ok=True)
    record = {
        "awaiting": state.get("awaiting") is True if awaiting is None else awaiting,
        "offset": size or _offset(state),
        "mode": mode,
        "agent_pid": agent,
        "session": hook.session,
        "scope": _scope(hook),
        "transcript": transcript,
        "ended": ended,
        "delay": delay,
    }
    write_session(hook.state_dir, hook.session, {**state, **record})
    steps: list[list[str]] = []
    others = other_stores(hook, env)
    if ended and not hook.session:  # no state file to hand over: the end steps run at once
        hub = hub_set(env, hook.home)
        sync = agents.can_sync(hook.memory_root, hub)
        also = [(other["scope"], agents.can_sync(other["root"], hub)) for other in others]
        steps = agents.worker_steps(hook.event, mode, _scope(hook), transcript, "", sync, also)
    elif not ended and size is not None and size != _offset(state):  # engine: a new part
        steps = agents.worker_steps(hook.event, mode, _scope(hook), transcript, hook.session)
    watch = {"agent_pid": agent, "companion": mode == COMPANION, "others": others}
    watch["hub"] = hub_set(env, hook.home)
    start_worker(hook, env, steps, delay, watch)


def other_stores(hook: Hook, env: Mapping[str, str]) -> list[dict[str, Any]]:
    """The other stores this session's agent writes itself, that qmem-git versions too: for
    Qwen Code its user tier (``<base>/memories``: user and feedback memories), once
    ``qmem-git --tier user init`` has made its repository. Never made here."""
    from qmem_git.core.paths import git_dir_of

    if hook.agent != "qwen":
        return []
    user = qwen_layout(hook.project, None, env, hook.home, os.getcwd(), tier="user")
    root = user.memory_root
    if root == hook.memory_root or not os.path.isdir(git_dir_of(root)):
        return []
    return [{"root": root, "scope": ["--project", hook.project, "--tier", "user"]}]


def start_worker(
    hook: Hook,
    env: Mapping[str, str],
    steps: list[list[str]],
    delay: float,
    watch: dict[str, object],
) -> None:
    """Start a worker that runs ``steps`` and then watches the store, unless there are no
    steps and the store's watcher already runs (it reads the session file on its next poll)."""
    from qmem_git.integrations import agents

    sessions = posixpath.join(hook.state_dir, SESSION_DIR)
    if not steps and hook.session and agents.watcher_running(sessions):
        return
    quiet, grace = watch_seconds(env)
    watch.update(memory_root=hook.memory_root, sessions_dir=sessions, scope=_scope(hook))
    watch.update(quiet=quiet, grace=grace)
    argv = agents.worker_argv(steps, agents.log_path(hook.state_dir), delay, watch)
    agents.spawn_detached(argv, hook.project)


def _scope(hook: Hook) -> list[str]:
    """The global options that point a worker's qmem-git at this hook's memory (Claude's
    own folder: ``--agent claude``)."""
    scope = ["--project", hook.project]
    if hook.agent == "claude" and hook.memory_dir is None and _is_claude_store(hook):
        scope += ["--agent", "claude"]
    return scope + (["--memory-dir", hook.memory_dir] if hook.memory_dir else [])


def _is_claude_store(hook: Hook) -> bool:
    from qmem_git.core.claudepaths import STATE_SUFFIX

    return hook.state_dir == hook.memory_root + STATE_SUFFIX


def transcript_for(hook: Hook, env: Mapping[str, str]) -> str | None:
    """The payload's transcript_path, else where the agent keeps it (note 10)."""
    from qmem_git.integrations.agents import find_transcript

    path = hook.text("transcript_path")
    if path:
        path = expand_dir(path, hook.home, hook.project)
        if os.path.isfile(path):
            return path
    found = find_transcript(hook.agent, hook.project, hook.session, env, hook.home)
    if found is None:
        hook.log("no transcript found for this session; nothing to extract")
    return found


def _size(path: str | None) -> int | None:
    if path is None:
        return None
    try:
        return os.path.getsize(path)
    except OSError:
        return None


HANDLERS = {
    "UserPromptSubmit": on_prompt,
    "SessionStart": on_session_start,
    "Stop": on_stop,
    "PreCompact": on_pre_compact,
    "SessionEnd": on_session_end,
}


# --------------------------------------------------------------------------- failures


def _log_crash(hook: Hook | None, argv: list[str], env: Mapping[str, str], exc: Exception) -> None:
    """Where it failed (type, message, innermost frame): enough to report, no payload text."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
    message = f"internal error {type(exc).__name__}: {str(exc)[:300]}{where}"
    try:
        if hook is None:
            home = env.get("HOME") or os.path.expanduser("~")
            project = env.get("QWEN_PROJECT_DIR") or env.get("CLAUDE_PROJECT_DIR") or os.getcwd()
            layout = memory_layout(expand_dir(project, home, os.getcwd()), None, env, home)
            hook = Hook("?", "?", {}, project, None, home, layout)
        hook.log(message)
    except Exception:
        pass
