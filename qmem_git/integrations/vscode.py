"""VS Code tasks for the memory folder: render them and merge them into ``.vscode/tasks.json``.

Our tasks are labelled ``qmem: …`` and carry a ``detail`` ending in ``MARKER`` (a field VS Code
shows in the task picker, so the marker is schema-valid); install replaces them, uninstall
removes only them and our inputs. A task of the user's that carries one of our labels is replaced
too (with a note): VS Code runs tasks by label, and two with one label make it pick one.
tasks.json may hold comments and trailing commas (JSONC): they are read, but a rewrite drops
the comments, so the original is kept as a backup (and a note says so).

``python -m qmem_git.integrations.vscode --write [REPO]`` regenerates the bundled copies in
``hooks/`` and ``vscode-tasks/`` (a test checks they match what the package renders).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from qmem_git.errors import QmemError
from qmem_git.integrations.hooksettings import (
    AGENTS,
    InstallResult,
    dumps,
    read_settings,
    render_hooks,
    rewrite_notes,
    write_target,
    write_with_backup,
)

MARKER = "[qmem-git]"
LABEL_PREFIX = "qmem: "
COMMAND = "qmem-git"
# agent-integration §5; the lazy (.+?) keeps a Windows drive letter in the file name.
GCC_REGEXP = r"^(.+?):(\d+):(\d+):\s+(error|warning|info):\s+(.*)$"
QUERY_INPUT = "qmemQuery"
FORGET_INPUT = "qmemForgetQuery"
TASKS_FILE = os.path.join("vscode-tasks", "tasks.json")
HOOK_TEMPLATE = "git-pre-commit.sh"
# The bundled copy of the memory repo's pre-commit hook runs qmem-git from PATH (no fallback
# interpreter: the copy is not tied to an install).
PRE_COMMIT_COMMAND = "qmem_git_validate"

_QUIET = {"reveal": "silent", "revealProblems": "onProblem", "panel": "dedicated"}
_SHOWN = {"reveal": "always", "panel": "dedicated", "focus": True}


def problem_matcher() -> dict[str, Any]:
    """Parses ``validate --format gcc``; absolute paths are used as they are (autoDetect)."""
    return {
        "owner": "qmem",
        "source": "qmem",
        "fileLocation": ["autoDetect", "${workspaceFolder}"],
        "pattern": {
            "regexp": GCC_REGEXP,
            "file": 1,
            "line": 2,
            "column": 3,
            "severity": 4,
            "message": 5,
        },
    }


def _task(
    name: str, detail: str, args: list[str], presentation: Mapping[str, Any]
) -> dict[str, Any]:
    return {
        "label": LABEL_PREFIX + name,
        "detail": f"{detail} {MARKER}",
        "type": "shell",
        "command": COMMAND,
        "args": args,
        "problemMatcher": [],
        "presentation": dict(presentation),
    }


def render_tasks() -> list[dict[str, Any]]:
    """Our tasks, in the order they appear in the task picker."""
    validate = _task(
        "validate",
        "Check the memory files (runs when the folder opens)",
        ["validate", "--format", "gcc"],
        {**_QUIET, "clear": True, "focus": False},
    )
    validate["problemMatcher"] = problem_matcher()
    validate["runOptions"] = {"runOn": "folderOpen"}
    return [
        validate,
        _task(
            "recall",
            "Show the memories relevant to a question",
            ["recall", f"${{input:{QUERY_INPUT}}}"],
            _SHOWN,
        ),
        _task("log", "History of memory operations", ["log", "--stat"], _SHOWN),
        _task("diff", "What the last memory operation changed", ["diff"], _SHOWN),
        _task("sync", "Share memories with the configured remote", ["sync"], _SHOWN),
        _task(
            "dream", "Consolidate memories now (skips the daily gate)", ["dream", "--force"], _SHOWN
        ),
        _task(
            "forget",
            "List the matching memories, then remove them if you confirm (restore brings "
            "them back)",
            ["forget", "--interactive", f"${{input:{FORGET_INPUT}}}"],
            _SHOWN,
        ),
    ]


def render_inputs() -> list[dict[str, Any]]:
    return [
        {
            "id": QUERY_INPUT,
            "type": "promptString",
            "description": "What should qmem recall?",
            "default": "",
        },
        {
            "id": FORGET_INPUT,
            "type": "promptString",
            "description": "What should qmem forget?",
            "default": "",
        },
    ]


def render_tasks_file() -> dict[str, Any]:
    """The whole tasks.json we ship in ``vscode-tasks/``."""
    return {"version": "2.0.0", "tasks": render_tasks(), "inputs": render_inputs()}


# --------------------------------------------------------------------------- merging


def is_our_task(task: object) -> bool:
    if not isinstance(task, dict):
        return False
    label, detail = task.get("label"), task.get("detail")
    return (
        isinstance(label, str)
        and label.startswith(LABEL_PREFIX)
        and isinstance(detail, str)
        and detail.endswith(MARKER)
    )


def _is_our_input(item: object) -> bool:
    return isinstance(item, dict) and item.get("id") in (QUERY_INPUT, FORGET_INPUT)


def remove_tasks(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` without our tasks and inputs; lists emptied by the removal are dropped."""
    result = dict(config)
    for key, ours in (("tasks", is_our_task), ("inputs", _is_our_input)):
        items = result.get(key)
        if isinstance(items, list) and items:
            kept = [item for item in items if not ours(item)]
            if kept:
                result[key] = kept
            else:
                del result[key]
    return result


