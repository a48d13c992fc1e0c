"""The qmem-git command line: parse, build Settings, call one library function, render.

This is the only module that reads the environment and prints (ARCHITECTURE §2).
"""

from __future__ import annotations

import json
import os
import re
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click
from click.core import ParameterSource

from qmem_git import __version__
from qmem_git.core.limits import TYPE_NAMES
from qmem_git.errors import QmemError, UsageError
from qmem_git.fastpath import SNAPSHOT_OPS, colour_on, error_line, failure, for_terminal
from qmem_git.settings import Settings, build_settings

if TYPE_CHECKING:
    from qmem_git.integrations.hooksettings import InstallResult
    from qmem_git.ops.hubjobs import Job
    from qmem_git.ops.models import Strategy
    from qmem_git.ops.runner import Outcome
    from qmem_git.ops.sync import SyncOutcome
    from qmem_git.ops.validate import Report
    from qmem_git.store.history import LogEntry

F = TypeVar("F", bound=Callable[..., Any])
Styler = Callable[[str], str]
DEFAULT_PAGER = "less -FRX"


@dataclass
class Options:
    """Global flags, shared by every command through the click context."""

    project: str | None = None
    memory_dir: str | None = None
    tier: str = "project"
    json: bool = False
    quiet: bool = False
    verbose: bool = False
    pager: bool = True
    agent: str = "qwen"
    named: bool = False  # --tier, --agent or --memory-dir given: one store, not every one

    def settings(self, *, create: bool = False) -> Settings:
        """``create``: this command may make a missing ``--memory-dir`` (init, clone)."""
        from qmem_git.core.paths import refuse_team_write

        self.check_folders(create=create)
        settings = build_settings(
            os.environ,
            project=self.project,
            memory_dir=self.memory_dir,
            tier=self.tier,
            agent=self.agent,
        )
        command = click.get_current_context().command_path.split()[1:]  # "remote add"
        refuse_team_write(settings.layout, " ".join(command))
        if settings.agent == "claude":  # --agent claude, or a Claude folder named explicitly
            from qmem_git.ops.claude import check_claude_command

            self.agent = "claude"
            check_claude_command(" ".join(command))
        return settings

    def check_folders(self, *, create: bool = False) -> None:
        """Folders named on the command line must exist (exit 2): a typo is never created."""
        if self.project is not None:
            missing_folder("--project", self.project, "check the path; the project must exist")
        if self.memory_dir is not None and not create:
            missing_folder(
                "--memory-dir",
                self.memory_dir,
                "check the path, or make a store there with `qmem-git --memory-dir DIR init`",
            )


def missing_folder(option: str, path: str, hint: str) -> None:
    """A usage error unless ``path`` is an existing folder (a link loop says so)."""
    import stat

    try:
        if stat.S_ISDIR(os.stat(os.path.expanduser(path)).st_mode):
            return
        reason = "not a folder"
    except FileNotFoundError:
        reason = "no such folder"
    except OSError as exc:
        reason = exc.strerror or "cannot be read"
    raise UsageError(f"{option} {path}: {reason}", hint)


pass_options = click.make_pass_decorator(Options, ensure=True)


def now() -> datetime:
    return datetime.now(timezone.utc)


def emit(
    opts: Options,
    text: str = "",
    data: object = None,
    *,
    style: Styler | None = None,
    page: bool = False,
) -> None:
    """Print ``data`` as JSON under ``--json``, else ``text`` unless ``-q``.

    On a terminal, control characters in ``text`` are spelled out, then ``style`` colours it
    (unless ``NO_COLOR``), and with ``page`` it goes through the pager; piped, ``text`` is
    written exactly.
    """
    if opts.json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))
    elif text and not opts.quiet:
        shown = for_terminal(sys.stdout, text)
        if style is not None and colour_on(sys.stdout):
            shown = style(shown)
        pager = pager_command(opts) if page else None
        if pager is None:
            click.echo(shown, color=True)  # click would strip escapes it takes for colour
            return
        before = os.environ.get("PAGER")
        os.environ["PAGER"] = pager  # click's pager runs $PAGER (split like a shell would)
        try:
            click.echo_via_pager(shown, color=True)
        finally:  # not left behind for the rest of the process (demo, in-process runs)
            if before is None:
                del os.environ["PAGER"]
            else:
                os.environ["PAGER"] = before


def pager_command(opts: Options) -> str | None:
    """As git: ``$QMEM_PAGER``, else ``$PAGER``, else ``less -FRX``; none when stdout is not
    a terminal, with ``--no-pager`` or ``--json``, or when the pager is empty or ``cat``."""
    if not opts.pager or opts.json or not sys.stdout.isatty():
        return None
    chosen = os.environ.get("QMEM_PAGER", os.environ.get("PAGER", DEFAULT_PAGER)).strip()
    return None if chosen in ("", "cat") else chosen


def paint(text: str, fg: str, err: bool = False) -> str:
    """``click.style(text, fg=fg)`` when the stream is a terminal without ``NO_COLOR``."""
    return click.style(text, fg=fg) if colour_on(sys.stderr if err else sys.stdout) else text


def warn(text: str) -> None:
    """A ``warning: …`` line on stderr that ``-q`` does not silence."""
    head, sep, rest = for_terminal(sys.stderr, text).partition(":")
    click.echo(paint(head + sep, err=True, fg="yellow") + rest, err=True, color=True)


def note(opts: Options, text: str) -> None:
    """A side remark on stderr (recovery actions, warnings); silenced by ``-q``."""
    if not opts.quiet:
        shown = for_terminal(sys.stderr, text)
        head, sep, rest = shown.partition(":")
        if sep and head in ("warning", "note"):
            shown = paint(head + sep, err=True, fg="yellow") + rest
        click.echo(shown, err=True, color=True)


QUIET_HELP = "Print only errors (the exit status tells the rest)."
VERBOSE_HELP = "More detail: notes on what changed, tracebacks on internal errors."
NO_PAGER_HELP = "Do not page log, show, diff or history output."
AGENT_HELP = (
    "Whose memory folder: qwen (Qwen Code's, the default) or claude (Claude Code's own "
    "auto-memory, which qmem-git versions as Claude writes it)."
)
AGENT_CHOICE = click.Choice(["qwen", "claude"])
PROJECT_HELP = "Project directory (default: the current one); it must exist."
TIER_HELP = (
    "Which of Qwen Code's memory tiers: project (default), user (<base>/memories, yours on "
    "every project) or team (<git root>/.qwen/team-memory, committed with the project: "
    "read-only here)."
)
TIERS = ("project", "user", "team")
MEMORY_DIR_HELP = (
    "Use this memory root directly; its parent holds the state files. It must exist, "
    "except for init and clone, which create it."
)


def refuse_quiet_with_verbose(ctx: click.Context) -> None:
    opts = ctx.find_object(Options)
    if opts is not None and opts.quiet and opts.verbose:
        raise click.UsageError("-q/--quiet and -v/--verbose cannot be used together", ctx)


class QmemCommand(click.Command):
    """A command that refuses ``-q`` with ``-v``, wherever on the line they were given."""

    def invoke(self, ctx: click.Context) -> object:
        refuse_quiet_with_verbose(ctx)
        return super().invoke(ctx)


class QmemGroup(click.Group):
    command_class = QmemCommand
    group_class = type  # sub-groups (remote) are QmemGroups too

    def invoke(self, ctx: click.Context) -> object:
        refuse_quiet_with_verbose(ctx)
        return super().invoke(ctx)


@click.group(
    cls=QmemGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="Exit status: 0 ok; 1 nothing matched (a QUERY, PATH or filter you gave matched "
    "nothing: forget, restore, recall, history, log) or problems found (validate, index "
    "--check, doctor) or refused; 2 usage (bad option, missing folder); 3 lock busy; 5 remote "
    "unreachable; 6 repository corrupt.",
)
@click.option("--project", type=click.Path(file_okay=False), help=PROJECT_HELP)
@click.option("--memory-dir", type=click.Path(file_okay=False), help=MEMORY_DIR_HELP)
@click.option("--tier", type=click.Choice(TIERS), default="project", help=TIER_HELP)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("-q", "--quiet", is_flag=True, help=QUIET_HELP)
@click.option("-v", "--verbose", is_flag=True, help=VERBOSE_HELP)
@click.option("--no-pager", is_flag=True, help=NO_PAGER_HELP)
@click.option("--agent", type=AGENT_CHOICE, default="qwen", help=AGENT_HELP)
@click.version_option(__version__, prog_name="qmem-git")
@click.pass_context
def main(
    ctx: click.Context,
    project: str | None,
    memory_dir: str | None,
    tier: str,
    as_json: bool,
    quiet: bool,
    verbose: bool,
    no_pager: bool,
    agent: str,
) -> None:
    """Managed auto-memory for AI coding agents, kept as a reviewable git repository.

    Memories are markdown files under user/, feedback/, project/ and reference/ with a
    generated MEMORY.md index. Every change the agent makes is one git commit you can
    review (log, show, diff, history) and undo.

    \b
    Start with:
      qmem-git init                           make the memory folder a repository
      qmem-git install-hooks --agent claude   let the agent recall and extract
      qmem-git log --stat                     review what it learned (paged)

    On a terminal, log, show, diff and history go through a pager ($QMEM_PAGER, $PAGER,
    else less -FRX; --no-pager to turn it off) and output is coloured unless NO_COLOR is set.
    Global options may also follow the command name (qmem-git log --json).
    """
    ctx.obj = Options(project, memory_dir, tier, as_json, quiet, verbose, not no_pager, agent)
    given = {name: ctx.get_parameter_source(name) for name in ("tier", "agent")}
    named = any(source is not ParameterSource.DEFAULT for source in given.values())
    ctx.obj.named = named or memory_dir is not None


