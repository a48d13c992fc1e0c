"""The click-free runs of the commands agents and their hooks call all the time: ``recall``,
``remember`` and ``sync`` (after every session, where click's import was a fifth of a push).

``recall`` runs before every prompt; ``remember`` once per saved fact, and on a 10,000-file
store most of its time would otherwise go to imports (click ~35 ms, dulwich ~60 ms) and to the
``lstat`` survey of the work tree (~50 ms). Here ``remember`` takes the writer lock before any
other import, so the survey starts in a forked child (``store.survey``) while this process
imports the rest.

``__main__`` hands over only the plain argument shapes parsed here; anything else (``--help``,
``--dry-run``, ``--type=x``, unknown flags, a store that is not initialised yet) goes to the
click CLI, which implements the same commands with the same output.
"""

from __future__ import annotations

import sys

from qmem_git.core.limits import CURSOR_NAME, INDEX_NAME, META_NAME, TYPE_NAMES

CLAUDE_MODE = "claude"  # = core.claudepaths.CLAUDE_MODE (Layout.mode of Claude's folder)

TYPE_CHECKING = False  # typing itself is not imported on the recall path (~10 ms)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from qmem_git.core.changes import ChangeSet
    from qmem_git.core.paths import Layout
    from qmem_git.core.recall import RecallResult
    from qmem_git.modelconfig import ModelConfig
    from qmem_git.ops.runner import Outcome
    from qmem_git.ops.snapshot import SnapshotOutcome
    from qmem_git.store.writer import WriterStart

_GLOBAL_VALUE = {"--project": "project", "--memory-dir": "memory_dir", "--tier": "tier"}
_GLOBAL_VALUE["--agent"] = "agent"
TIERS = ("project", "user", "team")
_GLOBAL_FLAG = {"--json": "json", "-q": "quiet", "--quiet": "quiet", "-v": "verbose"}
_GLOBAL_FLAG["--verbose"] = "verbose"


