"""install-hooks: rendering per agent, marker-based merge/unmerge, backups, dry runs, JSONC."""

from __future__ import annotations

import copy
import json
import os
import re
import stat
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qmem_git.errors import QmemError
from qmem_git.integrations import hooksettings as hs

NOW = datetime(2026, 5, 20, 8, 0, 0, tzinfo=timezone.utc)
PREFIX = "/opt/venv/bin/qmem-git"

OTHER_SETTINGS: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(ls:*)"]},
    "hooks": {
        "UserPromptSubmit": [
            {"hooks": [{"type": "command", "command": "echo other-prompt", "timeout": 3}]}
        ],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh"}]}],
    },
}


def install(agent: hs.Agent, project: Path, home: Path, **kwargs: Any) -> hs.InstallResult:
    options: dict[str, Any] = {"now": NOW, "prefix": PREFIX, **kwargs}
    return hs.install_hooks(
        agent, options.pop("scope", "project"), str(project), str(home), **options
    )


def write_settings(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=4))


# --------------------------------------------------------------------------- rendering


def test_claude_snippet_matches_the_spec_example() -> None:
    hooks = hs.render_hooks("claude")["hooks"]
    assert list(hooks) == ["SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "SessionEnd"]
    assert hooks["SessionStart"] == [
        {
            "matcher": "startup|resume|clear|compact",
            "hooks": [
                {
                    "type": "command",
                    "command": "qmem-git hook --agent claude session-start",
                    "timeout": 20,
                }
            ],
        }
    ]
    assert hooks["UserPromptSubmit"][0] == {
        "hooks": [
            {"type": "command", "command": "qmem-git hook --agent claude prompt", "timeout": 10}
        ]
    }
    stop = hooks["Stop"][0]["hooks"][0]
    assert stop["timeout"] == 30  # returns at once: the work runs in a detached worker
    assert all("async" not in group["hooks"][0] for groups in hooks.values() for group in groups)
    assert all("name" not in group["hooks"][0] for groups in hooks.values() for group in groups)


def test_qwen_snippet_uses_seconds_and_a_name() -> None:
    hooks = hs.render_hooks("qwen")["hooks"]
    timeouts = {event: groups[0]["hooks"][0]["timeout"] for event, groups in hooks.items()}
    assert timeouts == {
        "SessionStart": 20,
        "UserPromptSubmit": 10,
        "Stop": 30,
        "PreCompact": 30,
        "SessionEnd": 5,
    }
    assert all("async" not in group["hooks"][0] for groups in hooks.values() for group in groups)
    first = hooks["SessionStart"][0]
    assert first["matcher"] == "startup|resume|clear|compact|compress"
    assert first["hooks"][0]["name"] == hs.HOOK_NAME
    assert first["hooks"][0]["command"] == "qmem-git hook --agent qwen session-start"


def test_command_prefix_prefers_the_console_script(tmp_path: Path) -> None:
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.write_text("")
    assert hs.command_prefix(str(python)) == f"{python} -m qmem_git"
    script = tmp_path / "bin" / "qmem-git"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    assert hs.command_prefix(str(python)) == str(script)


def test_command_prefix_quotes_paths_with_spaces(tmp_path: Path) -> None:
    python = tmp_path / "my env" / "python"
    assert hs.command_prefix(str(python)) == f"'{python}' -m qmem_git"


@pytest.mark.parametrize(
    ("hook", "ours"),
    [
        ({"type": "command", "command": "qmem-git hook --agent claude stop"}, True),
        (
            {"type": "command", "command": "'/a b/python' -m qmem_git hook --agent qwen prompt"},
            True,
        ),
        ({"type": "command", "command": "/x/qmem-git --project /p hook --agent claude stop"}, True),
        ({"name": "qmem-git", "type": "command", "command": "anything"}, True),
        ({"type": "command", "command": "qmem-git recall foo"}, False),
        ({"type": "command", "command": "other hook --agent claude"}, False),
        ("not a dict", False),
    ],
)
def test_is_our_hook(hook: object, ours: bool) -> None:
    assert hs.is_our_hook(hook) is ours


# --------------------------------------------------------------------------- merging


def test_round_trip_keeps_everything_else(tmp_path: Path) -> None:
    project, home = tmp_path / "proj", tmp_path / "home"
    path = project / ".claude" / "settings.json"
    write_settings(path, OTHER_SETTINGS)
    result = install("claude", project, home)
    assert result.changed and result.path == str(path)
    data = json.loads(path.read_text())
    assert data["model"] == "opus" and data["permissions"] == OTHER_SETTINGS["permissions"]
    assert data["hooks"]["PreToolUse"] == OTHER_SETTINGS["hooks"]["PreToolUse"]
    prompt_groups = data["hooks"]["UserPromptSubmit"]
    assert prompt_groups[0] == OTHER_SETTINGS["hooks"]["UserPromptSubmit"][0]
    assert prompt_groups[1]["hooks"][0]["command"] == f"{PREFIX} hook --agent claude prompt"
    assert result.text == path.read_text()

    again = install("claude", project, home)
    assert not again.changed and again.backup is None
    assert json.loads(path.read_text()) == data

    removed = install("claude", project, home, uninstall=True)
    assert removed.changed
    assert json.loads(path.read_text()) == OTHER_SETTINGS


def test_reinstall_with_a_new_path_replaces_our_entries(tmp_path: Path) -> None:
    install("qwen", tmp_path, tmp_path / "home")
    install("qwen", tmp_path, tmp_path / "home", prefix="/new/qmem-git")
    data = json.loads((tmp_path / ".qwen" / "settings.json").read_text())
    commands = [g["hooks"][0]["command"] for groups in data["hooks"].values() for g in groups]
    assert len(commands) == 5
    assert all(c.startswith("/new/qmem-git hook --agent qwen ") for c in commands)


def test_uninstall_keeps_foreign_hooks_sharing_our_group(tmp_path: Path) -> None:
    mine = hs.render_hook("claude", hs.EVENTS[2], PREFIX)
    theirs = {"type": "command", "command": "notify.sh"}
    settings = {"hooks": {"Stop": [{"hooks": [theirs, mine]}]}}
    assert hs.remove_hooks(settings) == {"hooks": {"Stop": [{"hooks": [theirs]}]}}


def test_uninstall_leaves_containers_it_did_not_empty(tmp_path: Path) -> None:
    settings: dict[str, Any] = {"hooks": {"Stop": []}, "other": {}}
    assert hs.remove_hooks(settings) == settings


def test_user_scope_writes_into_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = install("qwen", tmp_path / "proj", home, scope="user")
    assert result.path == str(home / ".qwen" / "settings.json")
    assert Path(result.path).exists() and result.backup is None
    assert "trusted folders" not in " ".join(result.notes)


def test_backup_holds_the_previous_text(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    original = '{\n  // mine\n  "model": "opus",\n}\n'
    path.write_text(original)
    result = install("claude", tmp_path, tmp_path)
    assert result.backup == f"{path}.bak-20260520-080000"
    assert Path(result.backup).read_text() == original
    second = install("claude", tmp_path, tmp_path, uninstall=True)
    assert second.backup == f"{path}.bak-20260520-080000-1"
    assert path.read_text() == original  # the comment and the trailing comma are back


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    result = install("claude", tmp_path, tmp_path, dry_run=True)
    assert result.changed and result.backup is None
    assert not (tmp_path / ".claude").exists()
    assert "hook --agent claude stop" in result.text


def test_invalid_json_is_a_clear_error_and_nothing_is_written(tmp_path: Path) -> None:
    path = tmp_path / ".qwen" / "settings.json"
    path.parent.mkdir()
    path.write_text('{"hooks": {"Stop": [}')
    with pytest.raises(QmemError, match=r"settings\.json: not valid JSON \(line 1"):
        install("qwen", tmp_path, tmp_path)
    assert path.read_text() == '{"hooks": {"Stop": [}'
    assert os.listdir(path.parent) == ["settings.json"]


def test_non_object_settings_are_refused(tmp_path: Path) -> None:
    path = tmp_path / ".qwen" / "settings.json"
    path.parent.mkdir()
    path.write_text("[]")
    with pytest.raises(QmemError, match="not a JSON object"):
        install("qwen", tmp_path, tmp_path)


def test_engine_switches_qwen_memory_off_and_keeps_other_memory_keys(tmp_path: Path) -> None:
    write_settings(tmp_path / ".qwen" / "settings.json", {"memory": {"enableAutoSkill": True}})
    result = install("qwen", tmp_path, tmp_path, engine=True)
    data = json.loads(Path(result.path).read_text())
    assert data["memory"] == {
        "enableAutoSkill": True,
        "enableManagedAutoMemory": False,
        "enableManagedAutoDream": False,
    }
    assert not any("companion" in note for note in result.notes)
    removed = install("qwen", tmp_path, tmp_path, uninstall=True)
    assert any("/memory" in note for note in removed.notes)


def test_companion_install_says_so(tmp_path: Path) -> None:
    result = install("qwen", tmp_path, tmp_path)
    assert any("companion mode" in note for note in result.notes)
    assert any("trusted folders" in note for note in result.notes)


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, None),
        ({"memory": {"enableManagedAutoMemory": False}}, False),
        ({"memory": {"enableManagedAutoMemory": True}}, True),
        ({"memory.enableManagedAutoMemory": False}, False),
        ({"memory": {}, "memory.enableManagedAutoMemory": True}, True),
        (
            {"memory": {"enableManagedAutoMemory": True}, "memory.enableManagedAutoMemory": False},
            True,
        ),
        ({"memory": {"enableManagedAutoMemory": "false"}}, None),
        ({"memory": "off", "memory.enableManagedAutoMemory": 0}, None),
    ],
)
def test_managed_memory_setting_reads_nested_and_flat_keys(
    settings: dict[str, Any], expected: bool | None
) -> None:
    assert hs.managed_memory_setting(settings) is expected