def run(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and translate every failure into one ``Error:`` line and an exit code."""
    verbose = "-v" in (argv or sys.argv[1:]) or "--verbose" in (argv or sys.argv[1:])
    try:
        result = main.main(
            args=list(argv) if argv is not None else None,
            prog_name="qmem-git",
            standalone_mode=False,
        )
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort as exc:  # click's word for Ctrl-C (and EOF at a prompt)
        interrupted = isinstance(exc.__context__, KeyboardInterrupt)
        return fail("", 130) if interrupted else fail("aborted", 1)
    except click.UsageError as exc:
        command = exc.ctx.command_path if exc.ctx else "qmem-git"
        return fail(f"{exc.format_message()} (hint: run '{command} --help')", 2)
    except click.ClickException as exc:
        return fail(exc.format_message(), exc.exit_code)
    except (Exception, KeyboardInterrupt) as exc:
        message, code, unexpected = failure(exc)
        return fail(message, code, verbose and unexpected)
    return result if isinstance(result, int) else 0


def fail(message: str, code: int, show_traceback: bool = False) -> int:
    """One ``Error:`` line on stderr (multi-line messages are joined; red on a terminal)."""
    if show_traceback:
        traceback.print_exc()
    click.echo(error_line(sys.stderr, message), err=True, nl=False, color=True)
    return code


def exit_with(code: int) -> NoReturn:
    raise click.exceptions.Exit(code)


def require(condition: bool, message: str, hint: str) -> None:
    if not condition:
        raise UsageError(message, hint)


# --------------------------------------------------------------------------- setup


@main.command()
@click.option(
    "--remote",
    "remote_url",
    metavar="URL",
    help="Share through this git remote (as 'origin'): adopt its memories when this store is "
    "empty, else merge and push.",
)
@pass_options
def init(opts: Options, remote_url: str | None) -> None:
    """Create the memory folder and make it a git repository (safe to run again).

    Existing memory files (for example ones Qwen Code already wrote) are committed as the
    first commit. A pre-commit hook is installed so hand-made commits are validated too
    (it finds qmem-git on PATH). With --remote URL the store is connected to that remote and
    synced once. A missing --memory-dir is created; --project must exist.
    """
    from qmem_git.ops.lifecycle import hook_command, init_memory

    settings = opts.settings(create=True)
    root = settings.layout.memory_root
    if opts.agent == "claude":
        require(
            not remote_url,
            "--remote is not for Claude Code's folder",
            "run `init` without it, then `remote add origin URL` and `sync`",
        )
        init_claude_store(opts, settings)
        return
    if remote_url:
        from qmem_git.ops.sync import clone_summary, connect

        outcome = connect(settings, remote_url, now(), progress=sync_progress(opts))
        emit(opts, clone_summary(outcome), outcome.as_dict())
        return
    result = init_memory(settings, hook_command(), now())
    from qmem_git.core.holdback import held_lines

    for line in held_lines(dict(result.held)):
        warn(line)
    text = (
        f"Initialized memory repository in {root} ({result.commit[:12]})"
        if result.commit
        else f"Memory repository in {root} is ready (already initialized)"
    )
    emit(opts, text, {"memory_root": root, "commit": result.commit, "held": dict(result.held)})


@main.command()
@pass_options
def where(opts: Options) -> None:
    """Show where this project's memory lives: memory root, state dir, mode, remotes."""
    from qmem_git.ops.lifecycle import describe_location

    settings = opts.settings()
    info = describe_location(settings)
    lines = [f"{key}: {value}" for key, value in info.items() if not isinstance(value, list)]
    remotes = info.get("remotes")
    lines += [f"remote: {remote}" for remote in remotes] if isinstance(remotes, list) else []
    emit(opts, "\n".join(lines), info)


@main.command()
@click.option(
    "--check", is_flag=True, help="Do not write; exit 1 if MEMORY.md is stale or over limits."
)
@click.option("--dry-run", is_flag=True, help="Print the new MEMORY.md instead of writing it.")
@pass_options
def index(opts: Options, check: bool, dry_run: bool) -> None:
    """Rebuild MEMORY.md from the memory files (committed as one `index` commit).

    The index lists the newest 200 memories, one line each (at most 150 characters),
    within 25,000 characters (UTF-16 code units); entries the limits drop are named.
    """
    from qmem_git.ops.lifecycle import check_index, rebuild_index

    settings = opts.settings()
    if check or dry_run:
        status = check_index(settings)
        if dry_run:
            emit(opts, status.expected, {"text": status.expected, "dropped": status.dropped})
            return
        data = {"up_to_date": status.up_to_date, "dropped": status.dropped}
        text = "MEMORY.md is up to date" if status.up_to_date else "MEMORY.md is stale"
        if status.dropped:
            text += "\nover limits, not listed: " + ", ".join(status.dropped)
        emit(opts, text, data)
        if not status.up_to_date:
            exit_with(1)
        return
    if settings.layout.tier == "team":
        _rebuild_team_index(opts, settings.layout.memory_root)
        return
    result = rebuild_index(settings, now())
    for line in result.notes:
        note(opts, line)
    emit(
        opts,
        f"MEMORY.md rebuilt ({result.commit[:12]})" if result.commit else "MEMORY.md is up to date",
        {"commit": result.commit, "dropped": result.dropped},
    )
    for path in result.dropped:
        note(opts, f"warning: over the index limits, not listed: {path}")


def _rebuild_team_index(opts: Options, root: str) -> None:
    """``index --tier team``: Qwen's team MEMORY.md written in the project, left for the
    project's git to commit (qmem-git never commits there)."""
    from qmem_git.ops.tierindex import write_team_index

    written, result = write_team_index(root)
    text = "MEMORY.md rebuilt (commit it with the project's git)" if written else ""
    emit(opts, text or "MEMORY.md is up to date", {"written": written, "dropped": result.dropped})
    for path in result.dropped:
        note(opts, f"warning: over the index limits, not listed: {path}")


STORES = (
    ("project", "project", "qwen"),
    ("user", "user", "qwen"),
    ("team", "team", "qwen"),
    ("claude", "project", "claude"),
)


@main.command()
@pass_options
def status(opts: Options) -> None:
    """What is not committed yet, what is held back and why, and how main stands against
    each remote (as last fetched). Reads only.

    With no --tier, --agent or --memory-dir: every store of this project and machine (the
    project, user and team tiers and Claude Code's folder), each with where it is and whether
    it is set up; --json gives a list of them. With one of those options: that store only.

    Held back: files that stay where they are, uncommitted, until fixed: a secret, over 256
    KiB, not UTF-8, a symlink, an unsafe name, a conflict marker, or still being written.
    """
    from qmem_git.ops.status import read_status, render_status

    if not opts.named:
        _status_of_every_store(opts)
        return
    found = read_status(opts.settings())
    emit(opts, render_status(found), found.as_dict())


def _status_of_every_store(opts: Options) -> None:
    """``status`` with no store named: the project, user and team tiers and Claude Code's
    folder of this project, each listed (one absent is said so, never made)."""
    from qmem_git.ops.status import read_all, render_all

    opts.check_folders()
    stores = [
        (name, build_settings(os.environ, project=opts.project, tier=tier, agent=agent))
        for name, tier, agent in STORES
    ]
    found = read_all(stores)
    emit(opts, render_all(found), [store.as_dict() for store in found])


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "gcc", "json"]),
    default="text",
    show_default=True,
    help="gcc: path:line:col: severity: message [rule-id] (for editors and CI); paths are "
    "absolute unless run inside the memory folder.",
)
@click.option(
    "--staged",
    is_flag=True,
    help="Check what a commit made now would add or change: the staged content of files "
    "that differ from HEAD, MEMORY.md as staged, and name collisions (the git hook's check).",
)
@pass_options
def validate(opts: Options, paths: tuple[str, ...], fmt: str, staged: bool) -> None:
    """Check memory files and MEMORY.md; exit 1 when any error is found.

    Without PATHs the whole memory folder is checked; with --staged only what the next
    commit changes. Every finding names a stable rule id (see the README); warnings
    (invisible Unicode, prompt-injection-like text) do not change the exit code.
    """
    from qmem_git.core.paths import is_inside
    from qmem_git.core.validate import format_findings
    from qmem_git.ops.validate import validate_paths, validate_tree

    settings = opts.settings()
    root = settings.layout.memory_root
    # relative PATHs are memory-root relative unless we are standing inside the root
    inside = is_inside(os.path.realpath(root), os.path.realpath(settings.cwd))
    if staged and paths:
        raise UsageError(
            "--staged checks what is staged, not given PATHs",
            "run `validate --staged` alone, or `validate PATH...` without it",
        )
    if staged:
        report = _staged_report(opts, settings)
    elif paths:
        report = validate_paths(root, paths, base=settings.cwd if inside else root)
    else:
        report = validate_tree(root)
    if opts.agent == "claude":
        from qmem_git.ops.claude import claude_report

        report = claude_report(report, root)
    if fmt == "gcc" and not inside:
        report = report.anchored(root)  # editors resolve paths against their own workspace
    chosen = "json" if opts.json else fmt
    findings = report.findings
    if opts.quiet and chosen != "json":  # -q: only the errors, no summary, no "No problems"
        findings = tuple(finding for finding in findings if finding.severity == "error")
    output = ""
    if findings or not opts.quiet or chosen == "json":
        output = format_findings(findings, chosen)  # type: ignore[arg-type]
    if chosen != "json" and colour_on(sys.stdout):
        output = style_severities(output)
    if chosen == "json" or output:
        click.echo(output, color=True)
    if chosen != "json" and not opts.quiet:
        errors, warnings = report.count("error"), report.count("warning")
        note(
            opts,
            f"{report.files_checked} file(s) checked: {errors} error(s), {warnings} warning(s)",
        )
    exit_with(report.exit_code)


