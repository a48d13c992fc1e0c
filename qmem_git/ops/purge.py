"""``purge``: take files, or every credential, out of the commits no remote has yet.

The store does the rewrite (``store.purge``) under the writer lock; this module checks the
request, takes the lock and words the result. What a remote already has is reported, never
silently ignored: the credential has left the machine and must be rotated.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from qmem_git.core.model import INDEX_NAME
from qmem_git.core.names import check_path_safety
from qmem_git.errors import UsageError
from qmem_git.ops.required import require_store
from qmem_git.ops.runner import identity_for
from qmem_git.settings import Settings
from qmem_git.store.purge import PurgeRequest, PurgeResult, purge_locked
from qmem_git.store.sync import locked_writer


def run_purge(
    settings: Settings,
    now: datetime,
    *,
    paths: Sequence[str] = (),
    secrets: bool = False,
    dry_run: bool = False,
) -> PurgeResult:
    """Rewrite the unpushed commits without ``paths`` (files or folders) and, with ``secrets``,
    without any file version holding a credential."""
    require_store(settings)
    request = PurgeRequest(tuple(_checked(path) for path in paths), secrets)
    if not request.paths and not secrets:
        raise UsageError(
            "purge needs PATH... or --secrets",
            "`qmem-git purge --secrets --dry-run` lists the credentials in unpushed commits",
        )
    with locked_writer(
        settings.layout,
        identity=identity_for(settings),
        host=settings.host,
        now=now,
        lock_timeout=settings.lock_timeout,
        recover=not dry_run,
    ):
        return purge_locked(settings.layout, request, now=now, dry_run=dry_run)


def _checked(path: str) -> str:
    rel = path.strip("/")
    problems = check_path_safety(rel) if rel not in ("", ".") else ["names the whole memory"]
    if rel == INDEX_NAME:
        problems = ["MEMORY.md is rebuilt from the files; purge the memory files it lists"]
    if problems:
        raise UsageError(f"cannot purge {path!r}: {problems[0]}", "give a path inside the memory")
    return rel


def purge_summary(result: PurgeResult) -> str:
    """What the purge did, for people (``--json`` uses ``as_dict``)."""
    removed = len(result.removals)
    if not result.rewritten:
        lines = [f"Nothing to purge in the {result.unpushed} commit(s) not yet on a remote"]
    elif result.dry_run:
        lines = [
            f"Would purge {removed} file version(s) from {result.rewritten} of the "
            f"{result.unpushed} commit(s) not yet on a remote"
        ]
    else:
        lines = [
            f"Purged {removed} file version(s) from {result.rewritten} unpushed commit(s); "
            f"main is now {(result.head or '')[:12]}",
            f"  the old history is kept as {result.backup} (delete it with "
            f"`git update-ref -d {result.backup}` once you no longer need it)",
        ]
    lines += [f"  {r.commit[:12]} {r.path} ({r.what})" for r in result.removals]
    return "\n".join(lines)


def leak_warnings(result: PurgeResult) -> list[str]:
    """One warning per file version a remote already has: purge cannot take it back."""
    rewrite = (
        "rewrite that remote's history (e.g. `git filter-repo` in a clone of it, then "
        "force-push), then on each machine run `qmem-git sync --force` and `qmem-git purge`"
    )
    lines = []
    for leak in result.leaked:
        where = f"{leak.path} is already on {leak.remote} (commit {leak.commit[:12]}"
        if is_secret(leak.what):
            lines.append(
                f"warning: {where}: {leak.what}); purge cannot take it back: rotate the "
                f"credential now, then {rewrite} --secrets`"
            )
        else:
            lines.append(
                f"warning: {where}); purge keeps what a remote has: if it holds a credential, "
                f"rotate it and {rewrite} PATH`"
            )
    return lines


def is_secret(what: str) -> bool:
    return what.startswith("secret")


def secret_left(result: PurgeResult) -> bool:
    """A credential a remote already has (the CLI exits 1: it needs rotating)."""
    return any(is_secret(leak.what) for leak in result.leaked)
