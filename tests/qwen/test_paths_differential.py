"""qmem-git's memory folders against Qwen Code 0.24.4's ``getAutoMemoryRoot``,
``getUserAutoMemoryRoot`` and ``getTeamAutoMemoryRoot``, case by case.

Each case is a fresh folder tree (home, projects, settings files) and an environment; Qwen's side
loads its settings as its CLI does at start (``loadSettings`` then ``setRuntimeBaseDir``) in
the project folder, and qmem-git's side runs ``build_settings`` (the CLI) and ``qwen_layout``
(the hooks) with the same environment and folder.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from qmem_git.core.paths import team_memory_root, user_memory_root
from qmem_git.settings import build_settings
from qmem_git.store.qwensettings import qwen_layout, runtime_output_dir
from qwen.conftest import Bridge

# project folders, made inside the case folder: (project relative path, marker to create)
PROJECTS: list[tuple[str, str]] = [
    ("plain", ""),
    ("repo", "repo/.git/"),
    ("repo/sub/deeper", "repo/.git/"),
    ("wt/inner", "wt/.git"),  # a linked worktree: .git is a file
    ("repo/Ünïcödé 日本 😀 x.y", "repo/.git/"),
]

ENVS: list[dict[str, str]] = [
    {},
    {"QWEN_HOME": "{case}/qhome"},
    {"QWEN_HOME": "rel-qhome"},
    {"QWEN_HOME": "~/qh"},
    {"QWEN_RUNTIME_DIR": "{case}/runtime"},
    {"QWEN_RUNTIME_DIR": "~\\rt\\x"},
    {"QWEN_RUNTIME_DIR": "../rel-rt", "QWEN_HOME": "{case}/qhome"},
    {"QWEN_CODE_MEMORY_BASE_DIR": "{case}/membase"},
    {"QWEN_CODE_MEMORY_BASE_DIR": "~/mb/", "QWEN_RUNTIME_DIR": "{case}/runtime"},
    {"QWEN_CODE_MEMORY_BASE_DIR": "rel//mb/../mb2"},
    {"QWEN_CODE_MEMORY_LOCAL": "1", "QWEN_CODE_MEMORY_BASE_DIR": "{case}/membase"},
    {"QWEN_CODE_MEMORY_LOCAL": "true"},
    {"QWEN_CODE_MEMORY_PROJECT_SCOPE": "workspace"},
    {"QWEN_CODE_MEMORY_PROJECT_SCOPE": " WorkSpace ", "QWEN_HOME": "{case}/qhome"},
    {"QWEN_CODE_MEMORY_PROJECT_SCOPE": "git-root"},
    {"QWEN_CODE_MEMORY_PROJECT_SCOPE": "bogus"},
]

# settings files: (where, advanced.runtimeOutputDir or None for a file without it)
SETTINGS: list[list[tuple[str, Any]]] = [
    [],
    [("user", "{case}/out-user")],
    [("user", ".qwen-out")],
    [("user", "~/out")],
    [("project", "{case}/out-project"), ("user", "{case}/out-user")],
    [("project", ""), ("user", "{case}/out-user")],
    [("project", "$OUTBASE/x"), ("defaults", "{case}/out-defaults")],
    [("system", "{case}/out-system"), ("project", "{case}/out-project")],
    [("defaults", "${OUTBASE}/d"), ("user", None)],
]


def _settings_path(where: str, case: Path, home: Path, project: Path, env: dict[str, str]) -> Path:
    if where == "system":
        return case / "etc" / "settings.json"
    if where == "defaults":
        return case / "etc" / "system-defaults.json"
    if where == "project":
        return project / ".qwen" / "settings.json"
    qwen_home = env.get("QWEN_HOME", "")
    if not qwen_home:
        return home / ".qwen" / "settings.json"
    if qwen_home.startswith("~/"):
        return home / qwen_home[2:] / "settings.json"
    return (project / qwen_home / "settings.json").resolve()


def _write_settings(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    advanced: dict[str, Any] = {"bugCommand": {}} if value is None else {"runtimeOutputDir": value}
    text = json.dumps({"advanced": advanced, "ui": {"theme": "Default"}}, indent=2)
    path.write_text("// written by the differential test\n" + text + "\n", "utf-8")


def _make_case(
    root: Path, index: int, project_spec: tuple[str, str], env_spec: dict[str, str], settings: Any
) -> dict[str, Any]:
    case = root / f"c{index}"
    home = case / "home"
    home.mkdir(parents=True)
    relative, marker = project_spec
    if marker.endswith("/"):
        (case / marker).mkdir(parents=True)
    elif marker:
        (case / marker).parent.mkdir(parents=True)
        (case / marker).write_text("gitdir: /elsewhere/.git/worktrees/wt\n")
    project = case / relative
    project.mkdir(parents=True, exist_ok=True)
    env = {key: value.replace("{case}", str(case)) for key, value in env_spec.items()}
    env |= {"HOME": str(home), "OUTBASE": str(case / "outbase")}
    env["QWEN_CODE_SYSTEM_SETTINGS_PATH"] = str(case / "etc" / "settings.json")
    for where, value in settings:
        concrete = value.replace("{case}", str(case)) if isinstance(value, str) else value
        _write_settings(_settings_path(where, case, home, project, env), concrete)
    return {"home": str(home), "project": str(project), "env": env}


def _ours(case: dict[str, Any]) -> dict[str, str]:
    env, home, project = case["env"], case["home"], case["project"]
    settings = build_settings(env, cwd=project, home=home, with_model=False)
    hook_layout = qwen_layout(None, None, env, home, project)
    assert hook_layout.memory_root == settings.layout.memory_root
    output_dir = runtime_output_dir(env, home, project, project)
    user = user_memory_root(env, home, project, output_dir, project)
    team = team_memory_root(project, home, project, os.path.lexists)
    for tier, root in (("user", user), ("team", team)):  # --tier, in the CLI and the hooks
        chosen = build_settings(env, cwd=project, home=home, with_model=False, tier=tier)
        assert chosen.layout.memory_root == root
        assert qwen_layout(None, None, env, home, project, tier).memory_root == root
    return {"auto": settings.layout.memory_root, "user": user, "team": team}


def _theirs(qwen: Bridge, cases: list[dict[str, Any]]) -> list[dict[str, str]]:
    calls = [
        {"op": "paths", "env": c["env"], "cwd": c["project"], "project": c["project"]}
        | {"settings": True}
        for c in cases
    ]
    return qwen(calls)


def _compare(
    qwen: Bridge, cases: list[dict[str, Any]], ours: Callable[[dict[str, Any]], dict[str, str]]
) -> list[str]:
    problems = []
    for case, theirs in zip(cases, _theirs(qwen, cases), strict=True):
        assert "error" not in theirs, theirs
        mine = ours(case)
        for key in ("auto", "user", "team"):
            if mine[key] != theirs[key]:
                problems.append(f"{key}: ours {mine[key]!r} != qwen {theirs[key]!r} in {case}")
    return problems


def test_memory_roots_equal_qwens(qwen: Bridge, tmp_path: Path) -> None:
    combos = list(itertools.product(PROJECTS, ENVS, SETTINGS))
    cases = [_make_case(tmp_path, i, *combo) for i, combo in enumerate(combos)]
    problems = _compare(qwen, cases, _ours)
    assert not problems, "\n".join(problems[:20])
    assert len(cases) == 720  # 720 cases x 3 roots compared


def test_settings_only_move_the_folder_when_qwen_reads_them(qwen: Bridge, tmp_path: Path) -> None:
    """A project settings file in the home folder is not a workspace file, a broken workspace
    file is skipped (Qwen resets it), and the workspace is the folder, not the git root.

    (A non-string ``runtimeOutputDir`` stops Qwen 0.24.4 with a TypeError; qmem-git ignores it.)
    """
    cases = []
    home_case = _make_case(tmp_path, 0, ("plain", ""), {}, [("user", "{case}/out-user")])
    _write_settings(Path(home_case["home"]) / ".qwen" / "settings.json", "/from-user-file")
    home_case["project"] = home_case["home"]
    cases.append(home_case)
    sub = _make_case(tmp_path, 1, ("repo/sub", "repo/.git/"), {}, [("user", "{case}/u")])
    _write_settings(Path(sub["project"]).parent / ".qwen" / "settings.json", "/at-git-root")
    cases.append(sub)
    odd = _make_case(tmp_path, 2, ("plain", ""), {}, [("user", "{case}/u")])
    project_file = Path(odd["project"]) / ".qwen" / "settings.json"
    project_file.parent.mkdir(parents=True)
    project_file.write_text('{"advanced": {"runtimeOutputDir": "/broken",}')
    cases.append(odd)
    problems = _compare(qwen, cases, _ours)
    assert not problems, "\n".join(problems)
    assert _ours(cases[1])["auto"].startswith(str(tmp_path / "c1" / "u"))
