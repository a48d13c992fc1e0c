"""Where a project's memory lives (spec §2, checklist 1-6). Pure: the disk is a set of paths."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

import pytest

from qmem_git.core.paths import (
    Layout,
    base_dir,
    chats_dir,
    expand_dir,
    expand_storage_dir,
    explicit_layout,
    find_git_root,
    git_dir_of,
    global_qwen_dir,
    is_inside,
    is_legacy_repo,
    legacy_git_dir,
    refuse_team_write,
    repository_of,
    resolve_layout,
    runtime_base_dir,
    sanitize,
    team_memory_root,
    tier_layout,
    user_memory_root,
    worktree_of,
)
from qmem_git.errors import QmemError, UsageError

HOME = "/home/alice"
CWD = "/work/cwd"


def probe(*existing: str) -> Callable[[str], bool]:
    """An ``exists`` probe for a fake disk holding exactly these paths; records every call."""
    present = set(existing)

    def exists(path: str) -> bool:
        calls.append(path)
        return path in present

    calls: list[str] = []
    exists.calls = calls  # type: ignore[attr-defined]
    return exists


def layout(
    project: str, env: Mapping[str, str] | None = None, *existing: str, cwd: str = CWD
) -> Layout:
    return resolve_layout(project, env or {}, HOME, cwd, probe(*existing))


# --- sanitisation (§2.2 table) ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "windows", "expected"),
    [
        ("/home/alice/proj", False, "-home-alice-proj"),
        ("/home/alice/my_repo.v2", False, "-home-alice-my-repo-v2"),
        ("/home/alice/.dotfiles/x y", False, "-home-alice--dotfiles-x-y"),
        ("C:\\Users\\Bob\\Repo", True, "c--users-bob-repo"),
        ("/Home/Alice/Proj", False, "-Home-Alice-Proj"),  # no lowercasing off Windows
        ("/tmp/a--b", False, "-tmp-a--b"),  # no collapsing
        ("/x/", False, "-x-"),  # no trimming
        ("/données/é", False, "-donn-es--"),  # non-ASCII letters replaced one for one
        ("/日本/プロ", False, "------"),
        ("", False, ""),
    ],
)
def test_sanitize_table(path: str, windows: bool, expected: str) -> None:
    assert sanitize(path, windows=windows) == expected
    assert len(sanitize(path, windows=windows)) == len(path)  # one for one, no length limit


def _js_sanitize(path: str) -> str:
    """Model of the host: one ``-`` per UTF-16 code unit that is not ASCII alphanumeric."""
    raw = path.encode("utf-16-le")
    units = [int.from_bytes(raw[i : i + 2], "little") for i in range(0, len(raw), 2)]
    return "".join(chr(u) if chr(u).isascii() and chr(u).isalnum() else "-" for u in units)


@pytest.mark.parametrize("path", ["/a/\U0001f600b", "/home/é/日本/x_y", "/𝔘𝔫𝔦/ok"])
def test_sanitize_counts_utf16_units_like_the_host(path: str) -> None:
    assert sanitize(path) == _js_sanitize(path)
    assert sanitize("/a/\U0001f600b") == "-a---b"


def test_sanitize_keeps_long_paths_whole() -> None:
    path = "/" + "a" * 500
    assert sanitize(path) == "-" + "a" * 500


# --- checklist 1-6 ---------------------------------------------------------------------------


def test_01_git_root_without_env() -> None:
    result = layout("/home/alice/my_repo.v2", None, "/home/alice/my_repo.v2/.git")
    assert result.memory_root == "/home/alice/.qwen/projects/-home-alice-my-repo-v2/memory"
    assert result.state_dir == "/home/alice/.qwen/projects/-home-alice-my-repo-v2"
    assert result.mode == "global"
    assert result.state_file("meta.json") == (
        "/home/alice/.qwen/projects/-home-alice-my-repo-v2/meta.json"
    )


def test_02_nested_project_maps_to_git_root() -> None:
    nested = layout("/home/alice/repo/ws/agent", None, "/home/alice/repo/.git")
    top = layout("/home/alice/repo", None, "/home/alice/repo/.git")
    assert nested.memory_root == top.memory_root
    assert nested.memory_root == "/home/alice/.qwen/projects/-home-alice-repo/memory"
    assert nested.project_root == "/home/alice/repo/ws/agent"


def test_03_no_git_anywhere_uses_project_dir() -> None:
    exists = probe()
    result = resolve_layout("/srv/data/notes", {}, HOME, CWD, exists)
    assert result.memory_root == "/home/alice/.qwen/projects/-srv-data-notes/memory"
    # it walked every ancestor up to the filesystem root
    assert exists.calls == [  # type: ignore[attr-defined]
        "/srv/data/notes/.git",
        "/srv/data/.git",
        "/srv/.git",
        "/.git",
    ]


def test_04_worktree_git_file_is_its_own_root() -> None:
    # The probe does not distinguish files from dirs: a `.git` *file* counts like a dir.
    result = layout(
        "/home/alice/wt/feature/src", None, "/home/alice/wt/feature/.git", "/home/alice/.git"
    )
    assert result.memory_root == "/home/alice/.qwen/projects/-home-alice-wt-feature/memory"


def test_05_base_dir_override_absolute_and_relative() -> None:
    absolute = layout("/p", {"QWEN_CODE_MEMORY_BASE_DIR": "/b"}, "/p/.git")
    assert absolute.memory_root == "/b/projects/-p/memory"
    relative = layout("/p", {"QWEN_CODE_MEMORY_BASE_DIR": "rel/base"}, "/p/.git", cwd="/cwd")
    assert relative.memory_root == "/cwd/rel/base/projects/-p/memory"


def test_06_local_mode() -> None:
    exists = probe("/home/alice/repo/.git")
    result = resolve_layout(
        "/home/alice/repo/ws", {"QWEN_CODE_MEMORY_LOCAL": "1"}, HOME, CWD, exists
    )
    assert result.mode == "local"
    assert (
        result.memory_root == "/home/alice/repo/ws/.qwen/memory"
    )  # project as given, no git search
    assert result.state_file("meta.json") == "/home/alice/repo/ws/.qwen/meta.json"
    assert result.state_file("consolidation.lock") == "/home/alice/repo/ws/.qwen/consolidation.lock"
    assert exists.calls == []  # type: ignore[attr-defined]


@pytest.mark.parametrize("value", ["0", "true", "yes", " 1", "1 ", ""])
def test_local_mode_only_for_exactly_one(value: str) -> None:
    result = layout("/p", {"QWEN_CODE_MEMORY_LOCAL": value}, "/p/.git")
    assert result.mode == "global"
    assert result.memory_root == "/home/alice/.qwen/projects/-p/memory"


# --- base dir ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("~", "/home/alice"),
        ("~/mem", "/home/alice/mem"),
        ("~other/x", "/work/cwd/~other/x"),  # only `~` and `~/` are expanded
        ("rel", "/work/cwd/rel"),
        ("./a/../b", "/work/cwd/b"),
        ("/abs//x/", "/abs/x"),
    ],
)
def test_expand_dir(value: str, expected: str) -> None:
    assert expand_dir(value, HOME, CWD) == expected


def test_base_dir_precedence() -> None:
    both = {"QWEN_CODE_MEMORY_BASE_DIR": "~/m", "QWEN_RUNTIME_DIR": "/rt"}
    assert base_dir(both, HOME, CWD) == "/home/alice/m"
    assert base_dir({"QWEN_RUNTIME_DIR": "/rt"}, HOME, CWD) == "/rt"
    assert base_dir({"QWEN_RUNTIME_DIR": "~/rt"}, HOME, CWD) == "/home/alice/rt"
    assert base_dir({"QWEN_RUNTIME_DIR": "rt"}, HOME, CWD) == "/work/cwd/rt"
    assert base_dir({"QWEN_CODE_MEMORY_BASE_DIR": "", "QWEN_RUNTIME_DIR": ""}, HOME, CWD) == (
        "/home/alice/.qwen"
    )
    assert base_dir({}, HOME, CWD) == "/home/alice/.qwen"


def test_runtime_dir_moves_memory_root() -> None:
    result = layout("/p", {"QWEN_RUNTIME_DIR": "/rt"}, "/p/.git")
    assert result.memory_root == "/rt/projects/-p/memory"


def test_relative_and_tilde_project_roots_are_resolved() -> None:
    rel = layout("proj/sub", None, "/work/cwd/proj/.git")
    assert rel.memory_root == "/home/alice/.qwen/projects/-work-cwd-proj/memory"
    tilde = layout("~/code/x/", None, "/home/alice/code/x/.git")
    assert tilde.memory_root == "/home/alice/.qwen/projects/-home-alice-code-x/memory"


def test_find_git_root_normalises_without_resolving_symlinks() -> None:
    assert find_git_root("/a/b/../c/./d/", probe("/a/c/.git")) == "/a/c"
    assert find_git_root("/a/b/", probe()) == "/a/b"
    assert find_git_root("/", probe("/.git")) == "/"


@pytest.mark.parametrize("memory_dir", ["/", "/home", "~", "~/", "~/..", "/work/../"])
def test_explicit_layout_refuses_the_root_home_and_folders_above_home(memory_dir: str) -> None:
    """Writers take every *.md under the memory root for a memory: never the whole disk."""
    with pytest.raises(UsageError, match="is not a memory folder") as caught:
        explicit_layout(memory_dir, "/home/ana", CWD)
    assert caught.value.exit_code == 2 and "folder of its own" in caught.value.hint


def test_explicit_layout() -> None:
    result = explicit_layout("~/mem/memory", HOME, CWD)
    assert result == Layout("/home/alice/mem/memory", "/home/alice/mem", "explicit", "")
    assert explicit_layout("m", HOME, CWD).state_dir == "/work/cwd"


def test_chats_dir_uses_project_as_given_and_runtime_dir() -> None:
    assert chats_dir("/home/alice/repo/ws", {}, HOME, CWD) == (
        "/home/alice/.qwen/projects/-home-alice-repo-ws/chats"
    )
    env = {"QWEN_RUNTIME_DIR": "/rt", "QWEN_CODE_MEMORY_BASE_DIR": "/mem"}
    assert chats_dir("/p", env, HOME, CWD) == "/rt/projects/-p/chats"


# --- is_inside (§2.3) --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "inside"),
    [
        ("/m", True),
        ("/m/", True),
        ("/m/user/a.md", True),
        ("/m/user/../a.md", True),
        ("/m/./x", True),
        ("/m/../m/x", True),
        ("/m/..", False),
        ("/m/../other", False),
        ("/mx/a.md", False),
        ("/", False),
        ("/other/m/a.md", False),
    ],
)
def test_is_inside(target: str, inside: bool) -> None:
    assert is_inside("/m", target) is inside


@pytest.mark.parametrize(
    ("root", "target", "inside"),
    [
        ("/m/", "/m/a.md", True),
        ("/m/./", "/m", True),
        ("/a/../m", "/m/x", True),
        ("/", "/anything", True),
        ("/", "/", True),
        ("/m/", "/mx", False),
    ],
)
def test_is_inside_normalises_the_root_too(root: str, target: str, inside: bool) -> None:
    assert is_inside(root, target) is inside


def test_is_inside_never_consults_the_working_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pure string work: the old relpath version called os.getcwd() for relative paths."""

    def no_cwd() -> str:
        raise AssertionError("is_inside read the working directory")

    monkeypatch.setattr(os, "getcwd", no_cwd)
    assert is_inside("/m", "/m/a.md")
    assert is_inside("m", "m/a.md") and not is_inside("m", "n/a.md")


