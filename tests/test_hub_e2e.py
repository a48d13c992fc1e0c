"""The hub (one remote for every store), end to end with real processes and C git.

Each "machine" has its own HOME, XDG_CONFIG_HOME, Qwen base folder and Claude config folder;
the same project is cloned with C git at a different path on each, its ``origin`` spelt
differently (scp-like ssh on one, https on the other). The hub is a bare repository (plus one
``git daemon`` and one smart-HTTP case); every run ends with ``git fsck --strict`` on it.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from clihelpers import Run, git, one_error_line
from servers import GitDaemon, HttpGitServer, fsck_strict, init_bare

SHOP_SSH = "git@github.com:Alice/shop.git"
SHOP_HTTPS = "https://github.com/Alice/shop"
SHOP_BRANCH = "projects/github.com/alice/shop"


class Box:
    """One machine: its environment, and projects cloned on it."""

    def __init__(self, tmp_path: Path, name: str) -> None:
        self.name = name
        self.base = tmp_path / name
        home = self.base / "home"
        home.mkdir(parents=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("QMEM_", "QWEN_"))}
        env.pop("CLAUDE_CONFIG_DIR", None)
        self.env = {
            **env,
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(self.base / "xdg"),
            "QWEN_CODE_MEMORY_BASE_DIR": str(self.base / "qwen"),
            "CLAUDE_CONFIG_DIR": str(self.base / "claude"),
            "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
            "QMEM_HOST": name,
            "QMEM_TELEMETRY": "0",
            "QMEM_GIT_TIMEOUT": "20",
        }
        self.user_root = self.base / "qwen" / "memories"

    def clone(self, upstream: Path, rel: str, origin: str | None) -> Path:
        """The project cloned with C git at ``rel`` (its ``origin`` then spelt ``origin``)."""
        path = self.base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "clone", "-q", str(upstream), str(path)], check=True, env=self.env)
        if origin is None:
            subprocess.run(["git", "-C", str(path), "remote", "remove", "origin"], check=True)
        else:
            subprocess.run(
                ["git", "-C", str(path), "remote", "set-url", "origin", origin], check=True
            )
        return path

    def run(self, project: Path | None, *args: str, extra: dict[str, str] | None = None) -> Run:
        proc = subprocess.run(
            [sys.executable, "-m", "qmem_git", *args],
            capture_output=True,
            text=True,
            cwd=project or self.base,
            env={**self.env, **(extra or {})},
            timeout=120,
        )
        return Run(proc.returncode, proc.stdout, proc.stderr)

    def ok(self, project: Path | None, *args: str) -> Run:
        result = self.run(project, *args)
        assert result.code == 0, (args, result.out, result.err)
        return result

    def remember(self, project: Path, text: str, *tier: str) -> None:
        self.ok(project, *tier, "remember", text)

    def recall_text(self, project: Path, *tier: str) -> str:
        root = Path(self.ok(project, *tier, "where", "--json").json()["memory_root"])
        if not root.is_dir():
            return ""
        return "\n".join(
            p.read_text(encoding="utf-8")
            for p in sorted(root.rglob("*.md"))
            if p.name != "MEMORY.md"
        )

    def memory_root(self, project: Path, *tier: str) -> Path:
        return Path(self.ok(project, *tier, "where", "--json").json()["memory_root"])


@pytest.fixture
def upstream(tmp_path: Path) -> Path:
    """The project's own repository (what each machine clones)."""
    src = tmp_path / "upstream-src"
    src.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(src)], check=True)
    (src / "README").write_text("shop\n")
    subprocess.run(["git", "-C", str(src), "add", "-A"], check=True)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "a",
        "GIT_AUTHOR_EMAIL": "a@x",
        "GIT_COMMITTER_NAME": "a",
    }
    env["GIT_COMMITTER_EMAIL"] = "a@x"
    subprocess.run(["git", "-C", str(src), "commit", "-qm", "init"], check=True, env=env)
    return src


def hub_branches(hub: Path) -> set[str]:
    return set(git(hub, "for-each-ref", "--format=%(refname:short)", "refs/heads").split())


def two_machines(
    tmp_path: Path, project: Path, rel_a: str = "shop", rel_b: str = "elsewhere/shop"
) -> tuple[Path, tuple[Box, Path], tuple[Box, Path]]:
    """A hub, and machines ``a`` and ``b`` using it, the project cloned at ``rel_a`` and
    ``rel_b`` with its origin spelt differently: (hub, (a, project on a), (b, project on b))."""
    hub = init_bare(tmp_path / "hub.git")
    a, b = Box(tmp_path, "a"), Box(tmp_path, "b")
    shop_a = a.clone(project, rel_a, SHOP_SSH)
    shop_b = b.clone(project, rel_b, SHOP_HTTPS)
    for box in (a, b):
        box.ok(None, "hub", "set", str(hub))
    return hub, (a, shop_a), (b, shop_b)


