"""Qwen Code's settings files: which one sets ``advanced.runtimeOutputDir`` (issue 18, item 5)."""

from __future__ import annotations

import json
from pathlib import Path

from qmem_git.core.paths import sanitize
from qmem_git.store.qwensettings import qwen_layout, runtime_output_dir, strip_json_comments


def _write(path: Path, value: object, comment: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(comment + json.dumps({"advanced": {"runtimeOutputDir": value}}), "utf-8")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"QWEN_CODE_SYSTEM_SETTINGS_PATH": str(tmp_path / "etc" / "settings.json")} | extra


def test_precedence_system_workspace_user_defaults(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "proj"
    home.mkdir()
    project.mkdir()
    env = _env(tmp_path)
    assert runtime_output_dir(env, str(home), str(project), str(project)) is None
    _write(tmp_path / "etc" / "system-defaults.json", "/defaults")
    assert runtime_output_dir(env, str(home), str(project), str(project)) == "/defaults"
    _write(home / ".qwen" / "settings.json", "/user", comment="// mine\n/* yes */")
    assert runtime_output_dir(env, str(home), str(project), str(project)) == "/user"
    _write(project / ".qwen" / "settings.json", "/workspace")
    assert runtime_output_dir(env, str(home), str(project), str(project)) == "/workspace"
    _write(tmp_path / "etc" / "settings.json", "")  # present and empty: no dir at all
    assert runtime_output_dir(env, str(home), str(project), str(project)) is None


def test_the_home_folder_is_no_workspace_and_qwen_home_moves_the_user_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _write(home / ".qwen" / "settings.json", "/user")
    assert runtime_output_dir(_env(tmp_path), str(home), str(home), str(home)) == "/user"
    _write(tmp_path / "qh" / "settings.json", "$OUT/x")
    env = _env(tmp_path, QWEN_HOME=str(tmp_path / "qh"), OUT="/o")
    assert runtime_output_dir(env, str(home), str(home), str(home)) == "/o/x"
    layout = qwen_layout(None, None, env, str(home), str(tmp_path))
    assert layout.memory_root == f"/o/x/projects/{sanitize(str(tmp_path))}/memory"


def test_env_overrides_skip_the_settings(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _write(home / ".qwen" / "settings.json", "/user")
    env = _env(tmp_path, QWEN_RUNTIME_DIR=str(tmp_path / "rt"))
    layout = qwen_layout(str(tmp_path), None, env, str(home), str(tmp_path))
    assert layout.memory_root.startswith(str(tmp_path / "rt" / "projects"))


def test_strip_json_comments_keeps_strings() -> None:
    text = '{"a": "//not a comment", /* c */ "b": "/*x*/" // tail\n}'
    assert json.loads(strip_json_comments(text)) == {"a": "//not a comment", "b": "/*x*/"}
