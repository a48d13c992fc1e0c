"""Sync end to end: three machines converge over git daemon; the CLI contract of sync/clone/remote.

The convergence test drives the machines in process (fast) and checks the result the slow,
independent way: C git (``fsck --strict``, ``status``) and the real ``qmem-git`` process
(``index --check``).
"""

from __future__ import annotations

import random
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from clihelpers import assert_clean_repo, git, head, one_error_line, qmem, trailers
from servers import GitDaemon, HttpGitServer, Machine, SshServer, closed_port, fsck_strict, git_in

ROUNDS = 22
WORDS = ["billing", "search", "gateway", "ledger", "mailer", "indexer", "scheduler", "vault"]
LONG_PREFIX = (
    "Shared naming convention for the platform team covers every service in the mono repo "
)


def _machine(tmp_path: Path, name: str, clock: list[int]) -> Machine:
    home = tmp_path / name / "home"
    home.mkdir(parents=True)
    return Machine(
        tmp_path,
        name,
        clock,
        HOME=str(home),
        QWEN_CODE_MEMORY_BASE_DIR=str(tmp_path / name / "qwen"),
        GIT_CONFIG_GLOBAL=str(home / ".gitconfig"),
    )


class World:
    """Three machines and the oracle: what was remembered and not forgotten."""

    def __init__(self, machines: list[Machine], rng: random.Random) -> None:
        self.machines = machines
        self.rng = rng
        self.expected: set[str] = set()
        self.unique: set[str] = set()  # remembered once, may be forgotten
        self.counter = 0

    def fact(self, machine: Machine) -> str:
        self.counter += 1
        word = self.rng.choice(WORDS)
        if self.rng.random() < 0.2:  # same 80-char slug on several machines: -N paths
            return f"{LONG_PREFIX}rule {self.counter} for {word} from {machine.name}"
        return f"The {word} service of {machine.name} listens on port {4000 + self.counter}"

    def remember(self, machine: Machine) -> None:
        text = self.fact(machine)
        machine.remember(text)
        self.expected.add(text)
        self.unique.add(text)

    def remember_shared(self, first: Machine, second: Machine) -> None:
        """One fact saved on two machines with different reasons: kept twice, then dreamed."""
        self.counter += 1
        text = f"Every release of the {self.rng.choice(WORDS)} stack needs sign-off {self.counter}"
        first.remember(text, why=f"{first.name} was burned by a bad release")
        second.remember(text, why=f"{second.name} follows the release policy")
        self.expected.add(text)

    def forget(self, machine: Machine) -> None:
        visible = set(machine.summaries()) & self.unique & self.expected
        if not visible:
            return
        text = self.rng.choice(sorted(visible))
        rel = machine.path_of(text)
        assert rel is not None
        machine.forget_path(rel)
        self.expected.discard(text)

    def act(self, machine: Machine) -> None:
        roll = self.rng.random()
        if roll < 0.55:
            self.remember(machine)
        elif roll < 0.8:
            self.forget(machine)
        elif roll < 0.9:
            machine.dream()
        else:
            other = self.rng.choice([m for m in self.machines if m is not machine])
            self.remember_shared(machine, other)