def test_hub_set_show_unset_keep_the_rest_of_the_config_file(tmp_path: Path) -> None:
    box = Box(tmp_path, "a")
    config = box.base / "xdg" / "qmem-git" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"llm": {"model": "m", "base_url": "http://127.0.0.1:9"}}))
    config.chmod(0o640)
    hub = init_bare(tmp_path / "hub.git")
    shown = box.ok(None, "hub", "show", "--json").json()
    assert shown == {"hub": None, "branches": []}
    assert "No hub set" in box.ok(None, "hub", "show").out
    box.ok(None, "hub", "set", str(hub))
    data = json.loads(config.read_text())
    assert data["hub"] == str(hub) and data["llm"]["model"] == "m"
    assert stat.S_IMODE(config.stat().st_mode) == 0o640
    shown = box.ok(None, "--json", "hub", "show").json()
    assert shown["hub"] == str(hub) and shown["branches"] == []
    # a password never reaches the file; a malformed URL is refused as `remote add` does
    refused = box.run(None, "hub", "set", "https://me:pw@example.com/hub.git")
    assert refused.code == 2 and "password" in one_error_line(refused.err)
    assert box.run(None, "hub", "set", "ssh://-oProxyCommand=x/h").code == 2
    assert json.loads(config.read_text())["hub"] == str(hub)
    assert box.ok(None, "--json", "hub", "unset").json() == {"removed": True}
    assert "hub" not in json.loads(config.read_text())
    assert json.loads(config.read_text())["llm"]["model"] == "m"
    assert stat.S_IMODE(config.stat().st_mode) == 0o640
    # comments: refused with one line that says to add the key by hand, file unchanged
    commented = '// my settings\n{"llm": {}}\n'
    config.write_text(commented)
    refused = box.run(None, "hub", "set", str(hub))
    assert refused.code == 2
    assert '"hub": "URL"' in one_error_line(refused.err)
    assert config.read_text() == commented


def test_two_machines_share_project_and_user_tier_through_one_hub(
    tmp_path: Path, upstream: Path
) -> None:
    hub, (a, shop_a), (b, shop_b) = two_machines(
        tmp_path, upstream, "code/shop", "src/work/shop-checkout"
    )
    a.remember(shop_a, "The shop deploys with make release")
    a.ok(shop_a, "--tier", "user", "init")
    a.remember(shop_a, "The user prefers terse answers", "--tier", "user")
    synced = a.ok(shop_a, "--json", "sync").json()
    by_store = {entry["store"]: entry for entry in synced}
    assert by_store["project"]["branch"] == SHOP_BRANCH and by_store["project"]["via"] == "hub"
    assert by_store["user"]["branch"] == "user"
    assert by_store["claude"]["status"] == "skipped"
    assert hub_branches(hub) == {SHOP_BRANCH, "user"}
    # machine b: nothing there yet; --dry-run says what would come and creates nothing
    dry = {entry["store"]: entry for entry in b.ok(shop_b, "--json", "sync", "--dry-run").json()}
    assert dry["project"]["summary"] == f"would clone {SHOP_BRANCH} (no repository here yet)"
    assert not b.memory_root(shop_b).exists() and not b.user_root.exists()
    # one sync brings the project's and the user's memories
    result = b.ok(shop_b, "sync")
    assert "project (hub:" in result.out and "user (hub:user)" in result.out
    assert "make release" in b.recall_text(shop_b)
    assert "terse answers" in b.recall_text(shop_b, "--tier", "user")
    # both sides write; each sync merges, nothing is lost
    b.remember(shop_b, "Payments go through the ledger service")
    a.remember(shop_a, "The shop's cache is warmed at 6")
    b.ok(shop_b, "sync")
    a.ok(shop_a, "sync")
    b.ok(shop_b, "sync")
    for box, shop in ((a, shop_a), (b, shop_b)):
        text = box.recall_text(shop)
        assert "make release" in text and "ledger service" in text and "warmed at 6" in text
    # the hub is no remote of the store, and the hub's branches are named for their stores
    assert b.ok(shop_b, "--json", "remote", "list").json() == []
    shown = b.ok(shop_b, "--json", "hub", "show").json()
    owners = {entry["branch"]: entry["store"] for entry in shown["branches"]}
    assert owners[SHOP_BRANCH] == str(b.memory_root(shop_b))
    assert owners["user"] == str(b.user_root)
    status = b.ok(shop_b, "--json", "status").json()
    project = next(store for store in status if store["store"] == "project")
    assert project["hub"] == {"branch": SHOP_BRANCH, "ahead": 0, "behind": 0}
    b.remember(shop_b, "One more fact that is not pushed yet")
    text = b.ok(shop_b, "--tier", "project", "status").out
    assert f"main is 1 ahead, 0 behind the hub's {SHOP_BRANCH}" in text
    assert "hub/main" not in text
    b.ok(shop_b, "sync")
    fsck_strict(hub)


