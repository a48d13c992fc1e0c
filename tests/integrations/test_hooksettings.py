"""install-hooks: rendering per agent, marker-based merge/unmerge, backups, dry runs, JSONC."""

from __future__ import annotations

import copy
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qmem_git.errors import QmemError, UsageError
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
    assert stop["async"] is True and stop["timeout"] == 300
    assert hooks["PreCompact"][0]["hooks"][0]["async"] is True
    assert "async" not in hooks["SessionEnd"][0]["hooks"][0]
    assert all("name" not in group["hooks"][0] for groups in hooks.values() for group in groups)


def test_qwen_snippet_uses_milliseconds_and_a_name() -> None:
    hooks = hs.render_hooks("qwen")["hooks"]
    timeouts = {event: groups[0]["hooks"][0]["timeout"] for event, groups in hooks.items()}
    assert timeouts == {
        "SessionStart": 20000,
        "UserPromptSubmit": 10000,
        "Stop": 300000,
        "PreCompact": 60000,
        "SessionEnd": 5000,
    }
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
    assert json.loads(path.read_text()) == {"model": "opus"}


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


def test_engine_is_for_qwen_only(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        install("claude", tmp_path, tmp_path, engine=True)


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
