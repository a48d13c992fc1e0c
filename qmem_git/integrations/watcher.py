"""The hooks' background watcher: commit what the agent writes once it goes quiet, and finish
sessions whose agent has gone.

Qwen Code's managed auto-memory writes memories in the background seconds after a turn's Stop
hook, each file truncated and then written; headless ``qwen -p`` and ``claude -p`` exit without
a SessionEnd event. So the Stop, PreCompact and SessionEnd hooks record the agent's process in
the session's state file (``hookentry``) and make sure one watcher runs per store. It:

- in companion mode polls the memory folder (name, size and mtime of each memory) and runs
  ``snapshot`` once nothing there has changed for the quiet window, so a file still being
  written is not committed;
- finishes each session whose state file names an agent process, once SessionEnd marked it
  ended or the process has been gone for the grace period (and the folder is quiet): whoever
  removes the state file runs the session-end steps, so they run once per session;
- leaves when every agent it knows of has been gone for the grace period and nothing is left.

One watcher per store: a non-blocking flock on ``watcher.lock`` beside the session files, which
the kernel releases when its holder dies, even by ``kill -9``; the file also names the holder's
pid, for people. A hook that finds the lock held starts nothing: the watcher reads the session
files on every poll. Before leaving it releases the lock and looks once more, so a session
recorded meanwhile is never stranded.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

from qmem_git.core.limits import INDEX_NAME
from qmem_git.integrations.agents import (
    COMPANION,
    WATCH_LOCK,
    append_log,
    can_sync,
    command_name,
    run_step,
    run_steps,
    worker_steps,
)
from qmem_git.store.locks import TryLock

TYPE_CHECKING = False
if TYPE_CHECKING:
    import psutil

POLL_S = 0.25
IDLE_POLL_S = 2.0  # after a minute without a change or a session to finish
IDLE_AFTER_S = 60.0
START_SLACK_S = 2.0  # clock granularity between a process's start and its hook's state file


@dataclass(frozen=True)
class WatchConfig:
    """What a hook hands the watcher: where the store and its session files are, the options
    that point qmem-git at it, the hook's agent process (0: unknown) and the timing."""

    memory_root: str
    sessions_dir: str
    scope: list[str]
    agent_pid: int
    companion: bool
    quiet: float
    grace: float
    log: str = ""
    # the other stores the agent writes itself (Qwen's user tier): {"root": ..., "scope": [...]}
    others: list[dict[str, Any]] = field(default_factory=list)
    hub: bool = False  # a hub is set: stores without a remote sync through it

    def to_json(self) -> dict[str, Any]:
        return {key: value for key, value in self.__dict__.items() if key != "log"}

    @classmethod
    def from_json(cls, text: str, log: str) -> WatchConfig:
        data = json.loads(text)
        return cls(**{**data, "scope": [str(part) for part in data["scope"]], "log": log})


@dataclass
class Session:
    """One session state file that names an agent process: what its end needs."""

    path: str
    session: str
    pid: int
    mode: str
    ended: bool
    written: float  # the file's mtime (wall clock)
    delay: float = 0.0
    scope: list[str] = field(default_factory=list)
    transcript: str | None = None


class Agent:
    """An agent process, and since when (monotonic) it is known to be gone."""

    def __init__(self, pid: int, started_before: float, now: float) -> None:
        self.process = _process(pid, started_before)
        self.gone_at: float | None = None if self.process is not None else now

    def gone_for(self, now: float) -> float:
        if self.gone_at is None and not _alive(self.process):
            self.gone_at = now
        return 0.0 if self.gone_at is None else now - self.gone_at


def _process(pid: int, started_before: float) -> psutil.Process | None:
    """The running process ``pid``, None when there is none or the
    pid now names a process started after ``started_before`` (wall clock): a reused pid."""
    import psutil

    if pid <= 0:
        return None
    try:
        process = psutil.Process(pid)
        if process.create_time() > started_before + START_SLACK_S:
            return None
    except psutil.Error:
        return None
    return process if _alive(process) else None