def test_projects_never_mix_and_an_unknown_project_gets_nothing(
    tmp_path: Path, upstream: Path
) -> None:
    hub = init_bare(tmp_path / "hub.git")
    a, b = Box(tmp_path, "a"), Box(tmp_path, "b")
    shop_a = a.clone(upstream, "shop", SHOP_SSH)
    blog_a = a.clone(upstream, "blog", "git@github.com:Alice/blog.git")
    blog_b = b.clone(upstream, "sites/blog", "ssh://git@github.com:22/alice/blog.git/")
    other_b = b.clone(upstream, "other", "https://gitlab.com/bob/other.git")
    for box in (a, b):
        box.ok(None, "hub", "set", str(hub))
    a.remember(shop_a, "Shop secret sauce is cinnamon")
    a.remember(blog_a, "Blog posts go out on Fridays")
    a.ok(shop_a, "sync")
    a.ok(blog_a, "sync")
    assert {SHOP_BRANCH, "projects/github.com/alice/blog"} <= hub_branches(hub)
    b.ok(blog_b, "sync")
    text = b.recall_text(blog_b)
    assert "Fridays" in text and "cinnamon" not in text
    unknown = b.ok(other_b, "--json", "sync").json()
    project = next(entry for entry in unknown if entry["store"] == "project")
    assert project["status"] == "skipped" and project["branch"] == "projects/gitlab.com/bob/other"
    assert not b.memory_root(other_b).exists()
    # no object of the shop's branch reached machine b's blog store
    shop_tip = subprocess.run(
        ["git", "--git-dir", str(hub), "rev-parse", SHOP_BRANCH],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    blog_repo = str(b.memory_root(blog_b)) + ".git"
    missing = subprocess.run(["git", "--git-dir", blog_repo, "cat-file", "-e", shop_tip])
    assert missing.returncode != 0
    fsck_strict(hub)


def test_a_project_without_origin_uses_its_path_key(tmp_path: Path, upstream: Path) -> None:
    hub = init_bare(tmp_path / "hub.git")
    a = Box(tmp_path, "a")
    local = a.clone(upstream, "scratch", None)
    a.ok(None, "hub", "set", str(hub))
    a.remember(local, "Scratch work is throwaway")
    found = a.ok(local, "--json", "sync").json()
    branch = next(entry for entry in found if entry["store"] == "project")["branch"]
    key = a.memory_root(local).parent.name
    assert branch == f"projects/path/{key}"
    assert branch in hub_branches(hub)
    subprocess.run(["git", "check-ref-format", f"refs/heads/{branch}"], check=True)
    fsck_strict(hub)


def test_a_stores_own_remote_wins_and_one_failure_does_not_stop_the_others(
    tmp_path: Path, upstream: Path
) -> None:
    hub = init_bare(tmp_path / "hub.git")
    own = init_bare(tmp_path / "own.git")
    a = Box(tmp_path, "a")
    shop = a.clone(upstream, "shop", SHOP_SSH)
    a.ok(None, "hub", "set", str(hub))
    a.remember(shop, "Shop memory goes to its own remote")
    a.ok(shop, "remote", "add", "origin", str(own))
    a.ok(shop, "--tier", "user", "init")
    a.remember(shop, "User memory goes to the hub", "--tier", "user")
    found = a.ok(shop, "--json", "sync").json()
    project = next(entry for entry in found if entry["store"] == "project")
    assert project["via"] == "origin" and project["branch"] is None
    assert hub_branches(hub) == {"user"}
    assert hub_branches(own) == {"main"}
    # the project's own remote disappears: its sync fails (exit 5), the user tier still syncs
    subprocess.run(["rm", "-rf", str(own)], check=True)
    a.remember(shop, "User memory two", "--tier", "user")
    result = a.run(shop, "--json", "sync")
    assert result.code == 5, result.err
    assert "project" in one_error_line(result.err)
    entries = {entry["store"]: entry for entry in json.loads(result.out)}
    assert entries["project"]["status"] == "failed" and entries["project"]["exit_code"] == 5
    assert entries["user"]["status"] == "synced"
    assert entries["user"]["result"]["pushed"] is True
    fsck_strict(hub)


def test_two_machines_syncing_at_once_converge(tmp_path: Path, upstream: Path) -> None:
    hub, (a, shop_a), (b, shop_b) = two_machines(tmp_path, upstream, "shop", "x/shop")
    a.remember(shop_a, "Fact one from machine a")
    a.ok(shop_a, "sync")
    b.ok(shop_b, "sync")
    for n in range(3):
        a.remember(shop_a, f"Concurrent fact {n} from a")
        b.remember(shop_b, f"Concurrent fact {n} from b")
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "qmem_git", "sync"],
            cwd=shop,
            env=box.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for box, shop in ((a, shop_a), (b, shop_b))
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, (out, err)
    a.ok(shop_a, "sync")
    b.ok(shop_b, "sync")
    texts = [a.recall_text(shop_a), b.recall_text(shop_b)]
    for n in range(3):
        for side in "ab":
            assert all(f"Concurrent fact {n} from {side}" in text for text in texts)
    fsck_strict(hub)