def test_three_machines_converge_after_random_work(
    tmp_path: Path, daemon: GitDaemon, served: Path
) -> None:
    clock = [1_700_000_000]
    machines = [_machine(tmp_path, name, clock) for name in ("laptop", "desk", "server")]
    world = World(machines, random.Random(20240611))
    url = daemon.url("mem.git")
    first, *others = machines
    world.remember(first)
    first.connect(url)
    for machine in others:
        machine.clone(url)
    for _ in range(ROUNDS):
        for machine in world.rng.sample(machines, len(machines)):
            for _ in range(world.rng.randint(1, 2)):
                world.act(machine)
            if world.rng.random() < 0.75:
                machine.sync()
    for _ in range(2):
        for machine in machines:
            machine.sync()
    remote_head = git(served / "mem.git", "rev-parse", "main").strip()
    assert {m.head() for m in machines} == {remote_head}
    merges = git(served / "mem.git", "rev-list", "--merges", "--count", "main").strip()
    assert int(merges) > 0
    for machine in machines:
        assert set(machine.summaries()) == world.expected
        counts = Counter(machine.summaries())
        assert all(counts[text] == 1 for text in world.unique & world.expected)
        for text in machine.files().values():
            assert not re.search(r"^(<<<<<<<|=======|>>>>>>>)", text, re.M)
        assert qmem(machine.root, "index", "--check", env=machine.env).code == 0
        assert_clean_repo(machine.root)
    assert machines[0].mtimes() == machines[1].mtimes() == machines[2].mtimes()
    fsck_strict(served / "mem.git")


# --- the CLI (commands wired in cli.py) -----------------------------------------------------------


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    root = tmp_path / "a" / "memory"
    assert qmem(root, "init").code == 0
    return root


def test_cli_remote_add_list_remove_redacts(memory: Path) -> None:
    added = qmem(memory, "remote", "add", "origin", "https://me:tok123@example.org/m.git")
    assert added.code == 0, added.err
    assert "tok123" not in added.out
    listed = qmem(memory, "--json", "remote", "list")
    assert listed.json() == [
        {"name": "origin", "url": "https://***@example.org/m.git", "kind": "https"}
    ]
    where = qmem(memory, "--json", "where").json()
    assert where["remotes"] == ["origin https://***@example.org/m.git (https)"]
    assert qmem(memory, "remote", "remove", "origin").code == 0
    assert qmem(memory, "--json", "remote", "list").json() == []
    bad = qmem(memory, "remote", "remove", "origin")
    assert bad.code == 2 and "no remote named" in one_error_line(bad.err)


def test_cli_sync_and_clone_between_two_machines(
    tmp_path: Path, memory: Path, served: Path
) -> None:
    url = str(served / "mem.git")
    assert qmem(memory, "remember", "The CLI syncs memories between machines").code == 0
    assert qmem(memory, "remote", "add", "origin", url).code == 0
    pushed = qmem(memory, "--json", "sync")
    assert pushed.code == 0, pushed.err
    assert pushed.json()["pushed"] is True and pushed.json()["action"] == "pushed"
    other = tmp_path / "b" / "memory"
    cloned = qmem(other, "--json", "clone", url)
    assert cloned.code == 0, cloned.err
    assert cloned.json()["mode"] == "cloned" and head(other) == head(memory)
    assert qmem(other, "remember", "Machine B adds a memory of its own").code == 0
    assert qmem(memory, "remember", "Machine A adds a memory as well").code == 0
    assert qmem(other, "sync").code == 0
    merged = qmem(memory, "--json", "sync")
    assert merged.code == 0, merged.err
    data = merged.json()
    assert data["merged"] is True and data["pushed"] is True
    assert set(data) >= {"fetched", "merged", "pushed", "conflicts_reconciled"}
    assert trailers(memory)["Qmem-Op"] == "merge"
    assert qmem(other, "sync").code == 0 and head(other) == head(memory)
    assert qmem(other, "index", "--check").code == 0
    assert_clean_repo(memory)
    assert_clean_repo(other)
    refused = qmem(other, "clone", url)
    assert refused.code == 1 and "--merge" in one_error_line(refused.err)


def test_cli_dead_remote_is_exit_5_with_one_redacted_error_line(memory: Path) -> None:
    url = f"http://me:tok123@127.0.0.1:{closed_port()}/m.git"
    assert qmem(memory, "remote", "add", "origin", url).code == 0
    result = qmem(memory, "sync")
    assert result.code == 5
    line = one_error_line(result.err)
    assert "connection refused" in line and "hint:" in line
    assert "tok123" not in result.err and "***@127.0.0.1" in line


