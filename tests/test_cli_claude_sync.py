"""Claude Code's folder shared between two machines: ``remote``, ``sync`` and ``clone``.

Two machines (their own HOME and ``CLAUDE_CONFIG_DIR``, the project at different paths), real
``qmem-git`` processes, a real bare remote, C git (``fsck --strict``, ``status``) as the judge.
Claude's files must come out byte for byte as Claude wrote them, its MEMORY.md merged by lines.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from clihelpers import assert_clean_repo, git, head, one_error_line, trailers

from qmem_git.core.claudepaths import claude_key
from qmem_git.core.text import CONFLICT_LINE
from qmem_git.store.claudesettings import canonical_root


def claude_memory(name: str, kind: str, fact: str) -> str:
    """A memory as Claude Code 2.1 writes it: ``type`` nested under ``metadata:``."""
    return (
        f"---\nname: {name}\ndescription: {fact[:40]}\nmetadata: \n  type: {kind}\n"
        f"  node_type: memory\n  originSessionId: 5b0c\n---\n\n{fact}\n\n"
        f"**Why:** said so in session {name}.\n"
    )


BUILD = claude_memory("build-tool", "project", "The zebra project builds with pnpm, never npm.")
INDEX = (
    "# Memory index\n\n"
    "- [Build tool](build-tool.md) — pnpm, never npm\n"
    "- [Old host](old-host.md) — retired\n"
    "- [Style](style.md) — tabs\n"
)


class Machine:
    """One machine: its own home, Claude config folder and project path."""

    def __init__(self, tmp_path: Path, name: str, project: str) -> None:
        base = tmp_path / name
        self.home = base / "home"
        self.home.mkdir(parents=True)
        self.project = base / project
        self.project.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(self.project)], check=True)
        self.env = {
            "HOME": str(self.home),
            "CLAUDE_CONFIG_DIR": str(base / "claude-config"),
            "GIT_CONFIG_GLOBAL": str(self.home / ".gitconfig"),
        }
        key = claude_key(canonical_root(str(self.project)))
        self.folder = base / "claude-config" / "projects" / key / "memory"

    def run(
        self, *args: str, agent: bool = True, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        chosen = ["--agent", "claude"] if agent else []
        return subprocess.run(
            [sys.executable, "-m", "qmem_git", *chosen, *args],
            capture_output=True,
            text=True,
            cwd=cwd or self.project,
            env={**os.environ, **self.env},
            timeout=120,
            check=False,
        )

    def ok(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = self.run(*args)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        assert "MEMORY.md was stale" not in done.stdout  # Claude's index is never rebuilt
        return done

    def hook(self, event: str, payload: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
        """A Claude Code hook, run as Claude runs it (JSON on stdin, in the project)."""
        return subprocess.run(
            [sys.executable, "-m", "qmem_git", "hook", "--agent", "claude", event],
            input=json.dumps(payload).encode(),
            capture_output=True,
            cwd=self.project,
            env={**os.environ, **self.env},
            timeout=60,
            check=False,
        )

    def write(self, rel: str, text: str) -> None:
        """As Claude's Write tool does; dated in the past, so no snapshot waits on it."""
        path = self.folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
        past = time.time() - 30
        os.utime(path, (past, past))

    def files(self) -> dict[str, bytes]:
        """Everything in Claude's folder, path -> bytes."""
        found = {}
        for path in sorted(self.folder.rglob("*")):
            if path.is_file():
                found[path.relative_to(self.folder).as_posix()] = path.read_bytes()
        return found


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    return bare