# a finding's severity: gcc format (path:line:col: error: ...) or text format (  3:1  error ...)
SEVERITY = re.compile(r"^(.*?:\d+:\d+: |  \d+:\d+ +)(error|warning|info)(?=[: ])", re.M)
SEVERITY_STYLE: dict[str, dict[str, Any]] = {
    "error": {"fg": "red", "bold": True},
    "warning": {"fg": "yellow"},
    "info": {"fg": "cyan"},
}


def style_severities(text: str) -> str:
    """Each finding's severity coloured: error red, warning yellow, info cyan."""
    return SEVERITY.sub(lambda m: m[1] + click.style(m[2], **SEVERITY_STYLE[m[2]]), text)


def _staged_report(opts: Options, settings: Settings) -> Report:
    """``validate --staged``: the index git commits from (``GIT_INDEX_FILE`` in a hook, made by
    ``git commit -a`` or ``git commit PATH``); the whole folder when that index cannot be read."""
    from qmem_git.ops.validate import validate_staged, validate_tree
    from qmem_git.store.staged import IndexNotReadable

    root = settings.layout.memory_root
    if settings.layout.tier == "team":  # staged in the project's index: the pre-commit hooks
        note(opts, "note: --staged on --tier team checks the whole team folder")
        return validate_tree(root)
    index_file = settings.env.get("GIT_INDEX_FILE") or None
    try:
        return validate_staged(root, index_file and os.path.join(settings.cwd, index_file))
    except IndexNotReadable as exc:
        note(opts, f"warning: {exc.message}; checking the whole folder instead")
        return validate_tree(root)


# --------------------------------------------------------------------------- writing commands

dry_run_option = click.option(
    "--dry-run", is_flag=True, help="Show what would change; write nothing, commit nothing."
)


planner_option = click.option(
    "--planner",
    type=click.Choice(["auto", "heuristic", "model"]),
    default="auto",
    show_default=True,
    help="Who decides: auto = the model when one is configured (QMEM_LLM_*), else heuristic.",
)


def report_strategy(opts: Options, strategy: Strategy | None) -> dict[str, Any]:
    """Warn when the model was tried and not used; the ``--json`` fields either way."""
    if strategy is None:
        return {"strategy": None, "model_fallback": None}
    if strategy.fallback and strategy.fallback != "no-op":
        note(opts, f"warning: model not used ({strategy.fallback}); used the heuristic planner")
    return strategy.as_dict()


def report_outcome(
    opts: Options,
    outcome: Outcome,
    dry_run: bool,
    extra: dict[str, Any],
    held: dict[str, str] | None = None,
) -> None:
    """Render a writing command's result: the ChangeSet on --dry-run, else the commit. Files
    left uncommitted are warned about even under -q (the hook worker logs stderr)."""
    from qmem_git.fastpath import describe_outcome, held_of, held_warnings, outcome_notes

    for line in held_warnings(outcome, held):
        warn(line)
    if held:
        extra = {"held": {**held_of(outcome), **held}, **extra}
    for line in outcome_notes(outcome, opts.verbose):
        note(opts, line)
    text, data = describe_outcome(outcome, dry_run, extra)
    emit(opts, text, data)


@main.command()
@click.argument("text")
@click.option(
    "--type",
    "kind",
    type=click.Choice(TYPE_NAMES),
    help="Memory type (default: classified from the text, else user).",
)
@click.option("--why", help="Why this matters (stored as a 'Why:' line).")
@click.option("--how", help="How to apply it (stored as a 'How to apply:' line).")
@dry_run_option
@pass_options
def remember(
    opts: Options, text: str, kind: str | None, why: str | None, how: str | None, dry_run: bool
) -> None:
    """Save one memory as one commit.

    \b
    Examples:
      qmem-git remember "I prefer terse responses" --why "asked for brevity"
      qmem-git remember --type project "Release freeze starts 2026-03-05"
    """
    from qmem_git.ops.lifecycle import ensure_repository
    from qmem_git.ops.remember import plan_remember
    from qmem_git.ops.runner import execute

    settings = opts.settings()
    moment = now()
    ensure_repository(settings, moment, dry_run=dry_run)
    root = settings.layout.memory_root
    outcome = execute(
        settings,
        lambda: plan_remember(root, text, kind=kind, why=why, how=how, now=moment),
        moment,
        dry_run=dry_run,
    )
    report_outcome(opts, outcome, dry_run, {})


# --------------------------------------------------------------------------- review


def log_entry_json(entry: LogEntry) -> dict[str, Any]:
    data = entry.as_dict()
    data["paths"] = list(entry.info.paths)
    return data


def log_entry_text(entry: LogEntry, stat: bool) -> str:
    info = entry.info
    when = datetime.fromtimestamp(entry.time, timezone.utc).strftime("%Y-%m-%d %H:%M")
    line = f"{entry.commit[:10]} {when} {info.subject}"
    extras = [f"session {info.session[:12]}" if info.session else "", info.host or ""]
    extras = [x for x in extras if x]
    if extras:
        line += f"  ({', '.join(extras)})"
    if stat:
        line += "".join(f"\n    {c.status} {c.path}" for c in info.changes)
    return line


@main.command()
@click.option(
    "-n", "--max-count", "limit", type=click.IntRange(min=1), help="Show at most N operations."
)
@click.option("--op", help="Only this operation (extract, dream, forget, remember, undo, ...).")
@click.option("--path", help="Only operations that touched this file or folder.")
@click.option("--stat", is_flag=True, help="List the files each operation changed.")
@pass_options
def log(opts: Options, limit: int | None, op: str | None, path: str | None, stat: bool) -> None:
    """History of memory operations, newest first (paged on a terminal).

    Reads the operation, session, topics and changed files from each commit's trailers.
    Exits 1 when --op or --path matches nothing.

    \b
    Examples:
      qmem-git log -n 5 --stat
      qmem-git log --op forget
      qmem-git log --path user/
    """
    from qmem_git.ops.history import log as read_log
    from qmem_git.ops.required import require_repository

    settings = opts.settings()
    rel = relative_to_root(settings, path) if path is not None else None
    if settings.layout.tier == "team":
        from qmem_git.ops.teamhistory import team_log

        found = team_log(settings.layout, limit=None if op else limit, path=rel)
        entries = [entry for entry in found if op is None or entry.op == op][:limit]
    else:
        require_repository(settings)
        entries = read_log(settings.layout.memory_root, limit=limit, op=op, path=rel)
    text = "\n".join(log_entry_text(e, stat) for e in entries) or no_operations(op, path)
    emit(opts, text, [log_entry_json(e) for e in entries], style=style_log, page=True)
    if not entries and (op is not None or path is not None):  # a filter that matched nothing
        exit_with(1)


LOG_LINE = re.compile(r"^([0-9a-f]{10}) (\S+ \S+) ", re.M)
COMMIT_LINE = re.compile(r"^(commit [0-9a-f]{40})$", re.M)


def style_log(text: str) -> str:
    """``log``/``history`` lines: the commit id yellow, the date dim (as git colours them)."""
    return LOG_LINE.sub(
        lambda m: f"{click.style(m[1], fg='yellow')} {click.style(m[2], dim=True)} ", text
    )


def style_show(text: str) -> str:
    """``show``: the ``commit`` heading yellow, the diff coloured."""
    from qmem_git.core.unidiff import colorize

    head, sep, rest = text.partition("\n\n")
    head = COMMIT_LINE.sub(lambda m: click.style(m[1], fg="yellow"), head)
    return head + sep + colorize(rest) if sep else colorize(text)


def style_diff(text: str) -> str:
    from qmem_git.core.unidiff import colorize

    return colorize(text)


def no_operations(op: str | None, path: str | None) -> str:
    """What ``log`` prints when nothing is listed: say which filter matched nothing."""
    what = f"No {op} operations" if op else "No operations"
    if path is not None:
        return f"{what} touched {path}."
    return f"{what}." if op else "No operations yet."


@main.command()
@click.argument("rev", required=False, default="HEAD")
@pass_options
def show(opts: Options, rev: str) -> None:
    """Show one operation: its message, trailers and diff (default: the last one).

    REV is a commit id from `qmem-git log` (4+ hex digits), HEAD, HEAD~N or HEAD^.
    Paged on a terminal.
    """
    from qmem_git.ops.history import show as show_commit
    from qmem_git.ops.required import require_repository

    settings = opts.settings()
    if settings.layout.tier == "team":
        from qmem_git.ops.teamhistory import team_show

        entry, diff_text = team_show(settings.layout, rev)
        message = entry.info.subject
    else:
        require_repository(settings)
        result = show_commit(settings.layout.memory_root, rev)
        entry, diff_text, message = result.entry, result.diff_text, result.message
    header = f"commit {entry.commit}\nAuthor: {entry.author}\n"
    header += f"Date:   {datetime.fromtimestamp(entry.time, timezone.utc).isoformat()}\n"
    body = "\n".join("    " + line for line in message.rstrip("\n").split("\n"))
    emit(
        opts,
        header + "\n" + body + "\n\n" + diff_text,
        {**log_entry_json(entry), "message": message, "diff": diff_text},
        style=style_show,
        page=True,
    )