def _alive(process: psutil.Process | None) -> bool:
    """Running and not a zombie (an exited agent its parent has not reaped yet)."""
    import psutil

    if process is None:
        return False
    try:
        return bool(process.is_running()) and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


# --------------------------------------------------------------------------- the folder


def signature(root: str) -> frozenset[tuple[str, int, int]]:
    """(path, size, mtime) of every memory file below ``root`` (``*.md`` outside dot-folders
    such as ``.git``). MEMORY.md is left out: the agent rewrites it with each memory it
    writes, and a snapshot may rewrite it too, which must not look like the agent's next
    write."""
    found: set[tuple[str, int, int]] = set()
    pending = [root]
    while pending:
        try:
            entries = list(os.scandir(pending.pop()))
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                elif entry.name.endswith(".md") and entry.name != INDEX_NAME:
                    stat = entry.stat(follow_symlinks=False)
                    found.add((entry.path, stat.st_size, stat.st_mtime_ns))
            except OSError:
                continue  # removed while we looked: the next poll sees the change
    return frozenset(found)


class Folder:
    """The memory folder as last seen, when that last changed, and whether a change since the
    last snapshot is waiting. At the start a change is assumed: the agent may have written
    during the turn, before the hook ran."""

    def __init__(self, root: str, now: float) -> None:
        self.root = root
        self.seen = signature(root)
        self.changed_at = now
        self.dirty = True

    def poll(self, now: float) -> None:
        current = signature(self.root)
        if current != self.seen:
            self.seen, self.changed_at, self.dirty = current, now, True

    def quiet(self, now: float, window: float) -> bool:
        return now - self.changed_at >= window

    def committed(self, before: frozenset[tuple[str, int, int]], now: float) -> None:
        """A snapshot taken of ``before`` is done; anything that differs from it by now (the
        agent's next write) waits for one more quiet snapshot."""
        self.dirty = False
        self.seen = before
        self.poll(now)


# --------------------------------------------------------------------------- sessions


def read_sessions(sessions_dir: str) -> list[Session]:
    """The session state files that name an agent process (the others have nothing to end)."""
    try:
        names = sorted(name for name in os.listdir(sessions_dir) if name.endswith(".json"))
    except OSError:
        return []
    found = []
    for name in names:
        session = _read_session(os.path.join(sessions_dir, name))
        if session is not None:
            found.append(session)
    return found


def _read_session(path: str) -> Session | None:
    try:
        with open(path, "rb") as handle:
            data = json.loads(handle.read().decode("utf-8", "replace"))
        written = os.stat(path).st_mtime
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    pid, scope, transcript = data.get("agent_pid"), data.get("scope"), data.get("transcript")
    if not isinstance(pid, int) or not isinstance(scope, list):
        return None
    delay = data.get("delay")
    return Session(
        path=path,
        session=str(data.get("session") or ""),
        pid=pid,
        mode=str(data.get("mode") or ""),
        ended=data.get("ended") is True,
        written=written,
        delay=float(delay) if isinstance(delay, (int, float)) else 0.0,
        scope=[str(part) for part in scope],
        transcript=transcript if isinstance(transcript, str) else None,
    )


# --------------------------------------------------------------------------- the loop