def take_globals(args: list[str], opts: dict[str, object]) -> list[str]:
    """Consume the global options into ``opts``; the rest starts with the command name."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in _GLOBAL_FLAG:
            opts[_GLOBAL_FLAG[arg]] = True
            i += 1
        elif arg in _GLOBAL_VALUE and i + 1 < len(args):
            opts[_GLOBAL_VALUE[arg]] = args[i + 1]
            i += 2
        else:
            return args[i:]
    return []


def _options(rest: list[str], values: tuple[str, ...], opts: dict[str, object]) -> list[str] | None:
    """Split ``rest`` (after the command name) into ``--opt VALUE`` pairs and positionals.

    Values of the options named in ``values`` are collected into lists in ``opts``; any other
    dash argument returns None, so click parses (and explains) it.
    """
    positional: list[str] = []
    i = 1
    while i < len(rest):
        arg = rest[i]
        if arg in values and i + 1 < len(rest):
            found = opts.setdefault(arg, [])
            assert isinstance(found, list)
            found.append(rest[i + 1])
            i += 2
        elif arg.startswith("-") and arg != "-":
            return None
        else:
            positional.append(arg)
            i += 1
    return positional


def plain_globals(opts: dict[str, object]) -> bool:
    """False for what click must explain: ``-q`` with ``-v``, a ``--project`` or
    ``--memory-dir`` that is not an existing folder (exit 2, never created)."""
    import os

    if opts.get("quiet") and opts.get("verbose"):
        return False
    if opts.get("tier", "project") not in TIERS:
        return False  # click names the valid choices
    if opts.get("agent", "qwen") not in ("qwen", "claude"):
        return False  # click names the choices
    folders = (opts.get(key) for key in ("project", "memory_dir"))
    return all(
        os.path.isdir(os.path.expanduser(folder)) for folder in folders if isinstance(folder, str)
    )


# --------------------------------------------------------------------------- recall


def parse_recall(args: list[str]) -> dict[str, object] | None:
    """Parse ``[globals] recall QUERY [--limit N] [--exclude P]...``; None = let click do it."""
    opts: dict[str, object] = {}
    rest = take_globals(args, opts)
    if not rest or rest[0] != "recall":
        return None
    positional = _options(rest, ("--limit", "--exclude"), opts)
    limits = opts.pop("--limit", [])
    assert isinstance(limits, list)
    if positional is None or len(positional) != 1:
        return None
    if not all(value.isascii() and value.isdigit() for value in limits):
        return None  # negative, non-ASCII digits, not a number: click explains (or converts)
    opts["limit"] = int(limits[-1]) if limits else 5
    opts["exclude"] = opts.pop("--exclude", [])
    opts["query"] = positional[0]
    return opts


def fast_recall(opts: dict[str, object]) -> int:
    limit = opts.get("limit")
    excluded = opts.get("exclude")
    return run_recall(
        project=_str(opts.get("project")),
        memory_dir=_str(opts.get("memory_dir")),
        tier=_str(opts.get("tier")) or "project",
        query=str(opts.get("query", "")),
        limit=limit if isinstance(limit, int) else 5,
        exclude=[str(p) for p in excluded] if isinstance(excluded, list) else [],
        as_json=bool(opts.get("json")),
        quiet=bool(opts.get("quiet")),
        agent=str(opts.get("agent") or "qwen"),
    )


def run_recall(
    *,
    project: str | None,
    memory_dir: str | None,
    query: str,
    limit: int,
    exclude: list[str],
    as_json: bool,
    quiet: bool = False,
    tier: str = "project",
    agent: str = "qwen",
) -> int:
    """Print the Relevant memory block (or JSON) for ``query``; shared with the click command.

    Exit 1 when no memory matched (as for every command whose QUERY matches nothing); ``-q``
    prints nothing, so the exit status alone answers.
    """
    import os
    import time

    from qmem_git.ops.recall import recall, result_to_json

    started = time.monotonic()
    env = os.environ
    home = env.get("HOME") or os.path.expanduser("~")
    try:
        layout = store_layout(project, memory_dir, env, home, agent, tier)
        model = configured_model(env, home)
        also = user_tier_too(layout, memory_dir, env, home)
        result = recall(
            layout.memory_root,
            layout.state_dir,
            query,
            int(time.time() * 1000),
            limit=limit,
            excluded=tuple(exclude),
            model=model,  # None unless configured: requests is imported only then
            also=also,
            nested_type=layout.mode == CLAUDE_MODE,
        )
    except (Exception, KeyboardInterrupt) as exc:  # one Error: line, as in remember
        message, code, _ = failure(exc)
        sys.stderr.write(error_line(sys.stderr, message))
        return code
    record_recall(env, layout.state_dir, query, result, started)
    if as_json:
        import json

        sys.stdout.write(json.dumps(result_to_json(result), ensure_ascii=False, indent=2) + "\n")
    elif not quiet:
        sys.stdout.write(for_terminal(sys.stdout, result.prompt))
    if result.selected or limit == 0:
        return 0
    if not quiet and not as_json:
        sys.stderr.write(for_terminal(sys.stderr, f"No memory matches {query[:80]!r}.\n"))
    return 1


def user_tier_too(
    layout: Layout, memory_dir: str | None, env: Mapping[str, str], home: str
) -> list[tuple[str, str | None]]:
    """The user tier's (memory root, state dir) when recall on ``layout`` also reads it, as
    Qwen Code recalls the project and the user tier together: for the project tier, unless a
    ``--memory-dir`` names the one folder to read. The state dir (parse cache) only when the
    user store is set up: recall never creates it. Shared with the prompt hook."""
    import os

    if layout.tier != "project" or memory_dir:
        return []
    from qmem_git.envvalues import current_dir
    from qmem_git.store.qwensettings import qwen_layout

    project = layout.project_root or None
    user = qwen_layout(project, None, env, home, current_dir(), "user")
    if user.memory_root == layout.memory_root or not os.path.isdir(user.memory_root):
        return []
    return [(user.memory_root, user.state_dir if os.path.isdir(user.state_dir) else None)]


def store_layout(
    project: str | None,
    memory_dir: str | None,
    env: Mapping[str, str],
    home: str,
    agent: str,
    tier: str = "project",
) -> Layout:
    """The store the global options name: ``--agent claude`` is Claude Code's own folder."""
    from qmem_git.envvalues import current_dir
    from qmem_git.store.qwensettings import qwen_layout

    layout = qwen_layout(project, memory_dir, env, home, current_dir(), tier)
    if agent == "claude" or layout.mode == "explicit":
        from qmem_git.store.claudesettings import claude_layout_for

        layout, _ = claude_layout_for(layout, agent, project, env, home, current_dir())
    return layout