def test_flat_managed_memory_key_means_engine_mode_at_install(tmp_path: Path) -> None:
    """The hooks run engine mode for the flat key too (agents.detect_mode): no companion note."""
    from qmem_git.integrations.agents import detect_mode

    path = tmp_path / ".qwen" / "settings.json"
    write_settings(path, {"memory.enableManagedAutoMemory": False})
    result = install("qwen", tmp_path, tmp_path)
    assert not any("companion" in note for note in result.notes)
    assert detect_mode("qwen", {}, str(tmp_path), str(tmp_path / "home")) == "engine"
    removed = install("qwen", tmp_path, tmp_path, uninstall=True)
    assert any("/memory" in note for note in removed.notes)


def test_claude_engine_switches_auto_memory_off_and_uninstall_restores_the_bytes(
    tmp_path: Path,
) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    original = b'{ "model": "opus",\r\n  "autoMemoryEnabled": true }'
    path.write_bytes(original)
    result = install("claude", tmp_path, tmp_path, engine=True)
    assert json.loads(path.read_text())["autoMemoryEnabled"] is False
    assert any("engine mode" in note for note in result.notes)
    assert not install("claude", tmp_path, tmp_path, engine=True).changed  # twice: no change
    install("claude", tmp_path, tmp_path, uninstall=True)
    assert path.read_bytes() == original
    assert not Path(f"{path}.qmem-git-original").exists()