class Watcher:
    """The watch loop's state: the agents it knows, the folder, the config."""

    def __init__(self, config: WatchConfig, now: float) -> None:
        self.config = config
        self.agents: dict[int, Agent] = {}
        self.folder: Folder | None = None
        self.others: list[tuple[Folder, list[str]]] = []
        self.last_activity = now
        if config.agent_pid > 0:
            self.agents[config.agent_pid] = Agent(config.agent_pid, time.time(), now)
        if config.companion:
            self._watch_folders(now)

    def _watch_folders(self, now: float) -> None:
        """Watch the store's folder, and the other stores' the agent writes (companion mode)."""
        self.folder = Folder(self.config.memory_root, now)
        self.others = [
            (Folder(str(other["root"]), now), [str(part) for part in other["scope"]])
            for other in self.config.others
        ]

    def step(self, now: float) -> bool:
        """One poll: snapshot a quiet change, finish sessions; False when nothing is left."""
        sessions = read_sessions(self.config.sessions_dir)
        for session in sessions:
            if session.pid not in self.agents:
                self.agents[session.pid] = Agent(session.pid, session.written, now)
            if session.mode == COMPANION and self.folder is None:
                self._watch_folders(now)
        folder = self.folder
        if folder is not None:
            folder.poll(now)
        settled = folder is None or folder.quiet(now, self.config.quiet)
        for session in sessions:
            if settled and self._ready(session, now):
                self._finish(session, now)
        if folder is not None and folder.dirty and folder.quiet(now, self.config.quiet):
            before = folder.seen
            run_step([*self.config.scope, "snapshot"], self.config.log)
            folder.committed(before, time.monotonic())
            self.last_activity = now
        if folder is not None and folder.dirty:
            self.last_activity = now
        others_dirty = self._snapshot_others(now)
        waiting = any(a.gone_for(now) < self.config.grace for a in self.agents.values())
        return bool(waiting or sessions or others_dirty or (folder is not None and folder.dirty))

    def _snapshot_others(self, now: float) -> bool:
        """Snapshot each other store (``--tier user``) once its folder is quiet after a change;
        True while a change there still waits."""
        for other, scope in self.others:
            other.poll(now)
            if other.dirty and other.quiet(now, self.config.quiet):
                before = other.seen
                run_step([*scope, "snapshot"], self.config.log)
                other.committed(before, time.monotonic())
                self.last_activity = now
        return any(other.dirty for other, _ in self.others)

    def _ready(self, session: Session, now: float) -> bool:
        if session.ended:
            return time.time() - session.written >= session.delay
        return self.agents[session.pid].gone_for(now) >= self.config.grace

    def _finish(self, session: Session, now: float) -> None:
        """Claim the session (remove its file) and run its end steps; the claim makes them run
        once even when a second watcher, or a real SessionEnd, got there first."""
        try:
            os.unlink(session.path)
        except FileNotFoundError:
            return
        hub = self.config.hub
        sync = can_sync(self.config.memory_root, hub)
        others = [(o["scope"], can_sync(str(o["root"]), hub)) for o in self.config.others]
        steps = worker_steps(
            "SessionEnd",
            session.mode,
            session.scope,
            session.transcript,
            session.session,
            sync,
            others,
        )
        why = "SessionEnd" if session.ended else "its agent has gone"
        names = ", ".join(command_name(step) for step in steps)
        append_log(self.config.log, f"watcher: session {session.session} ended ({why}): {names}")
        before = self.folder.seen if self.folder is not None else None
        others_before = [other.seen for other, _ in self.others]
        run_steps(self.config.log, steps)
        if self.folder is not None and before is not None and session.mode == COMPANION:
            self.folder.committed(before, time.monotonic())
            for (other, _), seen in zip(self.others, others_before, strict=True):
                other.committed(seen, time.monotonic())
        self.last_activity = now

    def poll_interval(self, now: float) -> float:
        return POLL_S if now - self.last_activity < IDLE_AFTER_S else IDLE_POLL_S


def watch(config: WatchConfig) -> None:
    """Be the store's watcher until nothing is left to do; return at once if one runs."""
    lock = TryLock(os.path.join(config.sessions_dir, WATCH_LOCK))
    if not lock.acquire():
        return
    _record_holder(lock.path)
    append_log(config.log, f"watcher: watching {config.memory_root}")
    watcher = Watcher(config, time.monotonic())
    while True:
        while _store_exists(config) and watcher.step(time.monotonic()):
            time.sleep(watcher.poll_interval(time.monotonic()))
        lock.release()
        if not (_store_exists(config) and read_sessions(config.sessions_dir)) or not lock.acquire():
            return  # nothing was recorded meanwhile, or a new watcher took it over


def _record_holder(path: str) -> None:
    """Write our pid into the lock file, for people (the flock is what counts)."""
    try:
        with open(path, "w", encoding="ascii") as handle:
            handle.write(f"{os.getpid()}\n")
    except OSError:
        pass


def _store_exists(config: WatchConfig) -> bool:
    """False once the store's folders are gone (a removed project or temporary folder)."""
    return os.path.isdir(config.sessions_dir)
