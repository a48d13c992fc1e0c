"""The qmem-git command line: parse, build Settings, call one library function, render.

This is the only module that reads the environment and prints (ARCHITECTURE §2).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, NoReturn, TypeVar

import click

from qmem_git import __version__
from qmem_git.errors import QmemError, UsageError
from qmem_git.settings import Settings, build_settings

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class Options:
    """Global flags, shared by every command through the click context."""

    project: str | None = None
    memory_dir: str | None = None
    json: bool = False
    quiet: bool = False
    verbose: bool = False

    def settings(self) -> Settings:
        return build_settings(os.environ, project=self.project, memory_dir=self.memory_dir)


pass_options = click.make_pass_decorator(Options, ensure=True)


def now() -> datetime:
    return datetime.now(timezone.utc)


def emit(opts: Options, text: str = "", data: Any = None) -> None:
    """Print ``data`` as JSON under ``--json``, else ``text`` unless ``-q``."""
    if opts.json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))
    elif text and not opts.quiet:
        click.echo(text)


def note(opts: Options, text: str) -> None:
    """A side remark on stderr (recovery actions, warnings); silenced by ``-q``."""
    if not opts.quiet:
        click.echo(text, err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--project", type=click.Path(file_okay=False), help="Project directory (default: cwd).")
@click.option(
    "--memory-dir",
    type=click.Path(file_okay=False),
    help="Use this memory root directly; its parent holds the state files.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("-q", "--quiet", is_flag=True, help="Print only errors.")
@click.option("-v", "--verbose", is_flag=True, help="More detail; tracebacks on internal errors.")
@click.version_option(__version__, prog_name="qmem-git")
@click.pass_context
def main(
    ctx: click.Context,
    project: str | None,
    memory_dir: str | None,
    as_json: bool,
    quiet: bool,
    verbose: bool,
) -> None:
    """Managed auto-memory for AI coding agents, kept as a reviewable git repository.

    Memories are markdown files under user/, feedback/, project/ and reference/ with a
    generated MEMORY.md index. Every change the agent makes is one git commit you can
    review (log, show, diff, history) and undo.
    """
    ctx.obj = Options(project, memory_dir, as_json, quiet, verbose)


def run(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and translate every failure into one ``Error:`` line and an exit code."""
    verbose = "-v" in (argv or sys.argv[1:]) or "--verbose" in (argv or sys.argv[1:])
    try:
        result = main.main(
            args=list(argv) if argv is not None else None,
            prog_name="qmem-git",
            standalone_mode=False,
        )
    except QmemError as exc:
        return fail(str(exc), exc.exit_code)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        return fail("aborted", 1)
    except click.UsageError as exc:
        command = exc.ctx.command_path if exc.ctx else "qmem-git"
        return fail(f"{exc.format_message()} (hint: run '{command} --help')", 2)
    except click.ClickException as exc:
        return fail(exc.format_message(), exc.exit_code)
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    except OSError as exc:
        return fail(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), 1, verbose)
    except Exception as exc:
        return fail(
            f"internal error: {type(exc).__name__}: {exc} (hint: rerun with -v and report it)",
            1,
            verbose,
        )
    return result if isinstance(result, int) else 0


def fail(message: str, code: int, show_traceback: bool = False) -> int:
    if show_traceback:
        traceback.print_exc()
    click.echo(f"Error: {message}", err=True)
    return code


def exit_with(code: int) -> NoReturn:
    raise click.exceptions.Exit(code)


def require(condition: bool, message: str, hint: str) -> None:
    if not condition:
        raise UsageError(message, hint)


# --------------------------------------------------------------------------- setup


def hook_command() -> str:
    """What the memory repo's git pre-commit hook runs: this interpreter, so no PATH needed."""
    return f'"{sys.executable}" -m qmem_git --memory-dir "$(git rev-parse --show-toplevel)" validate'


@main.command()
@pass_options
def init(opts: Options) -> None:
    """Create the memory folder and make it a git repository (safe to run again).

    Existing memory files (for example ones Qwen Code already wrote) are committed as the
    first commit. A pre-commit hook is installed so hand-made commits are validated too.
    """
    from qmem_git.ops.lifecycle import init_memory

    settings = opts.settings()
    result = init_memory(settings, hook_command(), now())
    emit(
        opts,
        f"Initialized memory repository in {settings.layout.memory_root}"
        + (f" ({result.commit[:12]})" if result.commit else ""),
        {"memory_root": settings.layout.memory_root, "commit": result.commit},
    )


@main.command()
@pass_options
def where(opts: Options) -> None:
    """Show where this project's memory lives: memory root, state dir, mode, remotes."""
    from qmem_git.ops.lifecycle import describe_location

    settings = opts.settings()
    info = describe_location(settings)
    lines = [f"{key}: {value}" for key, value in info.items() if not isinstance(value, list)]
    lines += [f"remote: {remote}" for remote in info.get("remotes", [])]
    emit(opts, "\n".join(lines), info)


@main.command()
@click.option("--check", is_flag=True, help="Do not write; exit 1 if MEMORY.md is stale or over limits.")
@click.option("--dry-run", is_flag=True, help="Print the new MEMORY.md instead of writing it.")
@pass_options
def index(opts: Options, check: bool, dry_run: bool) -> None:
    """Rebuild MEMORY.md from the memory files (committed as one `index` commit).

    The index lists the newest 200 memories, one line each (at most 150 characters),
    within 25,000 bytes; entries the limits drop are named.
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
        if not status.up_to_date or status.dropped:
            exit_with(1)
        return
    result = rebuild_index(settings, now())
    emit(
        opts,
        f"MEMORY.md rebuilt ({result.commit[:12]})" if result.commit else "MEMORY.md is up to date",
        {"commit": result.commit, "dropped": result.dropped},
    )
    for path in result.dropped:
        note(opts, f"warning: over the index limits, not listed: {path}")