ERROR_LABEL = "\x1b[31m\x1b[1mError:\x1b[0m"  # click.style("Error:", fg="red", bold=True)


def colour_on(stream: object) -> bool:
    """Colour only on a terminal, and never with ``NO_COLOR`` set (no-color.org)."""
    import os

    isatty = getattr(stream, "isatty", None)
    return isatty is not None and bool(isatty()) and not os.environ.get("NO_COLOR")


def error_line(stream: object, message: str) -> str:
    """The one ``Error: ...`` line: whatever ``message`` holds stays on one line, control
    characters are spelled out on a terminal, and there ``Error:`` is red (not with NO_COLOR).
    Shared with the click commands."""
    if not message:  # Ctrl-C: exit 130 silently
        return ""
    label = ERROR_LABEL if colour_on(stream) else "Error:"
    return f"{label} {for_terminal(stream, ' '.join(message.split()))}\n"


def for_terminal(stream: object, text: str) -> str:
    """``text`` with its control characters spelled out when ``stream`` is a terminal (a
    hand-written memory or another machine's commit may hold escape sequences); exact when
    piped. Shared with the click commands."""
    isatty = getattr(stream, "isatty", None)
    if isatty is None or not isatty():
        return text
    from qmem_git.core.text import visible_controls

    return visible_controls(text)


def configured_model(env: Mapping[str, str], home: str) -> ModelConfig | None:
    """The configured model endpoint (spec §10.1 step 3), None when there is none.

    Shared by ``recall`` and the prompt hook. Model settings (``dataclasses``, ``json``) are
    imported only when a model may be configured at all, which a few ``stat`` calls tell.
    """
    import os

    from qmem_git.core.paths import model_may_be_configured

    if not model_may_be_configured(env, home, os.path.exists):
        return None
    from qmem_git.modelconfig import load_model_config

    return load_model_config(env, home).config


def record_recall(
    env: Mapping[str, str], state_dir: str, query: str, result: RecallResult, started: float
) -> None:
    """The recall telemetry event (no query text), unless ``QMEM_TELEMETRY=0`` or the state
    dir does not exist; ``started`` is a ``time.monotonic()`` reading. Shared with the hook."""
    import os
    import time

    if env.get("QMEM_TELEMETRY", "1") == "0" or not os.path.isdir(state_dir):
        return
    from qmem_git.store import telemetry

    elapsed = int((time.monotonic() - started) * 1000)
    telemetry.record_recall(
        state_dir, len(query), result.docs_scanned, len(result.selected), result.strategy, elapsed
    )


# --------------------------------------------------------------------------- remember


def parse_remember(args: list[str]) -> dict[str, object] | None:
    """Parse ``[globals] remember TEXT [--type T] [--why W] [--how H]``; None = click."""
    opts: dict[str, object] = {}
    rest = take_globals(args, opts)
    if not rest or rest[0] != "remember":
        return None
    positional = _options(rest, ("--type", "--why", "--how"), opts)
    if positional is None or len(positional) != 1:
        return None
    for flag in ("--type", "--why", "--how"):
        values = opts.pop(flag, [])
        assert isinstance(values, list)
        opts[flag[2:]] = values[-1] if values else None  # click: the last one wins
    if opts["type"] not in (None, *TYPE_NAMES):
        return None  # click names the valid choices
    opts["text"] = positional[0]
    return opts