def test_sync_all_needs_the_recorded_project_and_syncs_every_store(
    tmp_path: Path, upstream: Path
) -> None:
    hub, (a, shop_a), (b, shop_b) = two_machines(tmp_path, upstream, "shop", "shop")
    a.remember(shop_a, "The first fact about the shop")
    a.ok(shop_a, "sync")
    b.ok(shop_b, "sync")
    a.remember(shop_a, "Second fact, synced by --all")
    found = a.ok(None, "--json", "sync", "--all").json()
    project = next(entry for entry in found if entry["store"] == "project")
    assert project["status"] == "synced" and project["branch"] == SHOP_BRANCH
    b.ok(None, "sync", "--all")
    assert "synced by --all" in b.recall_text(shop_b)
    # a store named by its folder alone finds its branch from the project it recorded
    named = a.ok(None, "--memory-dir", str(a.memory_root(shop_a)), "--json", "sync").json()
    assert named["remote"] == "hub" and named["action"] == "up-to-date"
    # a store whose project was never recorded is skipped with a hint, not guessed
    lone = a.base / "qwen" / "projects" / "-nowhere" / "memory"
    a.ok(None, "--memory-dir", str(lone), "init")
    subprocess.run(
        ["git", "--git-dir", f"{lone}.git", "config", "--unset", "qmem.project.root"],
        check=False,
    )
    found = a.ok(None, "--json", "sync", "--all").json()
    skipped = next(entry for entry in found if entry["memory_root"] == str(lone))
    assert skipped["status"] == "skipped" and skipped["result"] is None
    assert "qmem-git sync" in a.ok(None, "sync", "--all").out
    usage = a.run(None, "--tier", "user", "sync", "--all")
    assert usage.code == 2
    fsck_strict(hub)