def test_inside_a_memory_folder_that_folder_is_the_memory_root() -> None:
    root = "/home/alice/.qwen/projects/-home-alice-repo/memory"
    for exists in (
        probe(f"{root}.git", f"{root}.git/qmem-index", "/home/alice/.git"),
        probe(f"{root}/.git", f"{root}/.git/qmem.lock", "/home/alice/.git"),  # a legacy store
    ):
        inside = resolve_layout(f"{root}/user", {}, HOME, CWD, exists)
        assert (inside.memory_root, inside.state_dir, inside.mode) == (
            root,
            "/home/alice/.qwen/projects/-home-alice-repo",
            "explicit",
        )
        local = resolve_layout(f"{root}/user", {"QWEN_CODE_MEMORY_LOCAL": "1"}, HOME, CWD, exists)
        assert local.memory_root == root
    # a folder named memory that is not ours is a project like any other
    other = resolve_layout("/srv/memory", {}, HOME, CWD, probe("/srv/memory/.git"))
    assert other.memory_root == "/home/alice/.qwen/projects/-srv-memory/memory"
    plain = resolve_layout("/srv/memory", {}, HOME, CWD, probe("/srv/memory.git"))
    assert plain.memory_root == "/home/alice/.qwen/projects/-srv-memory/memory"