def set_up_layout(opts: dict[str, object]) -> Layout | None:
    """The layout the global options name, when its store is set up (repository, MEMORY.md,
    meta and cursor files); None sends the command to click's path, which reports a bad
    option or creates what is missing."""
    import os

    from qmem_git.envvalues import current_dir
    from qmem_git.errors import QmemError
    from qmem_git.store.qwensettings import qwen_layout

    env = os.environ
    home = env.get("HOME") or os.path.expanduser("~")
    project, memory_dir = _str(opts.get("project")), _str(opts.get("memory_dir"))
    try:
        layout = qwen_layout(project, memory_dir, env, home, current_dir(), _tier(opts))
    except (QmemError, OSError):
        return None
    if layout.tier == "team":
        return None  # click's path refuses the write with its Error: line
    if os.path.isdir(layout.memory_root + ".qmem"):  # Claude's folder: click refuses
        return None
    needed = [layout.git_dir, os.path.join(layout.memory_root, INDEX_NAME)]
    needed += [layout.state_file(name) for name in (META_NAME, CURSOR_NAME)]
    return layout if all(os.path.exists(path) for path in needed) else None


def fast_remember(opts: dict[str, object]) -> int | None:
    """Save one memory as one commit; None when the store needs click's path (not set up).

    The cycle collector is off: this process lives ~150 ms and frees what it makes by
    reference counting, and at 10,000 files the collector's full passes over the stamps it
    loads cost up to ~15 ms.
    """
    import gc
    import os

    if opts.get("agent") == "claude":
        return None  # Claude's folder is Claude's: click refuses
    gc.disable()
    layout = set_up_layout(opts)
    if layout is None:
        return None
    project, memory_dir = _str(opts.get("project")), _str(opts.get("memory_dir"))
    root, env = layout.memory_root, os.environ
    try:
        from qmem_git.envvalues import lock_timeout
        from qmem_git.store.writer import WriterStart

        # lock first, survey forked at once: everything below imports while the child scans
        with WriterStart(layout, lock_timeout(env)) as started:
            outcome = _remember(opts, root, project, memory_dir, started)
    except (Exception, KeyboardInterrupt) as exc:  # every failure becomes one Error: line
        return report_failure(opts, exc)
    _report(opts, outcome, False, {})
    return 0


def _report(opts: dict[str, object], outcome: Outcome, dry_run: bool, held: dict[str, str]) -> None:
    """As ``cli.report_outcome``: held-back files (even with ``-q``: the hook worker logs
    them), then recovery's notes, then the commit or the plan."""
    extra: dict[str, object] = {"held": {**held_of(outcome), **held}} if held else {}
    text, data = describe_outcome(outcome, dry_run, extra)
    notes = held_warnings(outcome, held)
    if not opts.get("quiet"):
        notes += outcome_notes(outcome, bool(opts.get("verbose")))
    sys.stderr.write(for_terminal(sys.stderr, "".join(f"{line}\n" for line in notes)))
    _emit(opts, text, data)


def _remember(
    opts: dict[str, object],
    root: str,
    project: str | None,
    memory_dir: str | None,
    started: WriterStart,
) -> Outcome:
    import os
    from datetime import datetime, timezone

    from qmem_git.ops.remember import plan_patch, remember_patch
    from qmem_git.ops.runner import execute  # light: dulwich loads once recovery starts
    from qmem_git.settings import build_settings

    moment = datetime.now(timezone.utc)
    settings = build_settings(
        os.environ, project=project, memory_dir=memory_dir, with_model=False, tier=_tier(opts)
    )
    text, kind, why, how = (_str(opts.get(key)) for key in ("text", "type", "why", "how"))
    patch = remember_patch(text or "", kind=kind, why=why, how=how)  # refusals before dulwich

    def plan() -> ChangeSet:
        return plan_patch(root, patch, moment)

    return execute(settings, plan, moment, started=started)