def fill_hub(hub: Path, count: int) -> str:
    """``count`` branches of stores from elsewhere on one commit of their own; its id."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "x", "GIT_AUTHOR_EMAIL": "x@x"}
    env.update(GIT_COMMITTER_NAME="x", GIT_COMMITTER_EMAIL="x@x")
    git_dir = ["git", "--git-dir", str(hub)]
    blob = subprocess.run(
        [*git_dir, "hash-object", "-w", "--stdin"],
        input="someone else's memory\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    tree = subprocess.run(
        [*git_dir, "mktree"],
        input=f"100644 blob {blob}\tother.md\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    commit = subprocess.run(
        [*git_dir, "commit-tree", "-m", "elsewhere", tree],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout.strip()
    lines = "".join(
        f"create refs/heads/projects/example.com/team/p{n} {commit}\n" for n in range(count)
    )
    subprocess.run([*git_dir, "update-ref", "--stdin"], input=lines, text=True, check=True)
    return commit


@pytest.mark.parametrize("server", ["daemon", "http"])
def test_the_hub_over_git_daemon_and_smart_http(
    tmp_path: Path, upstream: Path, server: str
) -> None:
    served = tmp_path / "served"
    served.mkdir()
    hub = init_bare(served / "hub.git")
    subprocess.run(["git", "--git-dir", str(hub), "config", "http.receivepack", "true"], check=True)
    crowd = fill_hub(hub, 500)  # other people's stores: advertised, never fetched
    running: GitDaemon | HttpGitServer
    if server == "daemon":
        running = GitDaemon(served).start()
        url, extra = running.url("hub.git"), {}
    else:
        running = HttpGitServer(served).start()
        url = running.url("hub.git")
        extra = {"QMEM_GIT_USERNAME": running.user, "QMEM_GIT_TOKEN": running.password}
    try:
        a, b = Box(tmp_path, "a"), Box(tmp_path, "b")
        for box in (a, b):
            box.env.update(extra)
            box.ok(None, "hub", "set", url)
        shop_a = a.clone(upstream, "shop", SHOP_SSH)
        shop_b = b.clone(upstream, "y/shop", SHOP_HTTPS)
        a.remember(shop_a, "Served over the network")
        a.ok(shop_a, "sync")
        b.ok(shop_b, "sync")
        assert "over the network" in b.recall_text(shop_b)
        shown = b.ok(shop_b, "--json", "hub", "show").json()
        names = {entry["branch"] for entry in shown["branches"]}
        assert SHOP_BRANCH in names and len(names) == 500 + 1
        blog = {e["branch"]: e for e in shown["branches"]}["projects/example.com/team/p7"]
        assert blog["store"] is None and "not on this machine" in b.ok(shop_b, "hub").out
        repo = f"{b.memory_root(shop_b)}.git"
        assert subprocess.run(["git", "--git-dir", repo, "cat-file", "-e", crowd]).returncode
    finally:
        running.stop()
    fsck_strict(hub)


def project_and_user_tier(tmp_path: Path, upstream: Path, fact: str) -> tuple[Path, Box, Path]:
    """Machine ``a`` with a hub set, the project's store holding ``fact`` and a user tier with
    a memory of its own: (hub, machine, project)."""
    hub = init_bare(tmp_path / "hub.git")
    a = Box(tmp_path, "a")
    shop = a.clone(upstream, "shop", SHOP_SSH)
    a.ok(None, "hub", "set", str(hub))
    a.remember(shop, fact)
    a.ok(shop, "--tier", "user", "init")
    a.remember(shop, "I prefer short answers", "--tier", "user")
    return hub, a, shop


def test_a_locked_store_fails_alone_and_the_next_sync_catches_up(
    tmp_path: Path, upstream: Path
) -> None:
    hub, a, shop = project_and_user_tier(tmp_path, upstream, "The shop memory waits for its lock")
    lock = f"{a.memory_root(shop)}.git/qmem.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time; f = open(sys.argv[1], 'a'); "
            "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
            lock,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        result = a.run(shop, "--json", "sync", extra={"QMEM_LOCK_TIMEOUT": "1"})
    finally:
        holder.kill()
        holder.wait()
    assert result.code == 3, result.err
    one_error_line(result.err)
    entries = {entry["store"]: entry for entry in json.loads(result.out)}
    assert entries["project"]["status"] == "failed" and entries["project"]["exit_code"] == 3
    assert entries["user"]["status"] == "synced" and entries["user"]["result"]["pushed"]
    assert "user" in hub_branches(hub)
    a.ok(shop, "sync")  # the lock is free again: the project's branch is published
    assert SHOP_BRANCH in hub_branches(hub)
    fsck_strict(hub)


def test_a_secret_committed_by_hand_never_reaches_the_hub_and_blocks_only_its_store(
    tmp_path: Path, upstream: Path
) -> None:
    hub, a, shop = project_and_user_tier(tmp_path, upstream, "The shop deploys on Mondays")
    # a person commits a credential into the project's store with plain git, past the hook
    root = a.memory_root(shop)
    key = "AKIA" + "IOSFODNN7" + "EXAMPLE"
    (root / "project" / "keys.md").write_text(
        f"---\nname: keys\ndescription: deploy keys\ntype: project\n---\n\n{key}\n",
        encoding="utf-8",
    )
    by_hand = ["git", f"--git-dir={root}.git", f"--work-tree={root}"]
    subprocess.run([*by_hand, "add", "project/keys.md"], check=True, env=a.env)
    commit = [*by_hand, "-c", "user.name=a", "-c", "user.email=a@x", "commit", "-q", "--no-verify"]
    subprocess.run([*commit, "-m", "keys"], check=True, env=a.env)
    result = a.run(shop, "--json", "sync")
    assert result.code == 1, (result.out, result.err)  # refused content: exit 1
    assert "project/keys.md" in one_error_line(result.err)
    entries = {entry["store"]: entry for entry in json.loads(result.out)}
    assert entries["project"]["status"] == "failed"
    assert entries["user"]["status"] == "synced" and entries["user"]["result"]["pushed"]
    assert hub_branches(hub) == {"user"}  # the project's branch was never published
    everything = git(hub, "log", "--all", "-p")
    assert key not in everything and "short answers" in everything
    fsck_strict(hub)