def test_the_repository_lives_beside_the_memory_folder() -> None:
    """Never inside it: the agent may write anything there (issue 18, item 7)."""
    assert git_dir_of("/s/memory") == "/s/memory.git" == git_dir_of("/s/memory/")
    assert git_dir_of("/s/./x/../memory") == "/s/memory.git"
    assert Layout("/s/memory", "/s", "explicit").git_dir == "/s/memory.git"
    assert worktree_of("/s/memory.git") == "/s/memory" == worktree_of("/s/memory/.git")
    assert legacy_git_dir("/s/memory") == "/s/memory/.git"


def test_readers_find_the_new_repository_first_then_a_legacy_one_qmem_git_made() -> None:
    root = "/s/memory"
    assert repository_of(root, probe()) == "/s/memory.git"  # none yet: where init makes it
    legacy = probe("/s/memory/.git", "/s/memory/.git/qmem-index")
    assert is_legacy_repo(root, legacy) and repository_of(root, legacy) == "/s/memory/.git"
    both = probe("/s/memory.git", "/s/memory/.git", "/s/memory/.git/qmem.lock")
    assert repository_of(root, both) == "/s/memory.git"  # the new one wins
    agents = probe("/s/memory/.git", "/s/memory/.git/config", "/s/memory/.git/hooks/pre-commit")
    assert not is_legacy_repo(root, agents) and repository_of(root, agents) == "/s/memory.git"