@main.command()
@click.argument("revs", nargs=-1)
@pass_options
def diff(opts: Options, revs: tuple[str, ...]) -> None:
    """Unified diff of memory changes (coloured and paged on a terminal).

    \b
    qmem-git diff          what the last operation changed
    qmem-git diff A        changes from A to HEAD
    qmem-git diff A B      changes from A to B
    """
    from qmem_git.ops.history import diff as diff_revs
    from qmem_git.ops.required import require_repository

    require(len(revs) <= 2, "diff takes at most two revisions", "qmem-git diff [REV [REV]]")
    settings = opts.settings()
    if settings.layout.tier == "team":
        from qmem_git.ops.teamhistory import team_diff

        text, files = team_diff(settings.layout, revs)
    else:
        require_repository(settings)
        result = diff_revs(settings.layout.memory_root, revs)
        text, files = result.text, [f.as_dict() for f in result.files]
    emit(
        opts,
        text or "No changes.",
        {"files": files, "diff": text},
        style=style_diff,
        page=True,
    )


@main.command()
@click.argument("path")
@pass_options
def history(opts: Options, path: str) -> None:
    """Every operation that touched one memory file, including its creation and deletion.

    PATH is relative to the memory folder (user/terse.md) or a path inside it. Exits 1 when
    the file has no history. Paged on a terminal.
    """
    from qmem_git.ops.history import history as file_history
    from qmem_git.ops.required import require_repository

    settings = opts.settings()
    rel = relative_to_root(settings, path)
    if settings.layout.tier == "team":
        from qmem_git.ops.teamhistory import team_log

        entries = team_log(settings.layout, path=rel)
    else:
        require_repository(settings)
        entries = file_history(settings.layout.memory_root, rel)
    text = "\n".join(log_entry_text(e, True) for e in entries) or f"No history for {path}."
    emit(opts, text, [log_entry_json(e) for e in entries], style=style_log, page=True)
    if not entries:
        exit_with(1)


def relative_to_root(settings: Settings, path: str) -> str:
    """Accept a path relative to the memory root, or an absolute/cwd path inside it.

    The result is normalised (``user/../user/a.md`` is ``user/a.md``); the root itself is ".".
    """
    import posixpath

    root = os.path.realpath(settings.layout.memory_root)
    candidate = os.path.realpath(os.path.join(settings.cwd, path))
    if candidate == root or candidate.startswith(root + os.sep):
        return os.path.relpath(candidate, root).replace(os.sep, "/")
    return posixpath.normpath(path.replace(os.sep, "/").lstrip("/"))


@main.command()
@click.argument("rev", required=False)
@click.option(
    "--force", is_flag=True, help="Undo even if a later operation changed the same files."
)
@dry_run_option
@pass_options
def undo(opts: Options, rev: str | None, force: bool, dry_run: bool) -> None:
    """Revert one operation (default: the last) as a new commit.

    REV is a commit id from `qmem-git log`, HEAD or HEAD~N. Refuses when a later operation
    changed the same files (unless --force); to bring back one forgotten memory, `restore`
    is finer-grained.
    """
    from qmem_git.ops.required import require_store
    from qmem_git.ops.runner import execute
    from qmem_git.ops.undo import plan_undo, undo_target

    settings = opts.settings()
    require_store(settings)
    root = settings.layout.memory_root
    # before the writer's recovery can commit hand edits: REV means what the user saw
    target = undo_target(root, rev)
    outcome = execute(
        settings, lambda: plan_undo(root, target, force=force), now(), dry_run=dry_run
    )
    if not opts.verbose:  # -v prints every note already; paths left alone always matter
        for line in outcome.changeset.notes:
            note(opts, line)
    report_outcome(opts, outcome, dry_run, {"notes": list(outcome.changeset.notes)})


# --------------------------------------------------------------------------- lifecycle


@main.command()
@click.option(
    "--transcript",
    required=True,
    type=click.Path(dir_okay=False),
    help="Qwen Code or Claude Code JSONL transcript, or a JSON list of {role, text}.",
)
@click.option("--session-id", help="Session id (default: read from the transcript).")
@planner_option
@dry_run_option
@pass_options
def extract(
    opts: Options, transcript: str, session_id: str | None, planner: str, dry_run: bool
) -> None:
    """Distil durable facts from a conversation into memories (one commit).

    Only the part of the transcript after the last extraction of the same session is
    read. Turns in which the agent already wrote memory are skipped; text containing a
    secret is never written. If another extraction for this project is running, this
    request is queued and run by it when it finishes (per session, the latest request wins).
    """
    from qmem_git.ops.pipeline import ExtractRequest, run_extract

    settings = opts.settings()
    request = ExtractRequest(transcript, session_id, planner)
    result = run_extract(settings, request, now(), dry_run=dry_run)
    if result.status == "queued":
        emit(opts, "Another extraction is running; this request is queued.", {"status": "queued"})
        return
    plan = result.plan
    assert plan is not None and result.outcome is not None
    if plan.bad_lines:
        note(opts, f"warning: skipped {plan.bad_lines} unreadable transcript line(s)")
    for rule in plan.dropped_secrets:
        note(opts, f"warning: dropped a candidate memory containing a secret [{rule}]")
    extra = {
        "status": result.status,
        "skipped_reason": result.skipped_reason,
        "patches": [
            {"topic": p.topic, "summary": p.summary, "sourceOffset": p.source_offset}
            for p in plan.patches
        ],
        "touchedTopics": plan.touched_topics,
        "systemMessage": plan.system_message,
        "dropped_secrets": plan.dropped_secrets,
        "bad_lines": plan.bad_lines,
        **report_strategy(opts, plan.strategy),
    }
    if result.status == "skipped":
        emit(opts, f"Skipped: {result.skipped_reason}", extra)
        return
    report_outcome(opts, result.outcome, dry_run, extra)


@main.command()
@click.option("--force", is_flag=True, help="Skip the time/session gates (not the lock).")
@click.option("--session-id", help="Current session id (for the same-session gate).")
@click.option(
    "--transcripts-dir",
    type=click.Path(file_okay=False, exists=True),
    help="Folder of the agent's session transcripts the session gate counts "
    "(default: Qwen Code's chats folder of the project; the hooks pass the agent's own).",
)
@planner_option
@dry_run_option
@pass_options
def dream(
    opts: Options,
    force: bool,
    session_id: str | None,
    transcripts_dir: str | None,
    planner: str,
    dry_run: bool,
) -> None:
    """Consolidate memories: merge duplicate entries and files (one commit).

    Without --force it runs only when due: at least 24 hours and 5 sessions since the
    last dream, not in the same session, and no other dream running. Sessions are the
    agent's transcripts named like session ids (Qwen Code's chats folder unless
    --transcripts-dir), counted at most once every 10 minutes.
    """
    from qmem_git.ops.pipeline import run_dream

    result = run_dream(
        opts.settings(),
        now(),
        session_id=session_id,
        force=force,
        dry_run=dry_run,
        planner=planner,
        transcripts_dir=transcripts_dir,
    )
    if result.status == "skipped":
        emit(
            opts,
            f"Dream skipped: {dream_skip_reason(result.skipped_reason)}",
            {"status": "skipped", "skipped_reason": result.skipped_reason},
        )
        return
    assert result.plan is not None and result.outcome is not None
    extra = {
        "status": result.status,
        "deduped_entries": result.plan.deduped_entries,
        "systemMessage": result.plan.system_message,
        **report_strategy(opts, result.plan.strategy),
    }
    report_outcome(opts, result.outcome, dry_run, extra)
    if not opts.json and not opts.quiet:
        click.echo(f"Deduplicated entries: {result.plan.deduped_entries}")


def dream_skip_reason(reason: str | None) -> str:
    """Why a gated dream did not run, in words, with what to do about it."""
    from qmem_git.core import dreamgate

    now_hint = "run `qmem-git dream --force` to consolidate now"
    words = {
        dreamgate.DISABLED: "auto-dream is turned off in the agent's settings",
        dreamgate.SAME_SESSION: "this session has already dreamed",
        dreamgate.MIN_HOURS: f"the last dream was less than {dreamgate.DEFAULT_MIN_HOURS} hours "
        "ago",
        dreamgate.MIN_SESSIONS: f"fewer than {dreamgate.DEFAULT_MIN_SESSIONS} agent sessions "
        "since the last dream",
        dreamgate.LOCKED: "another dream is running",
    }
    if reason == dreamgate.LOCKED:
        return f"{words[reason]}; try again when it finishes"
    return f"{words.get(reason or '', reason or 'not due')}; {now_hint}"


def query_or_ids(command: str, query: str | None, ids: tuple[str, ...]) -> None:
    """``forget`` and ``restore`` take a QUERY or --id, not both and not neither (exit 2)."""
    has_query = bool(query and query.strip())
    if has_query and ids:
        raise UsageError(
            "give a QUERY or --id, not both", f"qmem-git {command} QUERY, or {command} --id ID"
        )
    if not has_query and not ids:
        raise UsageError("give a QUERY or --id", f"qmem-git {command} QUERY, or {command} --id ID")