def held_of(outcome: Outcome) -> dict[str, str]:
    """path -> why, for the files this command left uncommitted where they are."""
    held = dict(outcome.recovery.held) if outcome.recovery is not None else {}
    return {**held, **outcome.changeset.held}


def held_warnings(outcome: Outcome, more: dict[str, str] | None = None) -> list[str]:
    """``warning: PATH: REASON; not committed`` lines, printed even under ``-q``."""
    from qmem_git.core.holdback import held_lines

    held = {**held_of(outcome), **(more or {})}
    return held_lines(held) if held else []


# --------------------------------------------------------------------------- snapshot

SNAPSHOT_OPS = ("extract", "dream", "forget", "edit", "remember", "snapshot")


def parse_snapshot(args: list[str]) -> dict[str, object] | None:
    """Parse ``[globals] snapshot [--op OP] [--dry-run]``; None = click."""
    opts: dict[str, object] = {"op": None}
    rest = take_globals(args, opts)
    if not rest or rest[0] != "snapshot":
        return None
    i = 1
    while i < len(rest):
        if rest[i] == "--dry-run":
            opts["dry_run"] = True
            i += 1
        elif rest[i] == "--op" and i + 1 < len(rest) and rest[i + 1] in SNAPSHOT_OPS:
            opts["op"] = rest[i + 1]  # click: the last one wins
            i += 2
        else:
            return None  # --help, an unknown op, a stray argument: click explains
    return opts


def fast_snapshot(opts: dict[str, object]) -> int | None:
    """``snapshot`` without click, the lock taken and the survey forked before the imports
    (as ``remember``); None when stderr is a terminal (click colours the warnings) or the
    store is not set up yet (click's path creates it)."""
    import gc
    import os

    if getattr(sys.stderr, "isatty", lambda: True)() or opts.get("agent") == "claude":
        return None  # Claude's folder is committed as it is, by click's path
    gc.disable()  # as in remember: a short process that frees by reference counting
    layout = set_up_layout(opts)
    if layout is None:
        return None
    project, memory_dir = _str(opts.get("project")), _str(opts.get("memory_dir"))
    env = os.environ
    dry_run = bool(opts.get("dry_run"))
    try:
        from qmem_git.envvalues import lock_timeout
        from qmem_git.store.writer import WriterStart

        if dry_run:  # no lock, no survey: the plan alone
            result = _snapshot(opts, project, memory_dir, None)
        else:
            with WriterStart(layout, lock_timeout(env)) as started:
                result = _snapshot(opts, project, memory_dir, started)
    except (Exception, KeyboardInterrupt) as exc:  # every failure becomes one Error: line
        return report_failure(opts, exc)
    _report(opts, result.outcome, dry_run, result.held)
    return 0


def _snapshot(
    opts: dict[str, object],
    project: str | None,
    memory_dir: str | None,
    started: WriterStart | None,
) -> SnapshotOutcome:
    import os
    from datetime import datetime, timezone

    from qmem_git.ops.snapshot import run_snapshot
    from qmem_git.settings import build_settings

    settings = build_settings(
        os.environ, project=project, memory_dir=memory_dir, with_model=False, tier=_tier(opts)
    )
    moment = datetime.now(timezone.utc)
    op, dry_run = _str(opts.get("op")), bool(opts.get("dry_run"))
    return run_snapshot(settings, moment, op=op, dry_run=dry_run, started=started)


# --------------------------------------------------------------------------- sync

_SYNC_FLAGS = {"--dry-run": "dry_run", "--no-push": "no_push", "--force": "force"}