def test_cli_sync_and_clone_over_ssh(tmp_path: Path, memory: Path, served: Path) -> None:
    """A real sshd on 127.0.0.1; GIT_SSH_COMMAND points ssh at the test's own config and key."""
    server = SshServer(tmp_path / "sshd").start()
    try:
        env = {"GIT_SSH_COMMAND": server.command}
        url = server.url(served / "mem.git")
        assert qmem(memory, "remember", "Memories travel over ssh as well").code == 0
        assert qmem(memory, "remote", "add", "origin", url).code == 0
        pushed = qmem(memory, "--json", "sync", env=env)
        assert pushed.code == 0, pushed.err
        assert pushed.json()["pushed"] is True
        other = tmp_path / "b" / "memory"
        cloned = qmem(other, "clone", url, env=env)
        assert cloned.code == 0, cloned.err
        assert qmem(other, "remember", "Machine B answers over ssh").code == 0
        assert qmem(other, "sync", env=env).code == 0
        pulled = qmem(memory, "--json", "sync", env=env)
        assert pulled.code == 0, pulled.err
        served_head = git_in(served / "mem.git", "rev-parse", "main").strip()
        assert head(memory) == head(other) == served_head
        fsck_strict(served / "mem.git")
        assert_clean_repo(memory)
        assert "Accepted publickey" in (tmp_path / "sshd" / "sshd.log").read_text()
        without = qmem(memory, "sync")  # plain ssh knows neither the host alias nor the key
        assert without.code == 5, without.err
        server.stop()
        dead = qmem(memory, "sync", env=env)
        assert dead.code == 5
        assert "hint:" in one_error_line(dead.err)
        unsplittable = qmem(memory, "sync", env={"GIT_SSH_COMMAND": "ssh -i 'unclosed"})
        assert unsplittable.code == 2 and "GIT_SSH_COMMAND" in one_error_line(unsplittable.err)
    finally:
        server.stop()


def test_cli_http_with_token_from_environment_and_init_remote(tmp_path: Path, served: Path) -> None:
    server = HttpGitServer(served).start()
    try:
        env = {"QMEM_GIT_USERNAME": server.user, "QMEM_GIT_TOKEN": server.password}
        root = tmp_path / "h" / "memory"
        result = qmem(root, "--json", "init", "--remote", server.url("mem.git"), env=env)
        assert result.code == 0, result.err
        assert server.password not in result.out + result.err
        assert git(served / "mem.git", "rev-parse", "main").strip() == head(root)
        no_token = qmem(root, "sync")
        assert no_token.code == 5 and "401" in one_error_line(no_token.err)
        dry = qmem(root, "--json", "sync", "--dry-run", env=env)
        assert dry.code == 0 and dry.json()["dry_run"] is True
    finally:
        server.stop()


# --- confirmed bugs, through the real process ---------------------------------------------------


def _machine_b(tmp_path: Path, url: str) -> Path:
    other = tmp_path / "b" / "memory"
    cloned = qmem(other, "clone", url)
    assert cloned.code == 0, cloned.err
    return other


def test_cli_frontmatter_edit_wins_over_forget_on_both_machines(
    tmp_path: Path, memory: Path, served: Path
) -> None:
    url = str(served / "mem.git")
    assert qmem(memory, "remote", "add", "origin", url).code == 0
    assert (
        qmem(memory, "remember", "--type", "user", "User prefers dark themes in every editor").code
        == 0
    )
    assert qmem(memory, "sync").code == 0
    other = _machine_b(tmp_path, url)
    assert qmem(memory, "forget", "dark themes").code == 0
    (doc,) = (other / "user").glob("*.md")
    text = doc.read_text().replace(
        "description: User prefers dark themes in every editor",
        "description: Dark theme everywhere, including the terminal",
    )
    assert text != doc.read_text()
    doc.write_text(text)
    assert qmem(other, "snapshot").code == 0
    assert qmem(memory, "sync").code == 0
    merged = qmem(other, "sync")
    assert merged.code == 0, merged.err
    assert "edit-kept-over-delete" in git(other, "log", "-1", "--format=%B")
    assert qmem(memory, "sync").code == 0
    for root in (memory, other):
        rel = doc.relative_to(other)
        assert (root / rel).read_text() == text
        assert qmem(root, "index", "--check").code == 0
        assert_clean_repo(root)
    assert head(memory) == head(other)