@main.command()
@click.argument("query", required=False)
@click.option("--id", "ids", multiple=True, help="Entry id (path, or path:index); repeatable.")
@click.option(
    "-i",
    "--interactive",
    is_flag=True,
    help="List what would go, then ask before removing exactly those entries.",
)
@planner_option
@dry_run_option
@pass_options
def forget(
    opts: Options,
    query: str | None,
    ids: tuple[str, ...],
    interactive: bool,
    planner: str,
    dry_run: bool,
) -> None:
    """Remove memories matching QUERY (or --id) as one commit; restore can bring them back.

    QUERY matches, case-insensitively, anywhere in an entry's summary, why or how-to-apply.
    Use --dry-run (or -i, which then asks) to see what would go first. Exits 1 when nothing
    matches.

    \b
    Examples:
      qmem-git forget --dry-run "release freeze"
      qmem-git forget -i "release freeze"
      qmem-git forget --id project/release.md:0
    """
    from qmem_git.ops.pipeline import run_forget

    query_or_ids("forget", query, ids)
    require(
        not (interactive and (dry_run or opts.json)),
        "--interactive asks on the terminal; it does not combine with --dry-run or --json",
        "qmem-git forget -i QUERY",
    )
    preview = dry_run or interactive
    result = run_forget(
        opts.settings(), now(), query=query, ids=ids, dry_run=preview, planner=planner
    )
    matches = [
        {"id": m.id, "type": m.type, "summary": m.entry.summary} for m in result.plan.matches
    ]
    if preview and not opts.json:
        lines = [f"Would forget {len(matches)} entr{'y' if len(matches) == 1 else 'ies'}:"]
        lines += [f"  {m['id']}  {m['summary']}" for m in matches]
        emit(opts, "\n".join(lines))
        if not interactive:
            return
        if not click.confirm("Forget these?", default=False, err=True):
            note(opts, "Nothing forgotten.")
            return
        chosen = tuple(str(m["id"]) for m in matches)  # what was shown, not a second search
        result = run_forget(opts.settings(), now(), query=None, ids=chosen, planner=planner)
    report_outcome(
        opts,
        result.outcome,
        dry_run,
        {
            "matches": matches,
            "systemMessage": result.plan.system_message,
            **report_strategy(opts, result.plan.strategy),
        },
    )


@main.command()
@click.argument("query", required=False)
@click.option(
    "--id",
    "ids",
    multiple=True,
    help="Id forget printed (path:index) or the memory file's path; repeatable.",
)
@click.option("--from", "from_rev", help="Search history from this revision back.")
@dry_run_option
@pass_options
def restore(
    opts: Options, query: str | None, ids: tuple[str, ...], from_rev: str | None, dry_run: bool
) -> None:
    """Bring back memories that forget or dream removed (one commit).

    QUERY matches the removed entries' text, as in forget; --id names them (the id forget
    printed, or the file's path). Exits 1 when nothing removed matches.

    \b
    Examples:
      qmem-git restore "release freeze"
      qmem-git restore --dry-run --id project/release.md
    """
    from qmem_git.ops.pipeline import run_restore

    query_or_ids("restore", query, ids)
    result = run_restore(
        opts.settings(), now(), query=query, ids=ids, from_rev=from_rev, dry_run=dry_run
    )
    assert result.outcome is not None
    report_outcome(
        opts, result.outcome, dry_run, {"candidates": [c.as_dict() for c in result.candidates]}
    )


@main.command()
@click.option(
    "--op", type=click.Choice(SNAPSHOT_OPS), help="Operation to record instead of inferring it."
)
@dry_run_option
@pass_options
def snapshot(opts: Options, op: str | None, dry_run: bool) -> None:
    """Commit changes another tool made to the memory folder (companion mode).

    The operation is inferred: extract when Qwen Code's meta.json shows a new extraction,
    dream for a new dream, forget when files were only deleted, edit otherwise. A file that
    must not be committed (a secret, over 256 KiB, not UTF-8, a symlink, an unsafe name, or
    changed in the last 2 s) stays where it is, uncommitted, and is named on stderr and in
    the commit message (see `qmem-git status`).
    """
    from qmem_git.ops.snapshot import run_snapshot

    settings = opts.settings()
    if settings.agent == "claude":
        require(op is None, "--op is not for Claude Code's folder", "drop --op")
        report_as_is(opts, settings, dry_run)
        return
    result = run_snapshot(settings, now(), op=op, dry_run=dry_run)
    report_outcome(opts, result.outcome, dry_run, {}, held=result.held)


def init_claude_store(opts: Options, settings: Settings) -> None:
    """``--agent claude init``: the repository beside Claude's folder, then its files as
    they are as the first commit."""
    from qmem_git.ops.claude import init_claude

    created = init_claude(settings)
    root = settings.layout.memory_root
    result = report_as_is(opts, settings, False, quiet=True)
    text = (
        f"Initialized memory repository for {root} ({(result or 'no files yet')[:12]})"
        if created
        else f"Memory repository for {root} is ready (already initialized)"
    )
    emit(opts, text, {"memory_root": root, "commit": result, "created": created})


def report_as_is(
    opts: Options, settings: Settings, dry_run: bool, *, quiet: bool = False
) -> str | None:
    """Commit Claude Code's folder as it is and say what was committed; the commit id."""
    from qmem_git.core.holdback import held_lines
    from qmem_git.ops.claude import snapshot_claude

    result = snapshot_claude(settings, now(), dry_run=dry_run)
    for line in held_lines(result.held):
        warn(line)
    if quiet:
        return result.commit
    subject = result.message.split("\n", 1)[0]
    if not result.changes:
        text = "Nothing to change."
    elif dry_run:
        text = "\n".join(
            [f"Would commit: {subject}"] + [f"  {c.status} {c.path}" for c in result.changes]
        )
    else:
        text = f"[{(result.commit or 'no commit')[:12]}] {subject}"
    data = {
        "op": "snapshot",
        "dry_run": dry_run,
        "commit": result.commit,
        "subject": subject,
        "changes": [{"status": c.status, "path": c.path} for c in result.changes],
        "held": result.held,
    }
    emit(opts, text, data)
    return result.commit


@main.command()
@click.argument("paths", nargs=-1)
@click.option("--secrets", is_flag=True, help="Every file version holding a credential.")
@dry_run_option
@pass_options
def purge(opts: Options, paths: tuple[str, ...], secrets: bool, dry_run: bool) -> None:
    """Take files (PATH...) or credentials (--secrets) out of the commits not yet pushed.

    Rewrites only commits no remote has; every other memory, and each commit's message, is
    kept; the old tip stays as refs/qmem/purged/<time>. What a remote already has is
    reported (a credential there: exit 1; rotate it and rewrite the remote).
    """
    from qmem_git.ops.purge import leak_warnings, purge_summary, run_purge, secret_left

    settings = opts.settings()
    rels = [relative_to_root(settings, path) for path in paths]
    result = run_purge(settings, now(), paths=rels, secrets=secrets, dry_run=dry_run)
    for line in leak_warnings(result):
        note(opts, line)
    emit(opts, purge_summary(result), result.as_dict())
    if secret_left(result):
        exit_with(1)


@main.command()
@dry_run_option
@pass_options
def repair(opts: Options, dry_run: bool) -> None:
    """Rename memory files whose names differ only in letter case or Unicode normalisation
    (one commit; both memories are kept), so sync can push again."""
    from qmem_git.ops.repair import run_repair

    report_outcome(opts, run_repair(opts.settings(), now(), dry_run=dry_run), dry_run, {})


@main.command()
@click.argument("query")
@click.option(
    "--limit",
    default=5,
    show_default=True,
    type=click.IntRange(min=0),
    help="Return at most N memories (0: none).",
)
@click.option("--exclude", multiple=True, help="Memory path never to return; repeatable.")
@pass_options
def recall(opts: Options, query: str, limit: int, exclude: tuple[str, ...]) -> None:
    """Print the 'Relevant memory' block for QUERY (read-only; what the agent hooks inject).

    Works on a plain folder too (--memory-dir without a repository). Exits 1 when no memory
    matches, so `qmem-git -q recall WORDS` answers by its exit status alone.
    """
    from qmem_git.fastpath import run_recall

    opts.check_folders()
    code = run_recall(
        project=opts.project,
        memory_dir=opts.memory_dir,
        tier=opts.tier,
        query=query,
        limit=limit,
        exclude=list(exclude),
        as_json=opts.json,
        quiet=opts.quiet,
        agent=opts.agent,
    )
    if code:
        exit_with(code)


@main.command()
@pass_options
def stats(opts: Options) -> None:
    """Telemetry summary: counts, status mix and p50/p95 durations per operation.

    Read from <state dir>/telemetry.jsonl, which holds no prompt or memory text;
    QMEM_TELEMETRY=0 stops recording.
    """
    from qmem_git.core.telemetry import summarize
    from qmem_git.store.telemetry import read_events

    summary = summarize(read_events(opts.settings().layout.state_dir))
    rows = []
    data = {}
    for name, entry in sorted(summary.items()):
        p50, p95 = entry.percentile(0.5), entry.percentile(0.95)
        mix = ", ".join(f"{k} {v}" for k, v in entry.statuses.most_common())
        rows.append(f"{name}: {entry.count} runs ({mix}); p50 {fmt_ms(p50)}, p95 {fmt_ms(p95)}")
        data[name] = {
            "count": entry.count,
            "statuses": dict(entry.statuses),
            "p50_ms": p50,
            "p95_ms": p95,
        }
    emit(opts, "\n".join(rows) or "No telemetry recorded yet.", data)


def fmt_ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


# --------------------------------------------------------------------------- demo

DEMO_STEPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Create the memory repository", ("init",)),
    (
        "Remember one fact by hand",
        ("remember", "--why", "CI images pin it", "Node 22 is the runtime for the API service"),
    ),
    ("Claude Code session: hooks fire as the agent runs them", ("@hooks",)),
    ("Extract from a Qwen Code session transcript", ("extract", "--transcript", "{qwen}")),
    ("Recall before a prompt: 'latency dashboard link'", ("recall", "latency dashboard link")),
    ("Review what the agent learned", ("log", "--stat")),
    ("The last operation as a diff", ("diff",)),
    (
        "Forget the release freeze (dry run, then for real)",
        ("forget", "--dry-run", "release freeze"),
    ),
    ("", ("forget", "release freeze")),
    ("Restore it from history", ("restore", "release freeze")),
    ("Qwen Code's own memory writes a duplicate; snapshot commits it", ("@duplicate",)),
    ("", ("snapshot",)),
    ("Consolidate (dream) folds the duplicate away", ("dream", "--force")),
    ("Share: sync to a bare remote on a shared disk", ("@bare",)),
    ("", ("remote", "add", "origin", "{remote}")),
    ("", ("sync",)),
    ("A second machine clones the memory", ("@clone",)),
    ("Validate every memory file and MEMORY.md", ("validate", "--format", "gcc")),
    ("MEMORY.md", ("index", "--check")),
    ("Telemetry", ("stats",)),
)