def remote_files(remote: Path) -> dict[str, bytes]:
    listing = subprocess.run(
        ["git", "--git-dir", str(remote), "ls-tree", "-r", "--name-only", "main"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return {
        rel: subprocess.run(
            ["git", "--git-dir", str(remote), "show", f"main:{rel}"],
            capture_output=True,
            check=True,
        ).stdout
        for rel in listing
    }


def fsck_bare(remote: Path) -> None:
    subprocess.run(["git", "--git-dir", str(remote), "fsck", "--strict"], check=True)


def started(tmp_path: Path, remote: Path) -> tuple[Machine, Machine]:
    """Machine A versions Claude's folder and publishes it; B clones it (another path)."""
    a = Machine(tmp_path, "laptop", "shop")
    b = Machine(tmp_path, "desktop", "code/shop")
    where = json.loads(a.ok("where", "--json").stdout)
    assert where["memory_root"] == str(a.folder)
    a.write("build-tool.md", BUILD)
    a.write("MEMORY.md", INDEX)
    refused = a.run("init", "--remote", str(remote))
    assert refused.returncode == 2 and "remote add" in one_error_line(refused.stderr)
    a.ok("init")
    a.ok("remote", "add", "origin", str(remote))
    listed = a.ok("remote", "list", "--json")
    assert [r["name"] for r in json.loads(listed.stdout)] == ["origin"]
    pushed = json.loads(a.ok("sync", "--json").stdout)
    assert pushed["action"] == "pushed" and pushed["index_commit"] is None
    cloned = json.loads(b.ok("clone", str(remote), "--json").stdout)
    assert cloned["mode"] == "cloned" and cloned["index_commit"] is None
    assert b.files() == a.files() == {"MEMORY.md": INDEX.encode(), "build-tool.md": BUILD.encode()}
    assert not b.folder.with_name("memory.qmem").joinpath("MEMORY.md").exists()
    return a, b


def test_two_machines_converge_and_claudes_files_stay_as_claude_wrote_them(
    tmp_path: Path, remote: Path
) -> None:
    a, b = started(tmp_path, remote)
    terse = claude_memory("terse", "feedback", "Answer tersely, no summaries at the end.")
    deploy = claude_memory("deploy", "reference", "Deploys go through the blue-green script.")
    idea = claude_memory("idea", "project", "Try the new bundler in the spring.")
    # A: two new memories (one nested), a line added to MEMORY.md and one deleted from it
    a.write("feedback_terse.md", terse)
    a.write("notes/ops/deploy.md", deploy)
    a.write(
        "MEMORY.md",
        INDEX.replace("- [Old host](old-host.md) — retired\n", "")
        + "- [Terse](feedback_terse.md) — no summaries\n"
        + "- [Deploy](notes/ops/deploy.md) — blue-green\n",
    )
    # B: a memory in a dot-folder and a line of its own, nothing committed by hand
    b.write(".drafts/idea.md", idea)
    b.write("MEMORY.md", INDEX + "- [Idea](.drafts/idea.md) — new bundler\n")
    first = a.ok("sync")
    assert "committed 3 changed file(s)" in first.stderr and "Pushed" in first.stdout
    merged = json.loads(b.ok("sync", "--json").stdout)
    assert merged["action"] == "merged" and merged["pushed"]
    assert merged["snapshot_commit"] is not None  # B's changes, committed as is first
    assert [c["kind"] for c in merged["conflicts_reconciled"]] == ["lines-merged"]
    assert json.loads(a.ok("sync", "--json").stdout)["action"] == "fast-forward"

    expected_index = (
        "# Memory index\n\n"
        "- [Build tool](build-tool.md) — pnpm, never npm\n"
        "- [Style](style.md) — tabs\n"
        "- [Idea](.drafts/idea.md) — new bundler\n"  # ours (B, who merged) first
        "- [Terse](feedback_terse.md) — no summaries\n"  # then theirs, in their order
        "- [Deploy](notes/ops/deploy.md) — blue-green\n"
    )
    expected = {
        "MEMORY.md": expected_index.encode(),
        "build-tool.md": BUILD.encode(),
        "feedback_terse.md": terse.encode(),
        "notes/ops/deploy.md": deploy.encode(),
        ".drafts/idea.md": idea.encode(),
    }
    assert a.files() == b.files() == expected  # nothing else written, nothing rewritten
    assert not CONFLICT_LINE.search(expected_index)
    assert remote_files(remote) == expected
    pushed = subprocess.run(
        ["git", "--git-dir", str(remote), "rev-parse", "main"], capture_output=True, text=True
    ).stdout.strip()
    assert head(a.folder) == head(b.folder) == pushed
    assert git(a.folder, "rev-parse", "origin/main").strip() == pushed
    merge = trailers(b.folder, "HEAD")
    assert merge["Qmem-Op"] == "merge" and merge["Qmem-Reconciled"] == "lines-merged MEMORY.md"
    for machine in (a, b):
        assert_clean_repo(machine.folder)
    fsck_bare(remote)
    assert sorted(os.listdir(a.folder.parent)) == ["memory", "memory.git", "memory.qmem"]


def test_one_memory_changed_on_both_machines_is_kept_twice_never_rewritten(
    tmp_path: Path, remote: Path
) -> None:
    a, b = started(tmp_path, remote)
    ours = BUILD.replace("never npm.", "never npm or yarn.")
    theirs = BUILD.replace("  type: project\n", "  type: reference\n") + "\nSee the lockfile.\n"
    a.write("build-tool.md", theirs)
    b.write("build-tool.md", ours)
    b.write("MEMORY.md", INDEX + "- [Yarn](build-tool.md) — not yarn either\n")
    a.ok("sync")
    done = json.loads(b.ok("sync", "--json").stdout)
    kinds = sorted(c["kind"] for c in done["conflicts_reconciled"])
    assert kinds == ["kept-both"]  # Claude's frontmatter is not Qwen's: never merged per field
    a.ok("sync")
    kept = {p: t for p, t in b.files().items() if p.startswith("build-tool")}
    assert sorted(kept.values()) == sorted([ours.encode(), theirs.encode()])
    assert a.files() == b.files()
    assert (
        b.files()["MEMORY.md"] == (INDEX + "- [Yarn](build-tool.md) — not yarn either\n").encode()
    )
    for machine in (a, b):
        assert_clean_repo(machine.folder)


def test_a_secret_in_claudes_folder_is_held_back_and_never_pushed(
    tmp_path: Path, remote: Path
) -> None:
    a, b = started(tmp_path, remote)
    key = "AKIA" + "IOSFODNN7" + "EXAMPLE"
    cloud = claude_memory("cloud", "reference", f"The deploy key is {key}.")
    a.write("cloud.md", cloud)
    a.write("MEMORY.md", INDEX + "- [Cloud](cloud.md) — deploy key\n")
    done = a.ok("sync")
    assert "cloud.md" in done.stderr and "secret" in done.stderr
    assert (a.folder / "cloud.md").read_bytes() == cloud.encode()  # left where Claude wrote it
    assert "cloud.md" not in remote_files(remote)
    history = git(remote, "log", "--all", "-p")
    assert key not in history and "- [Cloud](cloud.md)" in history  # the index did go
    b.ok("sync")
    assert "cloud.md" not in b.files()
    fsck_bare(remote)


def test_a_hostile_remote_is_refused_and_claudes_folder_left_alone(
    tmp_path: Path, remote: Path
) -> None:
    _, b = started(tmp_path, remote)
    work = tmp_path / "attacker"
    subprocess.run(["git", "clone", "-q", str(remote), str(work)], check=True)
    (work / "link.md").symlink_to("/etc/passwd")
    subprocess.run(["git", "-C", str(work), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(work), "commit", "-qm", "evil"], check=True)
    subprocess.run(["git", "-C", str(work), "push", "-q", "origin", "main"], check=True)
    before = b.files()
    refused = b.run("sync")
    assert refused.returncode == 1
    assert "refusing the remote's history: link.md" in one_error_line(refused.stderr)
    assert b.files() == before
    assert_clean_repo(b.folder)


def test_dry_run_writes_nothing_and_a_second_sync_is_up_to_date(
    tmp_path: Path, remote: Path
) -> None:
    a, b = started(tmp_path, remote)
    a.write("MEMORY.md", INDEX + "- [More](more.md) — more\n")
    a.ok("sync")
    before = b.files()
    would = json.loads(b.ok("sync", "--dry-run", "--json").stdout)
    assert would["action"] == "fast-forward" and would["changed_paths"] == ["MEMORY.md"]
    assert b.files() == before
    assert json.loads(b.ok("sync", "--json").stdout)["action"] == "fast-forward"
    assert json.loads(b.ok("sync", "--json").stdout)["action"] == "up-to-date"
    assert b.files() == a.files()
    # the folder named by --memory-dir, or stood in, is Claude's: synced the same way
    named = b.run("--memory-dir", str(b.folder), "remote", "list", "--json", agent=False)
    assert [r["name"] for r in json.loads(named.stdout)] == ["origin"], named.stderr
    a.write("style.md", claude_memory("style", "feedback", "Tabs, not spaces."))
    a.ok("sync")
    inside = b.run("sync", "--json", agent=False, cwd=b.folder)
    assert json.loads(inside.stdout)["action"] == "fast-forward", inside.stderr
    assert b.files() == a.files()
    b.ok("remote", "remove", "origin")
    assert json.loads(b.ok("remote", "list", "--json").stdout) == []


def test_clone_merge_keeps_what_claude_already_wrote_on_the_new_machine(
    tmp_path: Path, remote: Path
) -> None:
    a = Machine(tmp_path, "laptop", "shop")
    a.write("build-tool.md", BUILD)
    a.write("MEMORY.md", INDEX)
    a.ok("init")
    a.ok("remote", "add", "origin", str(remote))
    a.ok("sync")
    b = Machine(tmp_path, "desktop", "shop")
    own = claude_memory("own", "user", "Prefers dark themes.")
    b.write("own.md", own)
    b.write("MEMORY.md", "- [Own](own.md) — dark themes\n")
    refused = b.run("clone", str(remote))
    assert refused.returncode == 1 and "--merge" in one_error_line(refused.stderr)
    b.ok("clone", "--merge", str(remote))
    a.ok("sync")
    assert a.files() == b.files()
    assert b.files()["own.md"] == own.encode() and b.files()["build-tool.md"] == BUILD.encode()
    index = b.files()["MEMORY.md"].decode()
    assert index == "- [Own](own.md) — dark themes\n" + INDEX  # no base: every line kept
    assert_clean_repo(b.folder)


def test_claudes_hooks_push_at_session_end_and_pull_at_session_start(
    tmp_path: Path, remote: Path
) -> None:
    """Companion mode (Claude's auto-memory on): the hooks sync Claude's folder once it has a
    remote, as they sync any store: a push after the session's snapshot, a pull at the start."""
    a, b = started(tmp_path, remote)
    ci = claude_memory("ci", "project", "CI runs on every push to main.")
    a.write("ci.md", ci)
    a.write("MEMORY.md", INDEX + "- [CI](ci.md) — every push\n")
    # no session id: the end's steps (snapshot, sync) run at once, not after the watcher waits
    end = {"session_id": "", "cwd": str(a.project), "hook_event_name": "SessionEnd"}
    assert a.hook("session-end", {**end, "reason": "other"}).returncode == 0
    log = a.folder.with_name("memory.qmem") / "hook.log"
    assert poll(lambda: remote_files(remote).get("ci.md") == ci.encode()), log.read_text()
    start = {"session_id": "s-b", "cwd": str(b.project), "hook_event_name": "SessionStart"}
    started_b = b.hook("session-start", {**start, "source": "startup"})
    assert started_b.returncode == 0 and started_b.stdout == b""  # companion: no context
    assert poll(lambda: b.files() == a.files()), b.folder.with_name("memory.qmem") / "hook.log"
    assert b.files()["MEMORY.md"] == (INDEX + "- [CI](ci.md) — every push\n").encode()


def poll(condition: Callable[[], bool], seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False


def test_claudes_index_of_any_format_passes_the_checks_and_merges_byte_for_byte(
    tmp_path: Path, remote: Path
) -> None:
    """A byte order mark, CRLF line ends, a table, a comment: Claude's MEMORY.md is not Qwen's
    and is taken as it is on both sides of the sync (only the safety rules apply)."""
    a = Machine(tmp_path, "laptop", "shop")
    head_lines = "\ufeff# Claude memory\r\n\r\n| file | why |\r\n|---|---|\r\n<!-- kept -->\r\n"
    a.write("MEMORY.md", head_lines + "- [Build](build-tool.md)\r\n")
    a.write("build-tool.md", BUILD)
    a.ok("init")
    a.ok("remote", "add", "origin", str(remote))
    a.ok("sync")
    b = Machine(tmp_path, "desktop", "shop")
    b.ok("clone", str(remote))
    assert b.files() == a.files()
    a.write("MEMORY.md", head_lines + "- [Build](build-tool.md)\r\n- [Y](y.md)\r\n")
    b.write("MEMORY.md", head_lines + "- [X](x.md)\r\n- [Build](build-tool.md)\r\n")
    a.ok("sync")
    b.ok("sync")
    a.ok("sync")
    merged = head_lines + "- [X](x.md)\r\n- [Build](build-tool.md)\r\n- [Y](y.md)\r\n"
    assert a.files()["MEMORY.md"] == b.files()["MEMORY.md"] == merged.encode("utf-8")
    assert remote_files(remote)["MEMORY.md"] == merged.encode("utf-8")
    fsck_bare(remote)
