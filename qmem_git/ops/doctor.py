"""Health check of one project's memory store: each check says what is wrong and how to fix it."""

from __future__ import annotations

import os
from dataclasses import dataclass

from qmem_git.core.paths import git_dir_of, legacy_git_dir
from qmem_git.settings import Settings
from qmem_git.store.relocate import CONFIG_BEFORE_MOVE, disabled_hooks, repository

MODEL_DOCS = "see the README section 'Using a model'"
CORRUPT_HINT = (
    "clone the memory from a remote into a new folder (qmem-git clone URL), "
    "or restore the repository (memory.git beside the memory folder) from a backup"
)


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    hint: str = ""
    warning: bool = False  # a failed warning does not make doctor fail


def run_checks(settings: Settings) -> list[Check]:
    """Layout, repository, history, objects, locks, index, validation and the git hook."""
    root = settings.layout.memory_root
    checks = [_layout(settings)]
    git_dir = repository(root)
    if not os.path.isdir(git_dir):
        checks.append(Check("repository", False, f"{root} is not a repository", "qmem-git init"))
        return [*checks, _model(settings)]
    checks += [_location(root, git_dir), _head(root), _objects(root), _locks(git_dir)]
    claude = settings.agent == "claude"  # Claude's MEMORY.md is Claude's own format
    checks += [] if claude else [_index(settings)]
    checks += [_validation(root, claude), _hook(git_dir)]
    checks.append(_model(settings))
    return checks


def _layout(settings: Settings) -> Check:
    layout = settings.layout
    return Check("layout", True, f"{layout.mode} mode, memory root {layout.memory_root}")


def repair(settings: Settings) -> list[str]:
    """``doctor --fix``: what can be repaired without losing anything, under the writer lock;
    returns what was done. Today: a lost ``main`` is pointed back at its newest commit."""
    from qmem_git.store.branchref import restore_branch
    from qmem_git.store.locks import writer_lock

    root = settings.layout.memory_root
    if not os.path.isdir(repository(root)):
        return []
    with writer_lock(settings.layout, settings.lock_timeout):
        restored = restore_branch(root)
    if restored is None:
        return []
    branch, commit = restored
    return [f"fixed: {branch} points at {commit[:12]} again (its newest commit)"]


def _location(root: str, git_dir: str) -> Check:
    """The repository lives beside the memory folder, never in it (``store.relocate``); a
    ``.git`` in the memory folder is the agent's (or an earlier version's) and is never read,
    run or versioned: reported, never removed, as the agent owns the folder."""
    legacy = legacy_git_dir(root)
    if git_dir == legacy:
        return Check(
            "repository",
            False,
            f"the repository is still inside the memory folder ({legacy})",
            f"the next writing command moves it to {git_dir_of(root)} (`qmem-git index` does)",
            warning=True,
        )
    if os.path.lexists(legacy):
        return Check(
            "repository",
            False,
            f"{legacy} is in the memory folder: not qmem-git's repository; git and qmem-git "
            "never read or run it, and it is not versioned",
            "review it and remove it if neither you nor your agent needs it",
            warning=True,
        )
    disabled = disabled_hooks(git_dir)
    if disabled:
        return Check(
            "repository",
            False,
            f"hooks not run (disabled when the repository left the memory folder, where the "
            f"agent could write them): {', '.join(disabled)}",
            f"review them in {os.path.join(git_dir, 'hooks')}; `chmod +x` one to use it again",
            warning=True,
        )
    before = os.path.join(git_dir, CONFIG_BEFORE_MOVE)
    if os.path.exists(before):
        return Check(
            "repository",
            False,
            f"settings other than a memory repository's own were left out of its config when "
            f"it left the memory folder (where the agent could write them); the old file is "
            f"{before}",
            "review it; add back what you set yourself with `qmem-git git config …`, then "
            "remove the file",
            warning=True,
        )
    return Check("repository", True, f"{git_dir}, outside the memory folder")


