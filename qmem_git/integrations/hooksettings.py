"""Agent hook settings: render our hook entries and merge them into settings.json files.

Pure functions (render, merge, remove) plus one effectful ``install_hooks`` that reads the
settings file, writes a backup and replaces it atomically. The file keeps its permission bits
(it may hold an API key), and so does the backup; a settings file that is a symlink (a dotfiles
checkout) is written through: its target changes, the link stays. Our entries are recognised by
their command (``... hook --agent <agent> <event>`` run by qmem-git) and, for Qwen Code, also by
the ``name`` field it accepts; Claude Code validates hook objects, so nothing extra goes there
(agent-integration §3.1). Everything else in the file is kept in place.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from qmem_git.core.jsonc import strip_jsonc
from qmem_git.errors import QmemError, UsageError
from qmem_git.integrations.agents import MAX_SETTINGS_BYTES, managed_memory_setting
from qmem_git.regularfile import read_regular

Agent = Literal["qwen", "claude"]
Scope = Literal["user", "project"]
AGENTS: tuple[Agent, ...] = ("qwen", "claude")
HOOK_NAME = "qmem-git"
HOOK_DESCRIPTION = "qmem-git managed auto-memory (added by qmem-git install-hooks)"
DEFAULT_COMMAND = "qmem-git"


@dataclass(frozen=True)
class HookEvent:
    """One agent event we hook: its name, our CLI alias, timeout (seconds) and matcher."""

    event: str
    alias: str
    timeout_s: int
    matcher: str | None = None


# Matchers on SessionStart only. No hook is `async`: both agents kill a still-running async hook
# when a headless session exits, so Stop and PreCompact hand their work to a detached worker and
# return at once instead. Timeouts are seconds for both agents (Qwen Code 0.24 docs: a command
# hook's `timeout` is in seconds; 1000 or more is still read as milliseconds, with a warning).
EVENTS: tuple[HookEvent, ...] = (
    HookEvent("SessionStart", "session-start", 20, matcher="startup|resume|clear|compact"),
    HookEvent("UserPromptSubmit", "prompt", 10),
    HookEvent("Stop", "stop", 30),
    HookEvent("PreCompact", "pre-compact", 30),
    HookEvent("SessionEnd", "session-end", 5),
)
# Old Qwen Code cores report a compaction as source "compress" (§3.2).
QWEN_EXTRA_SOURCES = "|compress"


@dataclass(frozen=True)
class InstallResult:
    """What an install/uninstall did (or would do): the file, the new text, the backup."""

    path: str
    changed: bool
    backup: str | None
    text: str
    notes: tuple[str, ...] = ()


# --------------------------------------------------------------------------- rendering


def command_prefix(executable: str = sys.executable) -> str:
    """How settings should start qmem-git without relying on PATH.

    The console script beside the interpreter (venv, pipx) starts fastest; otherwise the
    interpreter runs the package with ``-m``.
    """
    folder = os.path.dirname(executable)
    for name in ("qmem-git", "qmem-git.exe"):
        script = os.path.join(folder, name)
        if os.path.isfile(script) and os.access(script, os.X_OK):
            return _quote(script)
    return f"{_quote(executable)} -m qmem_git"


def _quote(path: str) -> str:
    if os.name == "nt":
        return f'"{path}"' if " " in path else path
    return shlex.quote(path)


def hook_command(agent: Agent, alias: str, prefix: str = DEFAULT_COMMAND) -> str:
    return f"{prefix} hook --agent {agent} {alias}"


def render_hook(agent: Agent, spec: HookEvent, prefix: str = DEFAULT_COMMAND) -> dict[str, Any]:
    """One command hook object (Qwen's also carries a name); the timeout is in seconds."""
    hook: dict[str, Any] = {"type": "command", "command": hook_command(agent, spec.alias, prefix)}
    if agent == "qwen":
        hook = {"name": HOOK_NAME, "description": HOOK_DESCRIPTION, **hook}
    hook["timeout"] = spec.timeout_s
    return hook


def render_group(agent: Agent, spec: HookEvent, prefix: str = DEFAULT_COMMAND) -> dict[str, Any]:
    group: dict[str, Any] = {}
    if spec.matcher:
        group["matcher"] = spec.matcher + (QWEN_EXTRA_SOURCES if agent == "qwen" else "")
    group["hooks"] = [render_hook(agent, spec, prefix)]
    return group


def render_hooks(agent: Agent, prefix: str = DEFAULT_COMMAND) -> dict[str, Any]:
    """The ``{"hooks": {...}}`` snippet for ``agent`` (what hooks/<agent>-settings.json holds)."""
    return {"hooks": {spec.event: [render_group(agent, spec, prefix)] for spec in EVENTS}}


def dumps(data: object) -> str:
    """Deterministic JSON text as we write settings files (2-space indent, trailing newline)."""
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------- merging


def is_our_hook(hook: object) -> bool:
    """A hook object qmem-git installed: Qwen's name marker, or our command line."""
    if not isinstance(hook, dict):
        return False
    if hook.get("name") == HOOK_NAME:
        return True
    command = hook.get("command")
    return (
        isinstance(command, str)
        and " hook --agent " in command
        and ("qmem-git" in command or "qmem_git" in command)
    )


def remove_hooks(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` without our hooks; containers emptied by the removal are dropped too."""
    result = dict(settings)
    hooks = result.get("hooks")
    if not isinstance(hooks, dict) or not hooks:
        return result
    kept: dict[str, Any] = {}
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            kept[event] = groups
            continue
        new_groups = _without_ours(groups)
        if new_groups or not groups:
            kept[event] = new_groups
    if kept:
        result["hooks"] = kept
    else:
        del result["hooks"]
    return result


def _without_ours(groups: list[Any]) -> list[Any]:
    out: list[Any] = []
    for group in groups:
        inner = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(inner, list):
            out.append(group)
            continue
        mine = [hook for hook in inner if is_our_hook(hook)]
        if not mine:
            out.append(group)
        elif len(mine) < len(inner):
            out.append({**group, "hooks": [hook for hook in inner if not is_our_hook(hook)]})
    return out


def add_hooks(
    settings: Mapping[str, Any], agent: Agent, prefix: str = DEFAULT_COMMAND
) -> dict[str, Any]:
    """Our hooks (replacing any earlier qmem-git entries), every other key and hook kept."""
    result = remove_hooks(settings)
    hooks = result.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise QmemError(
            "its 'hooks' value is not an object",
            "fix or remove that key, then run install-hooks again",
        )
    merged: dict[str, Any] = dict(hooks or {})
    for event, groups in render_hooks(agent, prefix)["hooks"].items():
        existing = merged.get(event, [])
        if not isinstance(existing, list):
            raise QmemError(
                f"its hooks.{event} value is not a list of hook groups",
                "fix or remove that key, then run install-hooks again",
            )
        merged[event] = [*existing, *groups]
    result["hooks"] = merged
    return result


def set_engine_mode(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Switch Qwen Code's own extraction and dream off so only qmem-git writes (§4 (2))."""
    result = dict(settings)
    memory = result.get("memory")
    memory = dict(memory) if isinstance(memory, dict) else {}
    memory["enableManagedAutoMemory"] = False
    memory["enableManagedAutoDream"] = False
    result["memory"] = memory
    return result


# --------------------------------------------------------------------------- JSON with comments


def parse_jsonc(text: str, where: str) -> object:
    """JSON that may hold ``//`` and ``/* */`` comments and trailing commas (VS Code, Qwen).

    Raises QmemError naming ``where`` and the line when the text is still not JSON.
    """
    try:
        return json.loads(strip_jsonc(text.lstrip("\ufeff")))
    except json.JSONDecodeError as exc:
        raise QmemError(
            f"{where}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
            "fix the file by hand; nothing was written",
        ) from None
    except RecursionError:
        raise QmemError(
            f"{where}: not valid JSON (nested too deeply)", "fix the file by hand"
        ) from None
    except ValueError as exc:  # a number with more digits than Python converts
        raise QmemError(f"{where}: not valid JSON ({exc})", "fix the file by hand") from None


def has_comments(text: str) -> bool:
    """True when ``text`` holds ``//`` or ``/* */`` comments (a rewrite drops them)."""
    return strip_jsonc(text, trailing_commas=False) != text


# --------------------------------------------------------------------------- files


def settings_path(agent: Agent, scope: Scope, project_dir: str, home: str) -> str:
    """``.qwen/settings.json`` / ``.claude/settings.json`` in the project or the home dir."""
    base = home if scope == "user" else project_dir
    return os.path.join(base, f".{agent}", "settings.json")


def read_settings(path: str) -> tuple[dict[str, Any], str | None]:
    """The parsed settings object (empty when the file is missing) and the original text.

    The text is the file's bytes decoded as they are (line endings kept), so a backup written
    from it is byte-identical. Unreadable, non-UTF-8 or non-JSON files raise QmemError.
    """
    try:
        raw = read_regular(path, MAX_SETTINGS_BYTES)  # never a FIFO, a device or 4 GB
    except FileNotFoundError:
        return {}, None
    except OSError as exc:
        hint = "check its permissions" if exc.errno else "make it a regular JSON file"
        raise QmemError(f"{path}: cannot read ({exc.strerror or exc})", hint) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise QmemError(
            f"{path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})",
            "save the file as UTF-8, as JSON requires; nothing was written",
        ) from None
    if not text.strip():
        return {}, text
    data = parse_jsonc(text, path)
    if not isinstance(data, dict):
        raise QmemError(f"{path}: the top level is not a JSON object", "fix the file by hand")
    return data, text


def write_target(path: str) -> tuple[str, tuple[str, ...]]:
    """Where writing ``path`` lands: ``path``, or the file it links to (the link is kept).

    Replacing a symlink with a file would cut a dotfiles checkout loose; a link to nothing
    (or to a folder) is refused rather than guessed at.
    """
    if not os.path.islink(path):
        return path, ()
    target = os.path.realpath(path)
    if not os.path.isfile(target):
        raise QmemError(
            f"{path} is a symlink to {target}, which is not a file",
            "create that file or replace the link, then run the command again",
        )
    return target, (f"{path} is a symlink: its target {target} is written, the link is kept",)


def write_with_backup(path: str, text: str, previous: str | None, now: datetime) -> str | None:
    """Keep the previous file as ``<name>.bak-<timestamp>``, then replace it atomically.

    Both keep the file's permission bits (a 0600 file holding an API key stays private). A
    symlink is written through to its target; the backup goes beside the link.
    """
    from qmem_git.store.workdir import atomic_write, file_mode

    target, _ = write_target(path)
    backup = None
    written = path
    try:
        if previous is not None:
            backup = written = free_backup_name(path, now, os.path.lexists)
            atomic_write(backup, previous.encode("utf-8"), mode=file_mode(target))
        written = target
        atomic_write(target, text.encode("utf-8"))
    except OSError as exc:
        raise QmemError(
            f"{written}: cannot write ({exc.strerror or exc})", "check the folder's permissions"
        ) from None
    return backup


def free_backup_name(path: str, now: datetime, exists: Callable[[str], bool]) -> str:
    stem = f"{path}.bak-{now.strftime('%Y%m%d-%H%M%S')}"
    candidate, n = stem, 1
    while exists(candidate):
        candidate, n = f"{stem}-{n}", n + 1
    return candidate


def install_hooks(
    agent: Agent,
    scope: Scope,
    project_dir: str,
    home: str,
    *,
    uninstall: bool = False,
    dry_run: bool = False,
    engine: bool = False,
    now: datetime,
    prefix: str | None = None,
) -> InstallResult:
    """Add (or remove) our hooks in the agent's settings file; see the module docstring.

    ``prefix`` is how the command starts (default: ``command_prefix()``, an absolute path).
    """
    if agent not in AGENTS:
        raise UsageError(f"unknown agent {agent!r}", "use --agent qwen or --agent claude")
    path = settings_path(agent, scope, project_dir, home)
    target, link_notes = write_target(path)
    current, previous = read_settings(target)
    if uninstall and agent == "claude":
        from qmem_git.integrations.originals import read_record

        record = read_record(path)
        if record is not None:
            return _restore_claude(path, current, previous, record, dry_run=dry_run, now=now)
    if uninstall:
        updated = remove_hooks(current)
    else:
        try:
            updated = add_hooks(current, agent, prefix or command_prefix())
        except QmemError as exc:  # name the file: "<path>: its hooks.Stop value is not ..."
            raise QmemError(f"{target}: {exc.message}", exc.hint) from None
        engine_mode = set_engine_mode if agent == "qwen" else set_claude_engine_mode
        updated = engine_mode(updated) if engine else updated
    changed = updated != current
    text = dumps(updated)
    notes = install_notes(agent, scope, updated, uninstall=uninstall, engine=engine)
    if changed:
        notes = link_notes + rewrite_notes(previous, "settings.json") + notes
    backup = None
    if changed and not dry_run:
        backup = write_with_backup(path, text, previous, now)
        if agent == "claude" and not uninstall:
            from qmem_git.integrations.originals import keep_original
            from qmem_git.store.workdir import file_mode

            keep_original(path, previous, text, file_mode(write_target(path)[0]))
    return InstallResult(path, changed, backup, text, notes)


def set_claude_engine_mode(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Switch Claude Code's own auto-memory off so only qmem-git writes memory."""
    return {**settings, "autoMemoryEnabled": False}


def _restore_claude(
    path: str,
    current: dict[str, Any],
    previous: str | None,
    record: dict[str, Any],
    *,
    dry_run: bool,
    now: datetime,
) -> InstallResult:
    """Uninstall from Claude Code's settings: the file as it was before the first install,
    byte for byte, unless it changed since (then qmem-git's parts alone are taken out)."""
    from qmem_git.integrations import originals

    cleaned = originals.original_switch(record, remove_hooks(current))
    text, exact = originals.restored(record, previous)
    notes: tuple[str, ...] = ()
    if not exact:
        text = dumps(cleaned)
        notes = (
            "settings.json changed since qmem-git's install: only qmem-git's hooks and its "
            "autoMemoryEnabled were taken out; the rest of the change is kept",
        )
    changed = text != previous
    backup = None
    if not dry_run:
        if text is None and previous is not None:  # there was no file before the install
            from qmem_git.store.workdir import atomic_write

            backup = free_backup_name(path, now, os.path.lexists)
            atomic_write(backup, previous.encode("utf-8"))
            os.unlink(write_target(path)[0])
        elif changed and text is not None:
            backup = write_with_backup(path, text, previous, now)
        originals.forget_record(path)
    return InstallResult(path, changed, backup, text or "", notes)


def rewrite_notes(previous: str | None, name: str) -> tuple[str, ...]:
    """What a rewrite of ``previous`` loses: its comments (the backup keeps them)."""
    if previous is not None and has_comments(previous):
        return (f"comments in {name} are not kept; the original is in the backup",)
    return ()


def install_notes(
    agent: Agent, scope: Scope, settings: Mapping[str, Any], *, uninstall: bool, engine: bool
) -> tuple[str, ...]:
    """Warnings the user should see: disabled hooks, untrusted folders, two extractors."""
    notes: list[str] = []
    if settings.get("disableAllHooks") is True:
        notes.append("this settings file has disableAllHooks: true; no hook will run")
    if agent == "claude" and not uninstall:
        notes.append(
            "Claude Code's own auto-memory is off: qmem-git extracts each turn (engine mode)"
            if settings.get("autoMemoryEnabled") is False
            else "Claude Code's own auto-memory is on: qmem-git commits what Claude writes in "
            "its memory folder (companion mode); use --engine to let qmem-git extract instead"
        )
    if uninstall:
        if agent == "qwen" and _managed_memory_off(settings):
            notes.append(
                "Qwen Code's own auto-memory stays switched off; turn it back on with /memory"
            )
        return tuple(notes)
    if agent == "qwen" and scope == "project":
        notes.append("Qwen Code reads .qwen/settings.json only in trusted folders")
    if agent == "qwen" and not engine and not _managed_memory_off(settings):
        notes.append(
            "Qwen Code's own auto-memory is on: qmem-git runs in companion mode and commits "
            "its changes; use --engine to let qmem-git extract instead"
        )
    return tuple(notes)


def _managed_memory_off(settings: Mapping[str, Any]) -> bool:
    return managed_memory_setting(settings) is False