@main.command()
@click.option("--keep", is_flag=True, help="Keep the demo folder instead of deleting it.")
@pass_options
def demo(opts: Options, keep: bool) -> None:
    """Run the end-to-end demo in a temporary folder (no network, no model needed).

    Uses bundled Qwen Code and Claude Code transcripts, runs the agent hooks as the agents
    would, and syncs to a local bare remote and a second machine. It never touches your
    real memory folders. The output is text for people (there is no --json); -q prints only
    errors.
    """
    import contextlib

    require(not opts.json, "demo prints text only; --json is not supported", "run `qmem-git demo`")
    flags = ["--no-pager", *(["-q"] if opts.quiet else [])]  # its steps never page
    with contextlib.ExitStack() as stack:
        if opts.quiet:
            sink = stack.enter_context(open(os.devnull, "w", encoding="utf-8"))
            stack.enter_context(contextlib.redirect_stdout(sink))
        _run_demo(keep, flags)


def _run_demo(keep: bool, flags: list[str]) -> None:
    import shutil
    import tempfile

    base = tempfile.mkdtemp(prefix="qmem-demo-")
    project = os.path.join(base, "shop-api")
    os.makedirs(project)
    for key in [k for k in os.environ if k.startswith(("QMEM_LLM_", "QWEN_CODE_MEMORY_"))]:
        del os.environ[key]  # the demo runs on the built-in defaults
    os.environ.update(
        QWEN_CODE_MEMORY_BASE_DIR=os.path.join(base, "laptop"),
        QWEN_RUNTIME_DIR=os.path.join(base, "laptop"),
        QMEM_HOST=os.environ.get("QMEM_HOST", "demo-laptop"),
        QMEM_MODE="engine",
    )
    paths = _demo_files(base)
    click.echo(f"Demo folder: {base}")
    failures = 0
    for title, args in DEMO_STEPS:
        if title:
            click.echo(f"\n== {title} ==")
        if args[0].startswith("@"):
            failures += _demo_action(args[0], project, base, paths, flags) != 0
            continue
        shown = [a.format(**paths) for a in args]
        click.echo("$ qmem-git " + " ".join(_quote(a) for a in shown))
        failures += run([*flags, "--project", project, *shown]) != 0
    if keep:
        click.echo(f"\nDemo folder kept: {base} (its memory folders are git repositories).")
    else:
        shutil.rmtree(base, ignore_errors=True)
        click.echo("\nDemo folder removed (use --keep to keep it).")
    if failures:
        raise QmemError(f"{failures} demo step(s) failed", "rerun with -v to see why")


def _demo_files(base: str) -> dict[str, str]:
    from importlib import resources

    templates = resources.files("qmem_git.integrations") / "templates"
    paths = {"remote": os.path.join(base, "shared-disk", "memory.git")}
    for name in ("qwen", "claude"):
        target = os.path.join(base, f"{name}-session.jsonl")
        with open(target, "w", encoding="utf-8") as handle:
            handle.write((templates / f"demo-{name}.jsonl").read_text(encoding="utf-8"))
        paths[name] = target
    return paths


def _demo_action(
    action: str, project: str, base: str, paths: dict[str, str], flags: list[str]
) -> int:
    if action == "@hooks":
        return _demo_hooks(project, paths["claude"], flags)
    if action == "@duplicate":
        memory = build_settings(os.environ, project=project).layout.memory_root
        _write_demo_duplicate(memory)
        click.echo("(Qwen Code wrote user/terse.md)")
        return 0
    if action == "@bare":
        from qmem_git.store.remotes import create_bare_repository

        create_bare_repository(paths["remote"])
        click.echo(f"(created the bare repository {paths['remote']})")
        return 0
    second = os.path.join(base, "workstation", "memory")
    click.echo(f"$ qmem-git --memory-dir {second} clone {paths['remote']}")
    code = run([*flags, "--memory-dir", second, "clone", paths["remote"]])
    click.echo(f"$ qmem-git --memory-dir {second} log -n 3")
    return code or run([*flags, "--memory-dir", second, "log", "-n", "3"])


def _demo_hooks(project: str, transcript: str, flags: list[str]) -> int:
    """SessionStart, UserPromptSubmit and Stop as Claude Code runs them: JSON on stdin."""
    import subprocess
    import time

    from qmem_git.ops.history import log as read_log

    memory = build_settings(os.environ, project=project).layout.memory_root
    before = len(read_log(memory))
    events = (
        ("session-start", {"source": "startup"}),
        ("prompt", {"prompt": "Which package manager and runtime do we use?"}),
        ("stop", {"stop_hook_active": False}),
    )
    for event, extra in events:
        payload = {
            "session_id": "9e1d7c3b-2a4f-4e5d-8c6b-7a8f9e0d1c2b",
            "transcript_path": transcript,
            "cwd": project,
            "hook_event_name": event,
            **extra,
        }
        click.echo(f"$ echo '<{event} event JSON>' | qmem-git hook --agent claude {event}")
        proc = subprocess.run(
            [sys.executable, "-m", "qmem_git", "hook", "--agent", "claude", event],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            timeout=60,
        )
        shown = proc.stdout.strip()
        if shown:
            data = json.loads(shown)
            context = data["hookSpecificOutput"]["additionalContext"]
            click.echo(f"hookSpecificOutput.additionalContext ({len(context)} chars):")
            click.echo("  " + "\n  ".join(context.splitlines()[:12]))
        else:
            click.echo("(no output; extraction runs in the background)")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (len(read_log(memory)) == before or _extracting(project)):
        time.sleep(0.2)
    if len(read_log(memory)) == before:
        click.echo("the background extraction did not commit in time", err=True)
        return 1
    click.echo("$ qmem-git log -n 1")
    return run([*flags, "--project", project, "log", "-n", "1"])


def _extracting(project: str) -> bool:
    """True while the background extraction still holds the project's extraction slot (the
    next step's extract would only be queued behind it)."""
    from qmem_git.store.extractqueue import extraction_running

    return extraction_running(build_settings(os.environ, project=project).layout.state_dir)


def _write_demo_duplicate(memory: str) -> None:
    os.makedirs(os.path.join(memory, "user"), exist_ok=True)
    with open(os.path.join(memory, "user", "terse.md"), "w", encoding="utf-8") as handle:
        handle.write(
            "---\nname: Terse answers\ndescription: User wants short answers\ntype: user\n---\n\n"
            "I prefer terse responses, lead with the answer.\n\n"
            "Why: Long replies slow them down.\n"
        )


def _quote(arg: str) -> str:
    return f"'{arg}'" if " " in arg or "?" in arg else arg


@main.command()
@click.option("--fix", is_flag=True, help="First repair what is safe to (a lost main branch).")
@pass_options
def doctor(opts: Options, fix: bool) -> None:
    """Check this project's memory store and say how to fix what is wrong.

    Checks the layout, the repository and its objects, MEMORY.md, every memory file, the
    git hook and the model endpoint. Exits 1 when a check fails (warnings do not count).
    --fix first repairs what is safe to repair: a lost main branch is pointed back at the
    newest commit of its history.
    """
    from qmem_git.ops.doctor import repair, run_checks

    for done in repair(opts.settings()) if fix else []:
        note(opts, done)
    checks = run_checks(opts.settings())
    lines = []
    for check in checks:
        mark = "ok" if check.ok else ("warn" if check.warning else "FAIL")
        lines.append(f"[{mark:>4}] {check.name}: {check.detail}")
        if not check.ok and check.hint:
            lines.append(f"       fix: {check.hint}")
    data = [
        {"check": c.name, "ok": c.ok, "warning": c.warning, "detail": c.detail, "hint": c.hint}
        for c in checks
    ]
    emit(opts, "\n".join(lines), data, style=style_doctor)
    if any(not c.ok and not c.warning for c in checks):
        exit_with(1)


DOCTOR_MARK = re.compile(r"^\[(  ok|warn|FAIL)\]", re.M)
DOCTOR_COLOUR = {"  ok": "green", "warn": "yellow", "FAIL": "red"}


def style_doctor(text: str) -> str:
    return DOCTOR_MARK.sub(
        lambda m: "[" + click.style(m[1], fg=DOCTOR_COLOUR[m[1]], bold=m[1] == "FAIL") + "]", text
    )


# --------------------------------------------------------------------------- sharing


def sync_progress(opts: Options) -> Callable[[str], None] | None:
    """Progress lines on stderr, only when stderr is a terminal (and not under -q/--json)."""
    if opts.quiet or opts.json or not sys.stderr.isatty():
        return None
    meter = [False]  # a "\r" line (objects, bytes, rate) is redrawn in place

    def show(text: str) -> None:
        line = for_terminal(sys.stderr, f"qmem-git: {text.strip()}")
        if text.startswith("\r"):  # ending in "\n": the meter's last state, kept
            sys.stderr.write(f"\r{line}\x1b[K" + ("\n" if text.endswith("\n") else ""))
            sys.stderr.flush()
        else:
            click.echo(("\n" if meter[0] else "") + line, err=True)
        meter[0] = text.startswith("\r") and not text.endswith("\n")

    return show