def test_claude_uninstall_removes_a_file_there_was_not(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.json"
    install("claude", tmp_path, tmp_path, engine=True)
    assert path.exists()
    install("claude", tmp_path, tmp_path, uninstall=True)
    assert not path.exists()


def test_claude_uninstall_keeps_a_later_change_and_the_original_switch(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text('{"autoMemoryEnabled": true}')
    install("claude", tmp_path, tmp_path, engine=True)
    changed = json.loads(path.read_text())
    path.write_text(json.dumps({**changed, "theme": "light"}))
    result = install("claude", tmp_path, tmp_path, uninstall=True)
    assert json.loads(path.read_text()) == {"autoMemoryEnabled": True, "theme": "light"}
    assert any("changed since" in note for note in result.notes)


def test_disabled_hooks_are_reported(tmp_path: Path) -> None:
    write_settings(tmp_path / ".claude" / "settings.json", {"disableAllHooks": True})
    assert any("disableAllHooks" in n for n in install("claude", tmp_path, tmp_path).notes)


def test_uninstall_without_a_file_changes_nothing(tmp_path: Path) -> None:
    result = install("claude", tmp_path, tmp_path, uninstall=True)
    assert not result.changed
    assert not (tmp_path / ".claude").exists()


HOOK = st.fixed_dictionaries(
    {"type": st.just("command"), "command": st.sampled_from(["a.sh", "echo hook", "qmem-git x"])}
)
GROUPS = st.lists(
    st.fixed_dictionaries({"hooks": st.lists(HOOK, min_size=1, max_size=2)}), min_size=1, max_size=2
)
SETTINGS = st.fixed_dictionaries(
    {},
    optional={
        "model": st.text(max_size=5),
        "hooks": st.dictionaries(
            st.sampled_from(["Stop", "UserPromptSubmit", "PreToolUse", "Notification"]),
            GROUPS,
            min_size=1,
        ),
    },
)


@given(SETTINGS, st.sampled_from(hs.AGENTS))
def test_uninstall_undoes_install(settings: dict[str, Any], agent: hs.Agent) -> None:
    before = copy.deepcopy(settings)
    installed = hs.add_hooks(settings, agent, PREFIX)
    assert settings == before  # pure
    assert hs.add_hooks(installed, agent, PREFIX) == installed
    assert hs.remove_hooks(installed) == settings


# --------------------------------------------------------------------------- JSONC


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1, // one\n "b": [1, 2,],}', {"a": 1, "b": [1, 2]}),
        (
            '/* head */ {"url": "http://x//y", "c": "/* not */"}',
            {"url": "http://x//y", "c": "/* not */"},
        ),
        ('{"q": "say \\"hi\\", // still text",}', {"q": 'say "hi", // still text'}),
        ('\ufeff{"a": [ ] }', {"a": []}),
        ('{"a": ",]"}', {"a": ",]"}),
    ],
)
def test_parse_jsonc(text: str, expected: object) -> None:
    assert hs.parse_jsonc(text, "f.json") == expected