def test_cli_sync_after_a_plain_git_commit_leaves_memory_index_valid(
    tmp_path: Path, memory: Path, served: Path
) -> None:
    url = str(served / "mem.git")
    assert qmem(memory, "remember", "The CLI syncs memories between machines").code == 0
    assert qmem(memory, "init", "--remote", url).code == 0
    work = tmp_path / "plain"
    subprocess.run(["git", "clone", "-q", url, str(work)], check=True)
    (work / "user").mkdir(exist_ok=True)
    (work / "user" / "hand.md").write_text(
        "---\nname: Hand made\ndescription: Hand made\ntype: user\n---\n\nWritten with plain git\n"
    )
    git(work, "add", ".")
    git(work, "commit", "-q", "-m", "hand-made memory")
    git(work, "push", "-q", "origin", "main")
    synced = qmem(memory, "sync")
    assert synced.code == 0, synced.err
    assert "MEMORY.md was stale; rebuilt it as" in synced.out and "pushed to origin" in synced.out
    assert qmem(memory, "index", "--check").code == 0
    assert qmem(memory, "validate").code == 0
    assert trailers(memory)["Qmem-Op"] == "index"
    assert git(served / "mem.git", "rev-parse", "main").strip() == head(memory)
    assert_clean_repo(memory)


@pytest.mark.parametrize(
    ("rel", "text", "rule"),
    [
        (
            "user/alias.md",
            "---\nname: &n A\ndescription: *n\ntype: user\n---\n\nAliased\n",
            "frontmatter-yaml",
        ),
        (
            "user/tag.md",
            "---\nname: T\ndescription: !!python/object/apply:os.system [id]\n"
            "type: user\n---\n\nT\n",
            "frontmatter-yaml",
        ),
    ],
)
def test_cli_sync_takes_what_is_only_style(
    tmp_path: Path, memory: Path, served: Path, rel: str, text: str, rule: str
) -> None:
    url = str(served / "mem.git")
    assert qmem(memory, "remember", "A valid memory before the hostile push").code == 0
    assert qmem(memory, "init", "--remote", url).code == 0
    work = tmp_path / "evil"
    subprocess.run(["git", "clone", "-q", url, str(work)], check=True)
    (work / rel).parent.mkdir(exist_ok=True)
    (work / rel).write_text(text)
    git(work, "add", ".")
    git(work, "commit", "-q", "-m", "hostile")
    git(work, "push", "-q", "origin", "main")
    synced = qmem(memory, "sync")  # a lint finding is advice: fetch and push gate safety only
    assert synced.code == 0, synced.err
    assert (memory / rel).read_text() == text
    warned = qmem(memory, "validate", "--format", "gcc")
    assert warned.code == 0 and "warning: " in warned.out and rule in warned.out
    assert_clean_repo(memory)


QWEN_FOLDER = {  # what a Qwen Code 0.24 session leaves, lint findings and all
    "user/no-name.md": "---\ntype: user\n---\n\nPrefers terse answers\n",
    "feedback/title.md": "---\ntitle: Tests first\ndescription:\ntype: feedback\n---\n",
    "Pinned/rules.md": "---\nname: Rules\ndescription: by hand\ntype: project\n---\nAlways.\n",
    "notes.md": "---\nname: Notes\ndescription: root level\ntype: reference\n---\nSee x.\n",
    "logs/session.log": "not markdown\n",
}