def taken_labels(config: Mapping[str, Any]) -> list[str]:
    """Labels of ours that tasks without our marker use (install replaces those tasks)."""
    tasks = config.get("tasks")
    if not isinstance(tasks, list):
        return []
    ours = {task["label"] for task in render_tasks()}
    found = [t["label"] for t in tasks if _labelled(t, ours) and not is_our_task(t)]
    return list(dict.fromkeys(found))


def add_tasks(config: Mapping[str, Any]) -> dict[str, Any]:
    """Our tasks and inputs after everyone else's (earlier copies of ours are replaced).

    A task labelled like one of ours is replaced as well: labels must stay unique.
    """
    result = remove_tasks(config)
    result.setdefault("version", "2.0.0")
    labels = {task["label"] for task in render_tasks()}
    for key, ours in (("tasks", render_tasks()), ("inputs", render_inputs())):
        existing = result.get(key, [])
        if not isinstance(existing, list):
            raise QmemError(
                f"tasks.json has a {key!r} value that is not a list",
                "fix the file by hand, then run install-tasks again",
            )
        if key == "tasks":
            existing = [task for task in existing if not _labelled(task, labels)]
        result[key] = [*existing, *ours]
    return result


def _labelled(task: object, labels: set[str]) -> bool:
    return isinstance(task, dict) and task.get("label") in labels


def install_tasks(
    directory: str,
    *,
    uninstall: bool = False,
    dry_run: bool = False,
    now: datetime | None = None,
) -> InstallResult:
    """Merge our tasks into ``<directory>/.vscode/tasks.json`` (or take them out)."""
    path = os.path.join(directory, ".vscode", "tasks.json")
    target, link_notes = write_target(path)
    current, previous = read_settings(target)
    updated = remove_tasks(current) if uninstall else add_tasks(current)
    changed = updated != current
    notes: tuple[str, ...] = ()
    if changed:
        replaced = () if uninstall else tuple(taken_labels(current))
        notes = link_notes + rewrite_notes(previous, "tasks.json")
        notes += tuple(
            f"your task {label!r} was replaced by qmem-git's (task labels must be unique); "
            "the original is in the backup"
            for label in replaced
        )
    backup = None
    if changed and not dry_run:
        backup = write_with_backup(
            path, dumps(updated), previous, now or datetime.now(timezone.utc)
        )
    return InstallResult(path, changed, backup, dumps(updated), notes)


# --------------------------------------------------------------------------- bundled copies


def bundled_files() -> dict[str, str]:
    """Relative path -> text of the files the repository ships in hooks/ and vscode-tasks/."""
    files = {
        os.path.join("hooks", f"{agent}-settings.json"): dumps(render_hooks(agent))
        for agent in AGENTS
    }
    files[os.path.join("hooks", HOOK_TEMPLATE)] = pre_commit_script()
    files[TASKS_FILE] = dumps(render_tasks_file())
    return files


def pre_commit_script() -> str:
    """The memory repo's git pre-commit hook, with qmem-git taken from PATH."""
    from importlib import resources

    template = resources.files("qmem_git.integrations") / "templates" / HOOK_TEMPLATE
    return template.read_text(encoding="utf-8").replace("@HOOK_COMMAND@", PRE_COMMIT_COMMAND)


def write_bundled_files(repo_root: str) -> list[str]:
    """Regenerate the bundled copies under ``repo_root``; returns the paths written."""
    from qmem_git.store.workdir import atomic_write

    written = []
    for rel, text in sorted(bundled_files().items()):
        path = os.path.join(repo_root, rel)
        atomic_write(path, text.encode("utf-8"))
        if rel.endswith(".sh"):
            os.chmod(path, 0o755)
        written.append(path)
    return written


def main(argv: Sequence[str]) -> int:
    """``--write [REPO]``: regenerate the bundled copies (default: the current directory)."""
    if not argv or argv[0] != "--write" or len(argv) > 2:
        return 2
    write_bundled_files(argv[1] if len(argv) == 2 else os.getcwd())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