@main.group(invoke_without_command=True)
@click.pass_context
def remote(ctx: click.Context) -> None:
    """Manage the git remotes memory is shared through (alone: list them, as `git remote`).

    URLs: a path, file://, git://, http(s):// (token from QMEM_GIT_USERNAME/QMEM_GIT_TOKEN or
    your git credential helper) or ssh (user@host:path). Credentials are never printed.
    """
    if ctx.invoked_subcommand is None:
        ctx.invoke(remote_list)


@remote.command("add")
@click.argument("name")
@click.argument("url")
@pass_options
def remote_add(opts: Options, name: str, url: str) -> None:
    """Add a remote NAME at URL (the URL is not contacted)."""
    from qmem_git.ops.sync import add_remote

    added = add_remote(opts.settings(), name, url)
    emit(opts, f"Added remote {added.name} {added.display_url}", added.as_dict())


@remote.command("remove")
@click.argument("name")
@pass_options
def remote_remove(opts: Options, name: str) -> None:
    """Remove remote NAME (its memories stay in the local store)."""
    from qmem_git.ops.sync import remove_remote

    removed = remove_remote(opts.settings(), name)
    emit(opts, f"Removed remote {removed.name}", removed.as_dict())


@remote.command("list")
@pass_options
def remote_list(opts: Options) -> None:
    """List remotes with their (redacted) URLs."""
    from qmem_git.ops.sync import list_remotes

    found = list_remotes(opts.settings())
    text = "\n".join(f"{r.name}\t{r.display_url}\t({r.kind})" for r in found)
    emit(
        opts,
        text or "No remotes (add one with `qmem-git remote add origin URL`)",
        [r.as_dict() for r in found],
    )


@main.command()
@click.argument("remote_name", metavar="[REMOTE]", required=False)
@click.option("--dry-run", is_flag=True, help="Fetch and report what would happen; change nothing.")
@click.option("--no-push", is_flag=True, help="Merge or fast-forward locally, do not push.")
@click.option("--force", is_flag=True, help="Accept a remote that was rewound or force-pushed.")
@click.option("--all", "every", is_flag=True, help="Every store on this machine (needs a hub).")
@pass_options
def sync(
    opts: Options, remote_name: str | None, dry_run: bool, no_push: bool, force: bool, every: bool
) -> None:
    """Share memories with a git remote: fetch, merge entry by entry, push.

    Up to date: push local commits. Remote ahead: fast-forward. Both changed: merge memory
    entries (never loses a memory, never writes conflict markers), commit the merge, push.
    Exit 5 when the remote cannot be reached.

    With a hub set (`qmem-git hub set URL`) and no store or remote named: every store of this
    project (the project tier, the user tier, Claude's versioned folder), each through its own
    remote if it has one, else through its branch on the hub; one line per store, and the exit
    code is the first failing store's. --all: every store on this machine.
    """
    from qmem_git.hubconfig import hub_url
    from qmem_git.ops.sync import run_sync

    flags = {"dry_run": dry_run, "push": not no_push, "force": force}
    home = os.environ.get("HOME") or os.path.expanduser("~")
    hub = hub_url(os.environ, home)
    if every or (hub is not None and remote_name is None and not opts.named):
        require(
            not (every and (remote_name or opts.named)),
            "sync --all syncs every store; it takes no remote, --tier, --agent or --memory-dir",
            "run `qmem-git sync --all` alone, or name one store without --all",
        )
        _sync_stores(opts, hub, every, flags)
        return
    settings = opts.settings()
    if hub is not None and remote_name is None:
        from qmem_git.ops.hub import has_own_remote

        if not has_own_remote(settings):
            _sync_one_via_hub(opts, settings, hub, flags)
            return
    outcome = run_sync(
        settings,
        now(),
        remote=remote_name,
        progress=sync_progress(opts),
        dry_run=dry_run,
        push=not no_push,
        force=force,
    )
    _report_sync(opts, outcome)


def _sync_stores(opts: Options, hub: str | None, every: bool, flags: dict[str, bool]) -> None:
    """The project's stores (or, ``every``, the machine's), each on its own; exit code: the
    first failing store's."""
    from qmem_git.ops.hub import NO_HUB_HINT
    from qmem_git.ops.hubjobs import machine_jobs, project_jobs

    opts.check_folders()
    require(hub is not None or not every, "sync --all needs a hub", NO_HUB_HINT)
    base = build_settings(os.environ, project=opts.project, with_model=False)
    jobs = machine_jobs(base) if every else project_jobs(base, opts.project)
    _sync_jobs(opts, jobs, hub, flags, name_store=True)


def _sync_jobs(
    opts: Options, jobs: list[Job], hub: str | None, flags: dict[str, bool], *, name_store: bool
) -> None:
    """Sync ``jobs``, one line each; exit with the first failing store's code (its error
    prefixed with the store's name when ``name_store``)."""
    from qmem_git.ops.hubjobs import first_failure, render, sync_jobs

    found = sync_jobs(jobs, hub, now(), progress=sync_progress(opts), classify=_failure, **flags)
    emit(opts, render(found), [entry.as_dict() for entry in found])
    code = first_failure(found)
    if code:
        failed = next(entry for entry in found if entry.status == "failed")
        fail(f"{failed.store}: {failed.error}" if name_store else failed.error, code)
        exit_with(code)


def _sync_one_via_hub(opts: Options, settings: Settings, hub: str, flags: dict[str, bool]) -> None:
    """One named store with no remote of its own: through its branch on the hub."""
    from qmem_git.ops.hub import sync_store_via_hub
    from qmem_git.ops.hubjobs import branch_of_store
    from qmem_git.store.relocate import repository

    if not os.path.isdir(repository(settings.layout.memory_root)):  # not here yet: adopt it
        _sync_new_store(opts, settings, hub, flags)
        return
    branch = branch_of_store(settings)
    outcome = sync_store_via_hub(
        settings, now(), hub, branch, progress=sync_progress(opts), **flags
    )
    _report_sync(opts, outcome)


def _sync_new_store(opts: Options, settings: Settings, hub: str, flags: dict[str, bool]) -> None:
    from qmem_git.ops.hub import kind_of
    from qmem_git.ops.hubjobs import Job

    job = Job(kind_of(settings), settings, settings.layout.project_root or None)
    _sync_jobs(opts, [job], hub, flags, name_store=False)


def _failure(exc: Exception) -> tuple[str, int]:
    """One store's failure in a multi-store sync, worded and coded as a whole command's."""
    message, code, _ = failure(exc)
    return message, code


def _report_sync(opts: Options, outcome: SyncOutcome) -> None:
    from qmem_git.ops.sync import sync_summary

    if outcome.recovery is not None:
        from qmem_git.core.holdback import held_lines

        for line in held_lines(dict(outcome.recovery.held)):
            warn(line)
        for line in outcome.recovery.messages():
            note(opts, line)
    emit(opts, sync_summary(outcome.result), outcome.as_dict())


@main.group(invoke_without_command=True)
@click.pass_context
def hub(ctx: click.Context) -> None:
    """One remote for every store of this machine (alone: show it).

    Each store gets its own branch on the hub: the user tier `user`, a project's tier
    `projects/<origin URL, normalised>`, Claude's folder `claude/<...>`. Then `qmem-git sync`
    on each machine shares every store of the project. A store's own remote wins.
    """
    if ctx.invoked_subcommand is None:
        ctx.invoke(hub_show)


@hub.command("set")
@click.argument("url")
@pass_options
def hub_set(opts: Options, url: str) -> None:
    """Use URL as this machine's hub (checked as `remote add` does; not contacted)."""
    from qmem_git.envvalues import current_dir
    from qmem_git.hubconfig import set_hub
    from qmem_git.ops.hub import check_hub_url
    from qmem_git.store.remotes import redact

    home = os.environ.get("HOME") or os.path.expanduser("~")
    checked = check_hub_url(url, current_dir())
    path = set_hub(os.environ, home, checked)
    emit(opts, f"Hub set to {redact(checked)} (in {path})", {"hub": redact(checked), "file": path})


@hub.command("unset")
@pass_options
def hub_unset(opts: Options) -> None:
    """Stop using a hub (the stores and the hub's branches stay as they are)."""
    from qmem_git.hubconfig import unset_hub

    home = os.environ.get("HOME") or os.path.expanduser("~")
    removed = unset_hub(os.environ, home)
    emit(opts, "Hub unset" if removed else "No hub was set", {"removed": removed})


@hub.command("show")
@pass_options
def hub_show(opts: Options) -> None:
    """The hub's URL, its branches, and which store of this machine each one is."""
    from qmem_git.hubconfig import hub_url
    from qmem_git.ops.hubjobs import render_show, show

    opts.check_folders()
    home = os.environ.get("HOME") or os.path.expanduser("~")
    url = hub_url(os.environ, home)
    settings = build_settings(os.environ, project=opts.project, with_model=False)
    data = show(settings, url)
    emit(opts, render_show(data), data)


@main.command()
@click.argument("url")
@click.option("--merge", is_flag=True, help="Merge into a store that already holds memories.")
@pass_options
def clone(opts: Options, url: str, merge: bool) -> None:
    """Create this project's memory from a remote (a new machine joins).

    Files get the times of the commits that last changed them, so MEMORY.md and recall ages
    match the other machines. A store that already holds memories needs --merge.
    """
    from qmem_git.ops.sync import clone_summary, run_clone

    settings = opts.settings(create=True)
    outcome = run_clone(settings, url, now(), merge=merge, progress=sync_progress(opts))
    emit(opts, clone_summary(outcome), outcome.as_dict())


@main.command(
    "git", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="GIT-ARGS...")