# --- Qwen Code 0.24.4's precedence (issue 18, item 5) ------------------------------------------


def test_qwen_home_moves_the_global_dir_and_the_memory_base() -> None:
    assert layout("/p", {"QWEN_HOME": "/qh"}).memory_root == "/qh/projects/-p/memory"
    assert layout("/p", {"QWEN_HOME": "rel"}).memory_root == f"{CWD}/rel/projects/-p/memory"
    assert global_qwen_dir({"QWEN_HOME": "~/q"}, HOME, CWD) == f"{HOME}/q"


def test_runtime_dir_beats_settings_which_beat_qwen_home() -> None:
    env = {"QWEN_HOME": "/qh"}
    assert runtime_base_dir(env, HOME, CWD, "/out", "/p") == "/out"
    assert runtime_base_dir(env, HOME, CWD, "out", "/p") == "/p/out"  # from the project
    assert runtime_base_dir(env, HOME, CWD, "", "/p") == "/qh"
    env["QWEN_RUNTIME_DIR"] = "/rt"
    assert runtime_base_dir(env, HOME, CWD, "/out", "/p") == "/rt"
    got = resolve_layout("/p", env, HOME, CWD, probe(), "/out")
    assert got.memory_root == "/rt/projects/-p/memory"
    env["QWEN_CODE_MEMORY_BASE_DIR"] = "/mb"
    assert resolve_layout("/p", env, HOME, CWD, probe(), "/out").memory_root == (
        "/mb/projects/-p/memory"
    )