def parse_sync(args: list[str]) -> dict[str, object] | None:
    """Parse ``[globals] sync [REMOTE] [--dry-run] [--no-push] [--force]``; None = click."""
    opts: dict[str, object] = {}
    rest = take_globals(args, opts)
    if not rest or rest[0] != "sync":
        return None
    positional: list[str] = []
    for arg in rest[1:]:
        if arg in _SYNC_FLAGS:
            opts[_SYNC_FLAGS[arg]] = True
        elif arg.startswith("-"):
            return None  # --help, a global option after the name, a typo: click
        else:
            positional.append(arg)
    if len(positional) > 1:
        return None
    opts["remote"] = positional[0] if positional else None
    return opts


def fast_sync(opts: dict[str, object]) -> int | None:
    """``sync`` without click (~40 ms of a push's ~150); None when stderr is a terminal, where
    click's path draws the progress lines (and colours the notes)."""
    import os
    from datetime import datetime, timezone

    if getattr(sys.stderr, "isatty", lambda: True)() or opts.get("agent") == "claude":
        return None
    named = any(opts.get(key) is not None for key in ("tier", "agent", "memory_dir"))
    via_hub = opts.get("remote") is None and _hub_set()
    if via_hub and not named:  # the project's stores: click
        return None
    try:
        from qmem_git.core.paths import refuse_team_write
        from qmem_git.integrations.agents import has_remote
        from qmem_git.ops.sync import run_sync, sync_summary
        from qmem_git.settings import build_settings

        project, memory_dir = _str(opts.get("project")), _str(opts.get("memory_dir"))
        # no model config read: a sync never calls one
        settings = build_settings(
            os.environ, project=project, memory_dir=memory_dir, with_model=False, tier=_tier(opts)
        )
        refuse_team_write(settings.layout, "sync")
        if settings.agent == "claude":  # a Claude folder named by --memory-dir: click syncs it
            return None
        if via_hub and not has_remote(settings.layout.memory_root):
            return None  # through the hub: click's path
        outcome = run_sync(
            settings,
            datetime.now(timezone.utc),
            remote=_str(opts.get("remote")),
            dry_run=bool(opts.get("dry_run")),
            push=not opts.get("no_push"),
            force=bool(opts.get("force")),
        )
    except (Exception, KeyboardInterrupt) as exc:  # every failure becomes one Error: line
        return report_failure(opts, exc)
    if outcome.recovery is not None:
        from qmem_git.core.holdback import held_lines

        notes = held_lines(dict(outcome.recovery.held))  # even under -q, as click's path
        notes += [] if opts.get("quiet") else outcome.recovery.messages()
        sys.stderr.write(for_terminal(sys.stderr, "".join(f"{line}\n" for line in notes)))
    _emit(opts, sync_summary(outcome.result), outcome.as_dict())
    return 0


def _hub_set() -> bool:
    import os

    from qmem_git.hubconfig import hub_url

    return hub_url(os.environ, os.environ.get("HOME") or os.path.expanduser("~")) is not None


def outcome_notes(outcome: Outcome, verbose: bool) -> list[str]:
    """The side remarks of a writing command (stderr, silenced by ``-q``): what recovery did,
    and under ``-v`` the ChangeSet's notes. Shared with the click commands."""
    notes = outcome.recovery.messages() if outcome.recovery is not None else []
    return [*notes, *(outcome.changeset.notes if verbose else ())]


def describe_outcome(
    outcome: Outcome, dry_run: bool, extra: dict[str, object]
) -> tuple[str, dict[str, object]]:
    """A writing command's result as (text, JSON data): the ChangeSet on --dry-run, else the
    commit. Shared with the click commands."""
    cs = outcome.changeset
    data: dict[str, object] = {
        "op": cs.op,
        "dry_run": dry_run,
        "commit": outcome.commit,
        "subject": f"{cs.op}: {cs.subject}",
        "writes": sorted(cs.writes),
        "deletes": sorted(cs.deletes),
        "topics": list(cs.topics),
        "added": cs.added,
        "removed": cs.removed,
        "held": held_of(outcome),
        **extra,
    }
    if cs.is_empty and outcome.commit is None:
        text = "Nothing to change."
    elif dry_run:
        lines = [f"Would commit: {cs.op}: {cs.subject}"]
        lines += [f"  write  {path}" for path in sorted(cs.writes)]
        lines += [f"  delete {path}" for path in sorted(cs.deletes)]
        text = "\n".join(lines)
    else:
        short = outcome.commit[:12] if outcome.commit else "no commit"
        text = f"[{short}] {cs.op}: {cs.subject}"
    return text, data