@pass_options
def git_command(opts: Options, args: tuple[str, ...]) -> None:
    """Run C git on the memory repository: `git --git-dir=<repository> --work-tree=<memory root>`.

    The repository lives beside the memory folder (`memory.git` next to `memory/`, see
    `qmem-git where`), never in it: the agent may write anything in the memory folder, and a
    `.git` there is neither read nor run. This is your own git command: its exit code is
    git's, and its hooks (qmem-git's pre-commit validation among them) run as usual.

    \b
    qmem-git git status
    qmem-git git log --stat -3
    qmem-git git commit -m "edit by hand"
    """
    import subprocess

    from qmem_git.envvalues import current_dir
    from qmem_git.ops.lifecycle import git_command as command_for

    require(bool(args), "qmem-git git needs git's arguments", "qmem-git git status")
    argv, cwd = command_for(opts.settings(), args, current_dir())
    exit_with(subprocess.run(argv, cwd=cwd, check=False).returncode)


# --------------------------------------------------------------------------- agents and editors


@main.command(context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="[--agent qwen|claude] EVENT")
@pass_options
def hook(opts: Options, args: tuple[str, ...]) -> None:
    """Handle one Qwen Code or Claude Code hook event (install-hooks sets this up).

    The agent runs this command for each event and sends the event's JSON on stdin. It
    prints at most one JSON object for the agent and always exits 0, so the agent is never
    blocked; problems are written to <state dir>/hook.log (never the prompt text).

    \b
    EVENT (either spelling; without EVENT the JSON's hook_event_name is used):
      SessionStart, session-start      pick engine or companion mode for the session;
                                       inject the MEMORY.md index (engine mode);
                                       with a remote, pull-sync in the background
      UserPromptSubmit, prompt         recall memories for the prompt (engine mode;
                                       Qwen Code recalls itself in companion mode)
      Stop, stop                       extract the new part of the transcript in the
      PreCompact, pre-compact          background (engine mode); start the watcher
      SessionEnd, session-end          mark the session ended for the watcher

    The watcher, one per memory store, runs in the background: it commits what the
    agent writes (companion mode) once the folder has been quiet for QMEM_WATCH_QUIET
    seconds (default 3), and when SessionEnd fired or the agent's process has been
    gone for QMEM_WATCH_GRACE seconds (default 5) it ends the session: final
    extraction and gated dream (companion mode: snapshot), push-sync with a remote.

    \b
    --agent qwen|claude  the agent that sent the event (default: qwen when
                         QWEN_PROJECT_DIR is set or the transcript is under .qwen/,
                         else claude)
    """
    from qmem_git.hookentry import main as hook_main

    argv = ["--project", opts.project] if opts.project else []
    argv += ["--memory-dir", opts.memory_dir] if opts.memory_dir else []
    argv += ["--agent", "claude"] if opts.agent == "claude" else []
    exit_with(hook_main([*argv, *args]))


@main.command("install-hooks")
@click.option(
    "--agent",
    type=click.Choice(["qwen", "claude"]),
    required=True,
    help="Whose settings to edit: qwen (Qwen Code, ~/.qwen) or claude (Claude Code, ~/.claude).",
)
@click.option(
    "--scope",
    type=click.Choice(["user", "project"]),
    default="user",
    show_default=True,
    help="user: ~/.<agent>/settings.json; project: <project>/.<agent>/settings.json.",
)
@click.option("--uninstall", is_flag=True, help="Remove qmem-git's hooks (only ours).")
@click.option(
    "--engine",
    is_flag=True,
    help="Switch the agent's own auto-memory off (Qwen Code: and its dream; Claude Code: "
    "autoMemoryEnabled false, restored by --uninstall), so qmem-git extracts.",
)
@dry_run_option
@pass_options
def install_hooks(
    opts: Options, agent: str, scope: str, uninstall: bool, engine: bool, dry_run: bool
) -> None:
    """Add qmem-git's hooks to Qwen Code's or Claude Code's settings.json (reversible).

    Every other key and hook is kept; installing twice adds nothing; the previous file is
    kept as settings.json.bak-<timestamp>. The hooks recall memories into each prompt,
    extract after each turn (in the background) and dream at session end. Without --engine,
    Qwen Code keeps writing memory itself and qmem-git commits its changes (companion mode).

    \b
    Examples:
      qmem-git install-hooks --agent claude --dry-run   show the new settings.json
      qmem-git install-hooks --agent qwen --engine      qmem-git extracts, not Qwen Code
      qmem-git install-hooks --agent claude --uninstall
    """
    from qmem_git.integrations.hooksettings import install_hooks as install

    settings = opts.settings()
    result = install(
        agent,  # type: ignore[arg-type]
        scope,  # type: ignore[arg-type]
        settings.layout.project_root or settings.cwd,
        settings.home,
        uninstall=uninstall,
        dry_run=dry_run,
        engine=engine,
        now=now(),
    )
    report_install(opts, result, dry_run, uninstall, "hooks")


@main.command("install-tasks")
@click.argument(
    "directory", metavar="[DIR]", required=False, type=click.Path(file_okay=False, exists=True)
)
@click.option("--uninstall", is_flag=True, help="Remove qmem-git's tasks (only ours).")
@dry_run_option
@pass_options
def install_tasks(opts: Options, directory: str | None, uninstall: bool, dry_run: bool) -> None:
    """Add qmem: tasks to DIR/.vscode/tasks.json (default: the project directory).

    Tasks: validate on folder open (problems in the editor), recall, log, diff, sync,
    dream and forget (which lists the matches and asks before removing). Other tasks are
    kept; --uninstall removes only ours.
    """
    from qmem_git.integrations.vscode import install_tasks as install

    settings = opts.settings()
    target = directory or settings.layout.project_root or settings.cwd
    result = install(target, uninstall=uninstall, dry_run=dry_run, now=now())
    report_install(opts, result, dry_run, uninstall, "tasks")


def report_install(
    opts: Options, result: InstallResult, dry_run: bool, uninstall: bool, what: str
) -> None:
    """The new file on --dry-run, else one line naming the file and the backup."""
    data = {
        "path": result.path,
        "changed": result.changed,
        "backup": result.backup,
        "dry_run": dry_run,
        "notes": list(result.notes),
    }
    if dry_run:
        emit(opts, result.text.rstrip("\n"), {**data, "text": result.text})
    else:
        done = "Removed" if uninstall else "Installed"
        text = (
            f"{done} qmem-git {what} in {result.path}"
            + (f" (backup: {result.backup})" if result.backup else "")
            if result.changed
            else f"{result.path} already {'has no' if uninstall else 'has the'} qmem-git {what}"
        )
        emit(opts, text, data)
    for line in result.notes:
        note(opts, f"note: {line}")


@main.command()
@pass_options
def review(opts: Options) -> None:
    """Advisory review: duplicates, misfiled, temporary, outdated, thin or conflicting entries.

    Read-only; it suggests `forget`, `dream` or an edit but changes nothing.
    """
    from qmem_git.core.governance import document_entries, review_entries
    from qmem_git.store.workdir import scan_documents

    docs = scan_documents(opts.settings().layout.memory_root)
    result = review_entries(document_entries(docs))
    lines = [f"{s.kind:<9} {s.entry_id}  ({s.reason})" for s in result.suggestions]
    data = {
        "strategy": result.strategy,
        "suggestions": [
            {"kind": s.kind, "id": s.entry_id, "reason": s.reason} for s in result.suggestions
        ],
    }
    emit(opts, "\n".join(lines) or "No suggestions.", data)


# --------------------------------------------------------------------------- global options


def _global_option(
    *decls: str, field: str, help_text: str, flag: bool = True, value: object = True
) -> click.Option:
    """A global option a command also accepts after its name (``qmem-git log --json``);
    a flag sets ``field`` to ``value``."""

    def store(ctx: click.Context, _param: click.Parameter, given: object) -> None:
        if given:
            setattr(ctx.ensure_object(Options), field, value if flag else given)
            if field in ("tier", "agent", "memory_dir"):
                ctx.ensure_object(Options).named = True

    if flag:
        return click.Option(decls, is_flag=True, expose_value=False, callback=store, help=help_text)
    kinds = {"tier": click.Choice(TIERS), "agent": AGENT_CHOICE}
    kind = kinds.get(field, click.Path(file_okay=False))
    return click.Option(decls, type=kind, expose_value=False, callback=store, help=help_text)


TEXT_ONLY = frozenset({"demo"})  # no --json: their output is for people


def _accept_global_options(group: click.Group) -> None:
    """Give every command (and sub-group) the global options too: they may come before or
    after its name (``qmem-git log --json``, ``qmem-git remote --json list``)."""
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            _accept_global_options(command)
        if name == "hook":  # served by hookentry: the agent's event JSON decides, not flags
            continue
        if name not in TEXT_ONLY:
            command.params.append(
                _global_option("--json", field="json", help_text="Machine-readable output.")
            )
        command.params += [
            _global_option("-q", "--quiet", field="quiet", help_text=QUIET_HELP),
            _global_option("-v", "--verbose", field="verbose", help_text=VERBOSE_HELP),
            _global_option("--project", field="project", flag=False, help_text=PROJECT_HELP),
            _global_option(
                "--memory-dir", field="memory_dir", flag=False, help_text=MEMORY_DIR_HELP
            ),
            _global_option("--tier", field="tier", flag=False, help_text=TIER_HELP),
            _global_option("--no-pager", field="pager", value=False, help_text=NO_PAGER_HELP),
        ]
        if name != "install-hooks":  # its own --agent names whose settings it edits
            command.params.append(
                _global_option("--agent", field="agent", flag=False, help_text=AGENT_HELP)
            )


_accept_global_options(main)
