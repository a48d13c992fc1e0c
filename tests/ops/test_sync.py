"""ops.sync over real servers on 127.0.0.1: git daemon, git http-backend with Basic auth.

Failure cases use real failures: a server killed mid-push, a port nobody listens on, a port
that accepts and never answers, a wrong password; C git checks every repo afterwards.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from servers import (
    GitDaemon,
    HttpGitServer,
    Machine,
    closed_port,
    fsck_strict,
    git_in,
    silent_server,
)

from qmem_git.errors import QmemError, RemoteError, UsageError
from qmem_git.ops import sync as ops_sync


@pytest.fixture
def clock() -> list[int]:
    return [1_700_000_000]


@pytest.fixture
def http(served: Path) -> Iterator[HttpGitServer]:
    server = HttpGitServer(served)
    yield server.start()
    server.stop()


def machines(tmp_path: Path, clock: list[int], *names: str, **env: str) -> list[Machine]:
    return [Machine(tmp_path, name, clock, **env) for name in names]


# --- remotes ------------------------------------------------------------------------------------


def test_remote_add_list_remove(tmp_path: Path, clock: list[int]) -> None:
    (m,) = machines(tmp_path, clock, "m")
    m.remember("Remotes are listed with redacted credentials")
    settings = m.settings
    added = ops_sync.add_remote(settings, "origin", "https://bob:ghp_secret@example.org/m.git")
    assert added.display_url == "https://***@example.org/m.git"
    ops_sync.add_remote(settings, "backup", "relative/backup.git")
    listed = {r.name: r.as_dict() for r in ops_sync.list_remotes(settings)}
    assert listed["origin"]["url"] == "https://***@example.org/m.git"
    assert listed["backup"]["url"] == os.path.join(settings.cwd, "relative/backup.git")
    assert "ghp_secret" not in str(listed)
    ops_sync.remove_remote(settings, "backup")
    assert [r.name for r in ops_sync.list_remotes(settings)] == ["origin"]
    with pytest.raises(UsageError, match="no remote named 'nope'"):
        ops_sync.remove_remote(settings, "nope")


def test_sync_without_remote_is_a_usage_error(tmp_path: Path, clock: list[int]) -> None:
    (m,) = machines(tmp_path, clock, "m")
    m.remember("A store without any remote configured")
    with pytest.raises(UsageError, match="has no remote"):
        m.sync()


# --- git daemon -------------------------------------------------------------------------------


def test_two_machines_over_git_daemon_merge_and_converge(
    tmp_path: Path, clock: list[int], daemon: GitDaemon, served: Path
) -> None:
    a, b = machines(tmp_path, clock, "a", "b")
    a.remember("Deploys go through the release train")
    assert a.connect(daemon.url("mem.git")).mode == "pushed"
    assert b.clone(daemon.url("mem.git")).mode == "cloned"
    a.remember("Machine A likes verbose test output")
    b.remember("Machine B pins node to version twenty")
    assert a.sync().action == "pushed"
    result = b.sync()
    assert result.action == "merged" and result.pushed and result.fetched == 1
    assert git_in(b.root, "rev-list", "--parents", "-n1", "HEAD").count(" ") == 2
    assert git_in(b.root, "log", "-1", "--format=%(trailers:key=Qmem-Op,valueonly)").strip() == (
        "merge"
    )
    assert a.sync().action == "fast-forward"
    assert a.head() == b.head() == git_in(served / "mem.git", "rev-parse", "main").strip()
    assert a.summaries() == b.summaries()
    assert len(a.summaries()) == 3
    fsck_strict(served / "mem.git")
    fsck_strict(a.root)


def test_concurrent_edits_of_one_memory_are_merged_per_entry(
    tmp_path: Path, clock: list[int], daemon: GitDaemon
) -> None:
    a, b = machines(tmp_path, clock, "a", "b")
    a.remember("Use pnpm for installs in every package")
    a.connect(daemon.url("mem.git"))
    b.clone(daemon.url("mem.git"))
    a.remember("Use pnpm for installs in every package", why="the lockfile is pnpm-lock.yaml")
    rel = b.path_of("Use pnpm for installs")
    assert rel is not None
    b.forget_path(rel)
    a.sync()
    result = b.sync()
    assert result.action == "merged"
    assert [n.kind for n in result.reconciled] == ["edit-kept-over-delete"]
    assert "Why: the lockfile is pnpm-lock.yaml" in (b.root / rel).read_text()
    trailers = git_in(b.root, "log", "-1", "--format=%(trailers:key=Qmem-Reconciled,valueonly)")
    assert trailers.strip() == f"edit-kept-over-delete {rel}"


def test_push_race_is_retried(
    tmp_path: Path, clock: list[int], daemon: GitDaemon, served: Path
) -> None:
    """A pre-receive hook moves main once, as another machine's push would between our fetch
    and our push; the sync fetches again, merges again and pushes."""
    a, b = machines(tmp_path, clock, "a", "b")
    a.remember("The remote moves during this push")
    a.connect(daemon.url("mem.git"))
    b.clone(daemon.url("mem.git"))
    b.remember("Machine B pushed while A was merging")
    b.sync(push=False)
    git_in(b.root, "push", "-q", str(served / "mem.git"), "HEAD:refs/heads/other")
    other = b.head()
    bare = served / "mem.git"
    hook = bare / "hooks" / "pre-receive"
    flag = bare / "race-once"
    flag.write_text("1")
    hook.write_text(
        f"#!/bin/sh\ncat >/dev/null\nif [ -f {flag} ]; then rm {flag}; "
        f"env -u GIT_QUARANTINE_PATH git update-ref refs/heads/main {other}; fi\nexit 0\n"
    )
    hook.chmod(hook.stat().st_mode | stat.S_IEXEC)
    a.remember("Machine A pushes into a moving remote")
    result = a.sync()
    assert result.attempts == 2 and result.pushed and result.merge_commit
    assert git_in(bare, "rev-parse", "main").strip() == a.head()
    assert "Machine B pushed while A was merging" in " ".join(a.summaries())
    fsck_strict(bare)


# --- smart HTTP with Basic auth ---------------------------------------------------------------


def test_http_credentials_from_url_are_used_and_never_shown(
    tmp_path: Path, clock: list[int], http: HttpGitServer
) -> None:
    (a,) = machines(tmp_path, clock, "a")
    a.remember("HTTP remotes work with a token in the URL")
    outcome = a.connect(http.url("mem.git", auth=True))
    assert outcome.mode == "pushed"
    assert http.password not in str(outcome.as_dict())
    assert outcome.result.url.startswith("http://***@127.0.0.1")


def test_http_credentials_from_environment(
    tmp_path: Path, clock: list[int], http: HttpGitServer
) -> None:
    a, b = machines(
        tmp_path, clock, "a", "b", QMEM_GIT_USERNAME=http.user, QMEM_GIT_TOKEN=http.password
    )
    a.remember("Tokens can come from QMEM_GIT_TOKEN")
    a.connect(http.url("mem.git"))
    assert b.clone(http.url("mem.git")).mode == "cloned"
    assert b.summaries() == a.summaries()


def test_http_credentials_from_the_git_credential_helper(
    tmp_path: Path, clock: list[int], http: HttpGitServer, isolated_home: Path
) -> None:
    store = tmp_path / "git-credentials"
    store.write_text(f"http://{http.user}:{http.password}@127.0.0.1%3a{http.port}\n")
    store.write_text(f"http://{http.user}:{http.password}@127.0.0.1:{http.port}\n")
    git_in(isolated_home, "config", "--global", "credential.helper", f"store --file={store}")
    (a,) = machines(tmp_path, clock, "a")
    a.remember("The credential helper answers the 401")
    assert a.connect(http.url("mem.git")).mode == "pushed"


def test_http_without_credentials_fails_with_exit_5_and_a_hint(
    tmp_path: Path, clock: list[int], http: HttpGitServer
) -> None:
    (a,) = machines(tmp_path, clock, "a")
    a.remember("No credentials configured for this remote")
    with pytest.raises(RemoteError) as caught:
        a.connect(http.url("mem.git"))
    assert caught.value.exit_code == 5
    assert "HTTP 401" in caught.value.message and "QMEM_GIT_TOKEN" in caught.value.hint


def test_wrong_password_is_401_and_redacted(
    tmp_path: Path, clock: list[int], http: HttpGitServer
) -> None:
    (a,) = machines(tmp_path, clock, "a")
    a.remember("A wrong password is reported without showing it")
    url = f"http://{http.user}:wrong-pass-123@127.0.0.1:{http.port}/mem.git"
    with pytest.raises(RemoteError) as caught:
        a.connect(url)
    assert "HTTP 401" in str(caught.value) and "wrong-pass-123" not in str(caught.value)
    assert "the token was rejected (HTTP 401)" in caught.value.message
    assert "was refused" in caught.value.hint and "set QMEM_GIT" not in caught.value.hint


def test_a_rejected_token_from_the_environment_is_named_as_rejected(
    tmp_path: Path, clock: list[int], http: HttpGitServer
) -> None:
    """With a token given, the hint must not tell the user to supply one."""
    (a,) = machines(tmp_path, clock, "a", QMEM_GIT_USERNAME=http.user, QMEM_GIT_TOKEN="expired-9")
    a.remember("An expired token is reported as rejected")
    with pytest.raises(RemoteError) as caught:
        a.connect(http.url("mem.git"))
    assert caught.value.exit_code == 5
    assert "the token was rejected (HTTP 401)" in caught.value.message
    assert "QMEM_GIT_TOKEN was refused" in caught.value.hint
    assert "expired-9" not in str(caught.value)


def test_server_dying_mid_push_leaves_everything_intact_and_next_sync_works(
    tmp_path: Path, clock: list[int], http: HttpGitServer, served: Path
) -> None:
    a, b = machines(
        tmp_path, clock, "a", "b", QMEM_GIT_USERNAME=http.user, QMEM_GIT_TOKEN=http.password
    )
    a.remember("Outage test: first memory")
    a.connect(http.url("mem.git"))
    b.clone(http.url("mem.git"))
    a.remember("Outage test: machine A memory")
    a.sync()
    b.remember("Outage test: machine B memory")
    http.stop()
    http.start(die_on_receive_pack=True)
    remote_before = git_in(served / "mem.git", "rev-parse", "main").strip()
    started = time.monotonic()
    with pytest.raises(RemoteError) as caught:
        b.sync()
    assert caught.value.exit_code == 5 and time.monotonic() - started < 20
    assert http.wait_dead() == 3  # it really died in the middle of the push
    merged = b.head()
    assert git_in(b.root, "status", "--porcelain") == ""
    assert len(b.summaries()) == 3  # the local merge commit is kept
    assert git_in(served / "mem.git", "rev-parse", "main").strip() == remote_before
    fsck_strict(served / "mem.git")
    http.start()
    result = b.sync()
    assert result.action == "pushed" and result.head == merged
    assert git_in(served / "mem.git", "rev-parse", "main").strip() == merged


# --- unreachable remotes ------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["http", "git"])
def test_refused_connection_is_exit_5_quickly(
    tmp_path: Path, clock: list[int], scheme: str
) -> None:
    (a,) = machines(tmp_path, clock, "a")
    a.remember("Nothing listens on the remote's port")
    ops_sync.add_remote(a.settings, "origin", f"{scheme}://u:tok@127.0.0.1:{closed_port()}/m.git")
    head = a.head()
    started = time.monotonic()
    with pytest.raises(RemoteError, match="connection refused") as caught:
        a.sync()
    assert time.monotonic() - started < 5
    assert "tok" not in str(caught.value)
    assert a.head() == head


@pytest.mark.parametrize("scheme", ["http", "git"])
def test_silent_server_times_out_within_the_bound(
    tmp_path: Path, clock: list[int], scheme: str
) -> None:
    (a,) = machines(tmp_path, clock, "a", QMEM_GIT_TIMEOUT="1")
    a.remember("The remote accepts and never answers")
    with silent_server() as port:
        ops_sync.add_remote(a.settings, "origin", f"{scheme}://127.0.0.1:{port}/m.git")
        started = time.monotonic()
        with pytest.raises(RemoteError, match="timed out"):
            a.sync()
        assert time.monotonic() - started < 5


def test_dead_local_remote_is_exit_5(tmp_path: Path, clock: list[int]) -> None:
    (a,) = machines(tmp_path, clock, "a")
    a.remember("The shared folder was unmounted")
    ops_sync.add_remote(a.settings, "origin", str(tmp_path / "gone.git"))
    with pytest.raises(RemoteError, match="no git repository"):
        a.sync()


# --- clone, init --remote, options --------------------------------------------------------------


def test_clone_refuses_a_store_with_memories_unless_merge(
    tmp_path: Path, clock: list[int], served: Path
) -> None:
    a, b = machines(tmp_path, clock, "a", "b")
    url = str(served / "mem.git")
    a.remember("Machine A started sharing first")
    a.connect(url)
    b.remember("Machine B had its own memory already")
    with pytest.raises(QmemError, match="already holds memories"):
        b.clone(url)
    outcome = b.clone(url, merge=True)
    assert outcome.mode == "merged" and outcome.result.pushed
    assert len(b.summaries()) == 2
    a.sync()
    assert a.summaries() == b.summaries() and a.head() == b.head()


def test_clone_into_a_freshly_initialised_store_adopts_the_history(
    tmp_path: Path, clock: list[int], served: Path
) -> None:
    a, b = machines(tmp_path, clock, "a", "b")
    url = str(served / "mem.git")
    a.remember("Shared memory to adopt on a new machine")
    a.connect(url)
    from qmem_git.ops.lifecycle import hook_command, init_memory

    init_memory(b.settings, hook_command(), b.now())  # `qmem-git init` ran first
    assert b.clone(url).mode == "cloned"
    assert b.head() == a.head()


def test_init_remote_on_an_empty_remote_pushes(
    tmp_path: Path, clock: list[int], served: Path
) -> None:
    (a,) = machines(tmp_path, clock, "a")
    outcome = a.connect(str(served / "mem.git"))  # `init --remote URL` on an empty store
    assert outcome.mode == "pushed"
    assert git_in(served / "mem.git", "rev-parse", "main").strip() == a.head()


def test_no_push_merges_locally_only(tmp_path: Path, clock: list[int], served: Path) -> None:
    a, b = machines(tmp_path, clock, "a", "b")
    url = str(served / "mem.git")
    a.remember("First memory before no-push")
    a.connect(url)
    b.clone(url)
    a.remember("Memory pushed by machine A")
    a.sync()
    b.remember("Memory kept local by machine B")
    remote_before = git_in(served / "mem.git", "rev-parse", "main").strip()
    result = b.sync(push=False)
    assert result.action == "merged" and not result.pushed
    assert git_in(served / "mem.git", "rev-parse", "main").strip() == remote_before
    assert b.sync().action == "pushed"
