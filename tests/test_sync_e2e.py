"""Sync end to end: three machines converge over git daemon; the CLI contract of sync/clone/remote.

The convergence test drives the machines in process (fast) and checks the result the slow,
independent way: C git (``fsck --strict``, ``status``) and the real ``qmem-git`` process
(``index --check``).
"""

from __future__ import annotations

import random
import re
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