def test_cli_adopting_a_qwen_folder_then_sync_is_never_stuck(tmp_path: Path, served: Path) -> None:
    """Issue 18: init on an existing Qwen folder, then sync, used to refuse every push for good
    because of a lint finding in history."""
    memory = tmp_path / "qwen" / "memory"
    for rel, text in QWEN_FOLDER.items():
        (memory / rel).parent.mkdir(parents=True, exist_ok=True)
        (memory / rel).write_text(text)
    url = str(served / "mem.git")
    adopted = qmem(memory, "init", "--remote", url)
    assert adopted.code == 0, adopted.err
    assert qmem(memory, "remember", "The deploy runs on fridays").code == 0
    synced = qmem(memory, "sync")
    assert synced.code == 0, synced.err
    assert git(served / "mem.git", "rev-parse", "main").strip() == head(memory)
    tree = git(memory, "ls-tree", "-r", "--name-only", "HEAD").split()
    assert {rel for rel in QWEN_FOLDER if rel.endswith(".md")} <= set(tree)
    assert "logs/session.log" not in tree and (memory / "logs" / "session.log").exists()
    other = tmp_path / "other" / "memory"
    assert qmem(other, "clone", url).code == 0
    assert (other / "Pinned" / "rules.md").read_text() == QWEN_FOLDER["Pinned/rules.md"]


def test_cli_clone_of_a_master_only_remote_is_refused(tmp_path: Path) -> None:
    bare = tmp_path / "m.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "master", str(bare)], check=True)
    work = tmp_path / "mw"
    subprocess.run(["git", "clone", "-q", str(bare), str(work)], check=True, capture_output=True)
    (work / "user").mkdir()
    (work / "user" / "m.md").write_text(
        "---\nname: On master\ndescription: On master\ntype: user\n---\n\nKept on master\n"
    )
    git(work, "add", ".")
    git(work, "commit", "-q", "-m", "master memory")
    git(work, "push", "-q", "origin", "master")
    result = qmem(tmp_path / "c" / "memory", "clone", str(bare))
    assert result.code == 1
    line = one_error_line(result.err)
    assert "no branch main" in line and "master" in line and "master:main" in line
    assert git(bare, "branch", "--list").split() == ["*", "master"]


@pytest.mark.parametrize("kind", ["path", "file", "git"])
def test_cli_pre_receive_refusal_is_exit_5_for_local_and_network_remotes(
    memory: Path, served: Path, daemon: GitDaemon, kind: str
) -> None:
    bare = served / "mem.git"
    url = {"path": str(bare), "file": f"file://{bare}", "git": daemon.url("mem.git")}[kind]
    assert qmem(memory, "remember", "A memory the shared store accepts").code == 0
    assert qmem(memory, "init", "--remote", url).code == 0
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'memory pushes are frozen' >&2\nexit 1\n")
    hook.chmod(0o755)
    before = git(bare, "rev-parse", "main").strip()
    assert qmem(memory, "remember", "A memory the hook refuses to take").code == 0
    result = qmem(memory, "sync")
    assert result.code == 5, result.err
    line = one_error_line(result.err)
    assert "the remote refused the push: pre-receive hook declined" in line
    if kind != "git":  # git daemon sends hook output as progress, not in the status
        assert "memory pushes are frozen" in line
    assert git(bare, "rev-parse", "main").strip() == before
    fsck_strict(bare)