def test_free_backup_name_skips_taken_names() -> None:
    taken = {"s.json.bak-20260520-080000", "s.json.bak-20260520-080000-1"}
    assert hs.free_backup_name("s.json", NOW, taken.__contains__) == "s.json.bak-20260520-080000-2"


# --------------------------------------------------------------------------- files: modes, links


def test_a_private_settings_file_and_its_backup_stay_private(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.json"
    write_settings(path, {"env": {"ANTHROPIC_API_KEY": "sk-private"}})
    path.chmod(0o600)
    result = install("claude", tmp_path, tmp_path)
    assert result.backup is not None
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(os.stat(result.backup).st_mode) == 0o600
    install("claude", tmp_path, tmp_path, uninstall=True)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_new_settings_file_is_0644(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        result = install("claude", tmp_path, tmp_path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(result.path).st_mode) == 0o644


def test_a_symlinked_settings_file_is_written_through(tmp_path: Path) -> None:
    """A dotfiles checkout: the link stays a link, its target gets our hooks."""
    dotfiles = tmp_path / "dotfiles" / "claude-settings.json"
    write_settings(dotfiles, {"model": "opus"})
    dotfiles.chmod(0o600)
    link = tmp_path / ".claude" / "settings.json"
    link.parent.mkdir()
    link.symlink_to(dotfiles)
    result = install("claude", tmp_path, tmp_path)
    assert link.is_symlink() and os.readlink(link) == str(dotfiles)
    data = json.loads(dotfiles.read_text())
    assert data["model"] == "opus" and "Stop" in data["hooks"]
    assert stat.S_IMODE(dotfiles.stat().st_mode) == 0o600
    assert result.backup is not None and Path(result.backup).parent == link.parent
    assert json.loads(Path(result.backup).read_text()) == {"model": "opus"}
    assert any("symlink" in note and str(dotfiles) in note for note in result.notes)
    assert sorted(os.listdir(dotfiles.parent)) == ["claude-settings.json"]  # no stray files


def test_a_dangling_settings_symlink_is_refused(tmp_path: Path) -> None:
    link = tmp_path / ".claude" / "settings.json"
    link.parent.mkdir()
    link.symlink_to(tmp_path / "missing" / "settings.json")
    with pytest.raises(QmemError, match=r"is a symlink to .*which is not a file"):
        install("claude", tmp_path, tmp_path)
    assert link.is_symlink() and not (tmp_path / "missing").exists()


def test_the_backup_is_byte_identical(tmp_path: Path) -> None:
    path = tmp_path / ".qwen" / "settings.json"
    path.parent.mkdir()
    original = b'\xef\xbb\xbf{\r\n  "ui": {"theme": "caf\xc3\xa9"}\r\n}\r\n'
    path.write_bytes(original)
    result = install("qwen", tmp_path, tmp_path)
    assert result.backup is not None and Path(result.backup).read_bytes() == original
    assert json.loads(path.read_text("utf-8"))["ui"] == {"theme": "café"}


def test_dropped_comments_are_announced(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text('{\n  /* mine */ "model": "opus", // keep\n}\n')
    result = install("claude", tmp_path, tmp_path, dry_run=True)
    assert any("comments in settings.json are not kept" in note for note in result.notes)
    path.write_text('{"model": "opus", "url": "http://x//y",}\n')  # no comment, just a comma
    result = install("claude", tmp_path, tmp_path, dry_run=True)
    assert not any("comments" in note for note in result.notes)


@pytest.mark.parametrize("value", ['"x"', "{}", "null", "3"])
def test_an_event_that_is_not_a_list_is_refused(tmp_path: Path, value: str) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    text = '{"hooks": {"Stop": ' + value + ', "Other": "kept"}}'
    path.write_text(text)
    with pytest.raises(QmemError, match=r"settings\.json: its hooks\.Stop value is not a list"):
        install("claude", tmp_path, tmp_path)
    assert path.read_text() == text
    assert os.listdir(path.parent) == ["settings.json"]


def test_a_settings_file_that_is_not_utf8_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / ".qwen" / "settings.json"
    path.parent.mkdir()
    path.write_bytes(b'{"ui":{"theme":"caf\xe9"}}')
    with pytest.raises(QmemError, match=r"not UTF-8 text \(byte 0xe9 at offset 19\)") as info:
        install("qwen", tmp_path, tmp_path)
    assert "UTF-8" in info.value.hint
    assert os.listdir(path.parent) == ["settings.json"]


def test_install_hooks_cli_reports_a_non_utf8_file_in_one_line(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / ".qwen").mkdir(parents=True)
    (project / ".qwen" / "settings.json").write_bytes(b'{"ui":{"theme":"caf\xe9"}}')
    done = subprocess.run(
        [sys.executable, "-m", "qmem_git", "--project", str(project), "install-hooks",
         "--agent", "qwen", "--scope", "project"],
        capture_output=True,
        text=True,
        env={**os.environ},
        timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), done.stderr
    assert "not UTF-8 text" in lines[0] and "hint:" in lines[0]
    assert "internal error" not in lines[0]


def test_deeply_nested_settings_are_refused_not_crashed_on(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(QmemError, match="nested too deeply"):
        install("claude", tmp_path, tmp_path)


@pytest.mark.parametrize("kind", ["fifo", "zero", "long-number"])
def test_a_settings_file_that_never_ends_or_cannot_convert_is_refused(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / ".qwen" / "settings.json"
    path.parent.mkdir()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    else:
        path.write_text('{"a": ' + "9" * 5000 + "}")
    problem = "not valid JSON" if kind == "long-number" else "cannot read (not a regular file)"
    with pytest.raises(QmemError, match=re.escape(problem)):
        hs.read_settings(str(path))


def test_the_backup_of_a_symlinked_private_file_is_private(tmp_path: Path) -> None:
    """The backup goes beside the link but takes the mode of the file the link points to."""
    dotfiles = tmp_path / "dotfiles" / "claude-settings.json"
    write_settings(dotfiles, {"env": {"ANTHROPIC_API_KEY": "sk-private"}})
    dotfiles.chmod(0o600)
    link = tmp_path / ".claude" / "settings.json"
    link.parent.mkdir()
    link.symlink_to(dotfiles)
    result = install("claude", tmp_path, tmp_path)
    assert result.backup is not None and Path(result.backup).parent == link.parent
    assert stat.S_IMODE(os.lstat(result.backup).st_mode) == 0o600
    assert stat.S_IMODE(dotfiles.stat().st_mode) == 0o600


@pytest.mark.parametrize("agent", ["qwen", "claude"])
def test_the_shipped_snippets_are_what_install_writes(agent: hs.Agent) -> None:
    shipped = Path(__file__).resolve().parents[2] / "hooks" / f"{agent}-settings.json"
    assert json.loads(shipped.read_text()) == hs.render_hooks(agent)