def test_workspace_scope_keys_the_project_folder_not_its_git_root() -> None:
    env = {"QWEN_CODE_MEMORY_PROJECT_SCOPE": " Workspace "}
    got = layout("/repo/sub", env, "/repo/.git")
    assert got.memory_root == f"{HOME}/.qwen/projects/-repo-sub/memory"
    got = layout("/repo/sub", {"QWEN_CODE_MEMORY_PROJECT_SCOPE": "bogus"}, "/repo/.git")
    assert got.memory_root == f"{HOME}/.qwen/projects/-repo/memory"


def test_storage_paths_split_on_backslashes_after_the_tilde() -> None:
    assert expand_storage_dir("~\\a\\b", HOME, CWD) == f"{HOME}/a/b"
    assert expand_storage_dir("~/a\\b", HOME, CWD) == f"{HOME}/a/b"
    assert expand_dir("~/a\\b", HOME, CWD) == f"{HOME}/a\\b"  # QWEN_CODE_MEMORY_BASE_DIR
    assert expand_dir("//srv/x", HOME, CWD) == "/srv/x"  # as Node's path.resolve


def test_user_and_team_roots() -> None:
    assert user_memory_root({}, HOME, CWD) == f"{HOME}/.qwen/memories"
    assert user_memory_root({"QWEN_CODE_MEMORY_BASE_DIR": "/mb"}, HOME, CWD) == "/mb/memories"
    assert user_memory_root({}, HOME, CWD, "/out", "/p") == "/out/memories"
    exists = probe("/repo/.git")
    assert team_memory_root("/repo/a/b", HOME, CWD, exists) == "/repo/.qwen/team-memory"
    assert team_memory_root("/x", HOME, CWD, probe()) == "/x/.qwen/team-memory"


def test_tier_layouts_name_each_of_qwens_tiers() -> None:
    exists = probe("/repo/.git")
    project = tier_layout("project", "/repo/a", None, {}, HOME, CWD, exists)
    assert project == resolve_layout("/repo/a", {}, HOME, CWD, exists)
    assert project.tier == "project"
    user = tier_layout("user", "/repo/a", None, {}, HOME, CWD, exists)
    assert (user.memory_root, user.state_dir) == (
        f"{HOME}/.qwen/memories",
        f"{HOME}/.qwen/memories.qmem",
    )
    assert user.git_dir == f"{HOME}/.qwen/memories.git"  # beside the folder, not in ~/.qwen/*.json
    assert user.tier == "user" and user.project_root == "/repo/a"
    env = {"QWEN_CODE_MEMORY_BASE_DIR": "/mb"}
    assert tier_layout("user", None, None, env, HOME, CWD, exists).state_dir == "/mb/memories.qmem"
    team = tier_layout("team", "/repo/a", None, {}, HOME, CWD, exists)
    assert team.memory_root == "/repo/.qwen/team-memory"
    assert team.git_dir == "/repo/.git"  # the project's own repository, never a nested one
    assert team.state_dir == project.state_dir and team.tier == "team"


@pytest.mark.parametrize("tier", ["user", "team"])
def test_a_tier_and_a_memory_dir_are_one_choice_too_many(tier: str) -> None:
    with pytest.raises(UsageError, match="--memory-dir or --tier"):
        tier_layout(tier, None, "/m/memory", {}, HOME, CWD, probe())
    with pytest.raises(UsageError, match="not a tier"):
        tier_layout("shared", None, None, {}, HOME, CWD, probe())


def test_only_readers_run_on_the_team_tier() -> None:
    team = tier_layout("team", "/repo", None, {}, HOME, CWD, probe("/repo/.git"))
    for command in ("validate", "index", "recall", "log", "diff", "history", "where"):
        refuse_team_write(team, command)
    with pytest.raises(QmemError, match=r"project's own git repository \(/repo\)") as caught:
        refuse_team_write(team, "remember")
    assert caught.value.exit_code == 1 and "git -C /repo commit" in caught.value.hint
    refuse_team_write(tier_layout("user", "/repo", None, {}, HOME, CWD, probe()), "remember")