def test_cli_small_things_agree(tmp_path: Path, memory: Path, served: Path) -> None:
    url = str(served / "mem.git")
    assert qmem(memory, "remember", "Machine A keeps its first memory").code == 0
    assert qmem(memory, "init", "--remote", url).code == 0
    other = tmp_path / "b" / "memory"
    other.mkdir(parents=True)  # --memory-dir must exist
    assert qmem(other, "remember", "Machine B brings one memory along").code == 0
    first = qmem(other, "clone", "--merge", url)
    assert first.code == 0 and first.out.startswith("Merged local memories with origin")
    again = qmem(other, "--json", "clone", "--merge", url)
    assert again.code == 0 and again.json()["mode"] == "up-to-date" and not again.json()["pushed"]
    assert qmem(other, "clone", "--merge", url).out.startswith("Already up to date with origin")
    assert qmem(memory, "sync").code == 0
    assert qmem(memory, "remember", "Machine A adds one more memory").code == 0
    assert qmem(other, "remember", "Machine B adds one more memory").code == 0
    assert qmem(other, "sync").code == 0
    merged = qmem(memory, "sync")
    assert merged.code == 0, merged.err
    subject = git(memory, "log", "-1", "--format=%s")
    counted = re.search(r"\((\d+) file\(s\) changed", subject)
    printed = re.search(r"(\d+) file\(s\) changed", merged.out)
    assert counted and printed and counted.group(1) == printed.group(1) == "1", (
        subject,
        merged.out,
    )
    bad = qmem(memory, "remote", "add", "backup", "ht!tp:::/x")
    assert bad.code == 2
    assert "invalid host name" in one_error_line(bad.err) and "hint:" in bad.err
    assert "backup" not in git(memory, "remote")


def test_imported_and_hand_written_memories_keep_their_age_on_every_machine(
    tmp_path: Path,
) -> None:
    """Qwen Code's own memories, written days before `init`, are not 'Saved today' after it:
    the import keeps their times (Qmem-Mtime trailers), and a clone gets the same times and the
    same MEMORY.md. A duplicate written by hand before a dream: the newer file survives."""
    import os
    import time

    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    first = tmp_path / "a" / "memory"
    (first / "user").mkdir(parents=True)
    old = int(time.time()) - 3 * 86_400
    (first / "user" / "terse.md").write_text(
        "---\nname: Terse\ndescription: terse\ntype: user\n---\n\nUser prefers terse answers.\n"
    )
    os.utime(first / "user" / "terse.md", (old, old))
    assert qmem(first, "init").code == 0
    assert (first / "user" / "terse.md").stat().st_mtime == old
    assert "Saved 3 days ago" in qmem(first, "recall", "terse answers").out
    assert qmem(first, "remote", "add", "origin", str(remote)).code == 0
    assert qmem(first, "sync").code == 0
    second = tmp_path / "b" / "memory"
    assert qmem(second, "clone", str(remote)).code == 0
    assert (second / "user" / "terse.md").stat().st_mtime == old
    assert (second / "MEMORY.md").read_text() == (first / "MEMORY.md").read_text()
    # two copies written by hand, the duplicate an hour older: dream deletes the older one
    copy = first / "user" / "terse-copy.md"
    copy.write_text((first / "user" / "terse.md").read_text())
    os.utime(first / "user" / "terse.md", (old + 7200, old + 7200))
    os.utime(copy, (old + 3600, old + 3600))
    assert qmem(first, "dream", "--force").code == 0
    assert sorted(p.name for p in (first / "user").iterdir()) == ["terse.md"]
    assert_clean_repo(first)


def test_a_failed_clone_takes_back_its_remote_so_a_retry_works(tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    source = tmp_path / "source" / "memory"
    assert qmem(source, "init").code == 0
    assert qmem(source, "remember", "--type", "user", "I prefer terse responses").code == 0
    assert qmem(source, "remote", "add", "origin", str(remote)).code == 0
    assert qmem(source, "sync").code == 0
    memory = tmp_path / "clone" / "memory"
    dead = qmem(memory, "clone", f"git://127.0.0.1:{closed_port()}/nothing.git")
    assert dead.code == 5
    assert qmem(memory, "--json", "remote", "list").json() == []
    retried = qmem(memory, "clone", str(remote))
    assert retried.code == 0, retried.err
    assert (memory / "user" / "i-prefer-terse-responses.md").is_file()
    assert (
        qmem(
            memory, "remember", "--type", "project", "The billing service deploys on Tuesdays"
        ).code
        == 0
    )
    subjects = git(memory, "log", "--format=%s")
    assert "edited by hand" not in subjects
    assert_clean_repo(memory)
