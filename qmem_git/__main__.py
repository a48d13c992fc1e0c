"""Entry point. ``hook``, ``recall`` and plain ``remember``, ``snapshot`` and ``sync`` calls are
served without click (``hookentry``, ``fastpath``); anything those do not understand (``--help``,
odd flags) falls through to the full click CLI, which implements the same commands.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run one command; Ctrl-C at any point, imports included, exits 130 without a word."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        return 130


def _main(argv: list[str] | None) -> int:
    from qmem_git import fastpath

    _stand_in_for_closed_streams()
    args = sys.argv[1:] if argv is None else argv
    rest = fastpath.take_globals(args, {})
    if rest[:1] == ["hook"] and not {"-h", "--help"} & set(rest):  # agent hooks: no click
        from qmem_git.hookentry import main as hook_main

        return hook_main(args[: len(args) - len(rest)] + rest[1:])
    recall = fastpath.parse_recall(args)
    if recall is not None and fastpath.plain_globals(recall):
        return fastpath.fast_recall(recall)
    remember = fastpath.parse_remember(args)
    if remember is not None and fastpath.plain_globals(remember):
        code = fastpath.fast_remember(remember)
        if code is not None:
            return code
    snapshot = fastpath.parse_snapshot(args)
    if snapshot is not None and fastpath.plain_globals(snapshot):
        code = fastpath.fast_snapshot(snapshot)
        if code is not None:
            return code
    sync = fastpath.parse_sync(args)
    if sync is not None and fastpath.plain_globals(sync):
        code = fastpath.fast_sync(sync)
        if code is not None:
            return code
    from qmem_git.cli import run

    return run(args)


def _stand_in_for_closed_streams() -> None:
    """Started with stdout or stderr closed (``>&-``), Python sets it to None; every command
    writes to it, so it gets ``os.devnull`` instead (a hook must still exit 0, §3.4)."""
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            import os

            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115


def entry() -> None:
    """Console-script entry: run, flush, then skip interpreter teardown.

    Tearing down the modules a command loaded costs ~35 ms per process, paid on every
    prompt by the hooks. Every file qmem-git writes is closed (and fsynced) before
    ``main`` returns, so nothing is lost by leaving through ``os._exit``.
    """
    import os

    code = main()
    for stream in (sys.stdout, sys.stderr):
        if stream is None:  # closed at start and never replaced: nothing to flush
            continue
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # the reader went away (`| head`); the exit code still tells the story
        except KeyboardInterrupt:  # Ctrl-C as it ends: the work is done, say nothing
            code = code or 130
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