def report_failure(opts: dict[str, object], exc: BaseException) -> int:
    """The ``Error:`` line (and, with ``-v``, the traceback of an unexpected error) a failed
    command prints, as click's path does; returns its exit code."""
    message, code, unexpected = failure(exc)
    if opts.get("verbose") and unexpected:
        import traceback

        traceback.print_exception(exc)
    sys.stderr.write(error_line(sys.stderr, message))
    return code


def failure(exc: BaseException) -> tuple[str, int, bool]:
    """(``Error:`` message, exit code, unexpected) for an exception that is not click's own;
    ``-v`` shows the traceback of unexpected ones."""
    from qmem_git.errors import QmemError

    if isinstance(exc, KeyboardInterrupt):
        return "", 130, False  # Ctrl-C: no message, the shell's convention for SIGINT
    refused = file_system_refusal(exc)
    if refused is not None:
        return str(refused), 4, False
    if isinstance(exc, QmemError):
        return str(exc), exc.exit_code, False
    if isinstance(exc, OSError):
        return f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), 1, True
    if isinstance(exc, RecursionError):
        hint = "a folder or tree in the memory repository is nested too deeply to read"
        return f"memory repository is too deep to read (hint: {hint})", 6, False
    name = type(exc).__name__
    return f"internal error: {name}: {exc} (hint: rerun with -v and report it)", 1, True


def file_system_refusal(exc: BaseException) -> BaseException | None:
    """A ``FileSystemRefused`` (exit 4) for a full disk or a refused write found in ``exc`` or
    its causes, else None; ``exc`` itself when it already is one."""
    import errno

    from qmem_git.errors import FileSystemRefused

    no_space = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC), errno.EFBIG}
    refused = {errno.EACCES, errno.EPERM, errno.EROFS}
    seen: BaseException | None = exc
    for _ in range(8):  # the chain of causes: a QmemError raised from the OSError
        if seen is None or isinstance(seen, FileSystemRefused):
            return seen
        if isinstance(seen, OSError) and seen.errno in no_space | refused:
            where = seen.filename or seen.filename2 or ""
            return _refusal(seen.errno in no_space, str(where), exc)
        seen = seen.__cause__ or seen.__context__
    return None


def _refusal(no_space: bool, where: str, exc: BaseException) -> BaseException:
    import os

    from qmem_git.errors import FileSystemRefused, QmemError

    what = exc.message if isinstance(exc, QmemError) else ""
    if no_space:
        message = what or f"no space left on the device{' for ' + where if where else ''}"
        hint = (
            "free some disk space and retry; nothing half-written was committed, and the next "
            "qmem-git command cleans up what was left"
        )
        return FileSystemRefused(message, hint)
    folder = os.path.dirname(where) if where else "the memory folder"
    message = what or f"permission denied{': ' + where if where else ''}"
    hint = (
        f"make {folder} writable for this user (check its owner and mode, and that the disk "
        "is not mounted read-only), or run qmem-git as its owner"
    )
    return FileSystemRefused(message, hint)


def _emit(opts: dict[str, object], text: str, data: object) -> None:
    """As ``cli.emit``: JSON under ``--json``, else ``text`` unless ``-q``."""
    if opts.get("json"):
        import json

        sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    elif text and not opts.get("quiet"):
        sys.stdout.write(for_terminal(sys.stdout, text + "\n"))


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _tier(opts: dict[str, object]) -> str:
    """``--tier`` (Qwen Code's memory tier), ``project`` when not given."""
    return _str(opts.get("tier")) or "project"