def _head(root: str) -> Check:
    from qmem_git.errors import BranchLost, QmemError, RepoCorrupt
    from qmem_git.ops.history import log

    try:
        entries = log(root, limit=1)
    except BranchLost as exc:
        return Check("history", False, exc.message, exc.hint)
    except RepoCorrupt as exc:  # its hint says "run qmem-git doctor": we are doctor
        return Check("history", False, exc.message, CORRUPT_HINT)
    except QmemError as exc:
        return Check("history", False, exc.message, exc.hint)
    if not entries:
        return Check("history", False, "no commits yet", "qmem-git init")
    last = entries[0]
    return Check("history", True, f"last operation {last.short}: {last.info.subject}")


def _objects(root: str) -> Check:
    from qmem_git.store.integrity import check_objects
    from qmem_git.store.packcheck import damaged_packs

    report = check_objects(root)
    git_dir = repository(root)
    damaged = [f"pack {name} is damaged" for name in damaged_packs(git_dir, remember=False)]
    if report.problems or damaged:
        return Check(
            "objects",
            False,
            "; ".join([*damaged, *report.problems]),
            CORRUPT_HINT,
        )
    detail = f"{report.commits} commits and the {report.files} files of HEAD are readable"
    return Check("objects", True, detail)


def _locks(git_dir: str) -> Check:
    leftovers = [
        name
        for name in ("index.lock", "HEAD.lock", os.path.join("refs", "heads", "main.lock"))
        if os.path.exists(os.path.join(git_dir, name))
    ]
    if leftovers:
        return Check(
            "locks",
            False,
            f"lock files left in {git_dir}: " + ", ".join(leftovers),
            "the next writing command removes them when stale",
            warning=True,
        )
    return Check("locks", True, "no leftover git lock files")


def _index(settings: Settings) -> Check:
    from qmem_git.ops.lifecycle import check_index

    status = check_index(settings)
    if not status.up_to_date:
        return Check("index", False, "MEMORY.md is stale", "qmem-git index")
    if status.dropped:
        return Check(
            "index",
            False,
            f"{len(status.dropped)} memories do not fit in MEMORY.md",
            "run qmem-git dream or forget old memories",
            warning=True,
        )
    return Check("index", True, "MEMORY.md is up to date")


def _validation(root: str, claude: bool = False) -> Check:
    from qmem_git.ops.validate import validate_tree

    report = validate_tree(root)
    if claude:
        from qmem_git.ops.claude import claude_report

        report = claude_report(report, root)
    errors, warnings = report.count("error"), report.count("warning")
    detail = f"{report.files_checked} files: {errors} error(s), {warnings} warning(s)"
    return Check("validate", errors == 0, detail, "qmem-git validate" if errors else "")


def _hook(git_dir: str) -> Check:
    """Ours and current: an older version's hook checks the whole folder, and one naming an
    interpreter that is gone makes every hand commit fail."""
    from qmem_git.ops.lifecycle import hook_command
    from qmem_git.store.relocate import HOOK_MARKER
    from qmem_git.store.repo import hook_script

    path = os.path.join(git_dir, "hooks", "pre-commit")
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        text = ""
    if HOOK_MARKER not in text:
        return Check("git hook", False, "pre-commit hook missing", "qmem-git init", warning=True)
    if text != hook_script(hook_command()):
        detail = "pre-commit hook is from another qmem-git install or version"
        return Check("git hook", False, detail, "qmem-git init (rewrites it)", warning=True)
    return Check("git hook", True, "pre-commit hook validates hand-made commits")


def _model(settings: Settings) -> Check:
    """The optional model endpoint: one short request (no retries), or why it is not used."""
    from qmem_git.modelconfig import load_model_config

    problems = load_model_config(settings.env, settings.home).problems
    if problems:
        hint = f"fix the model settings ({MODEL_DOCS}) or unset QMEM_LLM_*"
        return Check("model", False, "; ".join(problems), hint, warning=True)
    if settings.model is None:
        return Check("model", True, "no model configured; heuristic planners only")
    from qmem_git.integrations.llm import check_endpoint

    report = check_endpoint(settings.model)
    where = f"{report.model} at {report.url}"
    if not report.ok:
        return Check("model", False, f"{where}: {report.reason}", report.hint, warning=True)
    detail = f"{where} answered in {report.round_trip_ms} ms"
    return Check("model", True, detail + (f"; {report.warning}" if report.warning else ""))
