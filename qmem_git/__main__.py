"""Entry point. ``recall`` runs before every prompt, so it is served without importing click.

Anything the fast path does not understand (``--help``, odd flags) falls through to the
full click CLI, which implements the same commands.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False

if TYPE_CHECKING:
    from qmem_git.core.recall import RecallResult

_GLOBAL_VALUE = {"--project": "project", "--memory-dir": "memory_dir"}
_GLOBAL_FLAG = {"--json": "json", "-q": "quiet", "--quiet": "quiet", "-v": "verbose"}
_GLOBAL_FLAG["--verbose"] = "verbose"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    rest = _take_globals(args, {})
    if rest[:1] == ["hook"] and not {"-h", "--help"} & set(rest):  # agent hooks: no click
        from qmem_git.hookentry import main as hook_main

        return hook_main(args[: len(args) - len(rest)] + rest[1:])
    fast = _parse_recall(args)
    if fast is not None:
        return _fast_recall(fast)
    from qmem_git.cli import run

    return run(args)


def _parse_recall(args: list[str]) -> dict[str, object] | None:
    """Parse ``[globals] recall QUERY [--limit N] [--exclude P]...``; None = let click do it."""
    opts: dict[str, object] = {"exclude": [], "limit": 5}
    rest = _take_globals(args, opts)
    if not rest or rest[0] != "recall":
        return None
    positional: list[str] = []
    i = 1
    while i < len(rest):
        arg = rest[i]
        if arg in ("--limit", "--exclude") and i + 1 < len(rest):
            if arg == "--limit":
                if not rest[i + 1].lstrip("-").isdigit():
                    return None
                opts["limit"] = int(rest[i + 1])
            else:
                excluded = opts["exclude"]
                assert isinstance(excluded, list)
                excluded.append(rest[i + 1])
            i += 2
        elif arg.startswith("-") and arg != "-":
            return None
        else:
            positional.append(arg)
            i += 1
    if len(positional) != 1:
        return None
    opts["query"] = positional[0]
    return opts


def _take_globals(args: list[str], opts: dict[str, object]) -> list[str]:
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


def _fast_recall(opts: dict[str, object]) -> int:
    limit = opts.get("limit")
    excluded = opts.get("exclude")
    return run_recall(
        project=_str(opts.get("project")),
        memory_dir=_str(opts.get("memory_dir")),
        query=str(opts.get("query", "")),
        limit=limit if isinstance(limit, int) else 5,
        exclude=[str(p) for p in excluded] if isinstance(excluded, list) else [],
        as_json=bool(opts.get("json")),
    )


def run_recall(
    *,
    project: str | None,
    memory_dir: str | None,
    query: str,
    limit: int,
    exclude: list[str],
    as_json: bool,
) -> int:
    """Print the Relevant memory block (or JSON) for ``query``; shared with the click command."""
    import os
    import time

    from qmem_git.core.paths import layout_for, model_may_be_configured
    from qmem_git.errors import QmemError
    from qmem_git.ops.recall import recall, result_to_json

    started = time.monotonic()
    env = os.environ
    home = env.get("HOME") or os.path.expanduser("~")
    try:
        layout = layout_for(project, memory_dir, env, home, os.getcwd(), os.path.lexists)
        model = None
        if model_may_be_configured(env, home, os.path.exists):
            from qmem_git.settings import build_settings  # model settings: a slower import

            model = build_settings(env, project=project, memory_dir=memory_dir).model
        result = recall(
            layout.memory_root,
            layout.state_dir,
            query,
            int(time.time() * 1000),
            limit=limit,
            excluded=tuple(exclude),
            model=model,  # None unless configured: requests is imported only then
        )
    except QmemError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return exc.exit_code
    if env.get("QMEM_TELEMETRY", "1") != "0" and os.path.isdir(layout.state_dir):
        _record_recall(layout.state_dir, query, result, started)
    if as_json:
        import json

        sys.stdout.write(json.dumps(result_to_json(result), ensure_ascii=False, indent=2) + "\n")
    else:
        sys.stdout.write(result.prompt)
    return 0


def _record_recall(state_dir: str, query: str, result: RecallResult, started: float) -> None:
    import time

    from qmem_git.store.telemetry import record_recall

    elapsed = int((time.monotonic() - started) * 1000)
    record_recall(
        state_dir, len(query), result.docs_scanned, len(result.selected), result.strategy, elapsed
    )


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def entry() -> None:
    """Console-script entry: run, flush, then skip interpreter teardown.

    Tearing down the modules a command loaded costs ~35 ms per process, paid on every
    prompt by the hooks. Every file qmem-git writes is closed (and fsynced) before
    ``main`` returns, so nothing is lost by leaving through ``os._exit``.
    """
    import os

    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):
        pass  # the reader went away (`| head`); the exit code still tells the story
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
