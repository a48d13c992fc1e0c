"""store.sync and store.remotes against real repos: hostile histories crafted with C git
plumbing, rewound remotes, history mtimes checked against ``git log``, packing, URL handling."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from helpers_git import git_argv, gitdir, init_memory_git
from servers import Machine, fsck_strict, git_in, init_bare

from qmem_git.errors import QmemError, RemoteError, UnsafePath, UsageError
from qmem_git.store import remotes
from qmem_git.store.remotes import Credentials
from qmem_git.store.repo import Repository
from qmem_git.store.sync import Objects, last_change_times

DOC = "---\nname: {n}\ndescription: {n}\ntype: user\n---\n\n{n}\n"


@pytest.fixture
def clock() -> list[int]:
    return [1_700_000_000]


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    return init_bare(tmp_path / "remote.git")


@pytest.fixture
def pair(tmp_path: Path, remote: Path, clock: list[int]) -> tuple[Machine, Machine]:
    """Machine a pushed two memories; machine b cloned them."""
    a, b = Machine(tmp_path, "a", clock), Machine(tmp_path, "b", clock)
    a.remember("The release train leaves every Tuesday")
    a.connect(str(remote))
    a.remember("Use pnpm for every install in this repo")
    a.sync()
    b.clone(str(remote))
    return a, b


# --- URLs -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("/srv/mem.git", "local"),
        ("../mem.git", "local"),
        ("file:///srv/mem.git", "file"),
        ("git://host/mem.git", "git"),
        ("http://host/mem.git", "http"),
        ("https://tok@host/mem.git", "https"),
        ("ssh://git@host:2222/mem.git", "ssh"),
        ("git+ssh://host/mem.git", "ssh"),
        ("git@github.com:me/mem.git", "ssh"),
        ("host:mem.git", "ssh"),
        ("./a:b/mem.git", "local"),
    ],
)
def test_url_kinds(url: str, kind: str) -> None:
    assert remotes.url_kind(url) == kind


def test_unknown_scheme_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unsupported remote URL scheme 'ftp'"):
        remotes.url_kind("ftp://user:pw@host/x")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("https://user:tok@host/x.git", "https://***@host/x.git"),
        ("https://tok@host/x.git", "https://***@host/x.git"),
        (
            "failed: http://a:b@127.0.0.1:8/x and ssh://u:p@h/y",
            "failed: http://***@127.0.0.1:8/x and ssh://***@h/y",
        ),
        ("https://host/x.git", "https://host/x.git"),
        ("/srv/mem.git", "/srv/mem.git"),
    ],
)
def test_redaction(text: str, expected: str) -> None:
    assert remotes.redact(text) == expected


def test_redact_all_hides_known_secret_values_anywhere() -> None:
    assert remotes.redact_all("token s3cr3t rejected", ("s3cr3t",)) == "token *** rejected"


def test_normalize_url_makes_local_paths_absolute(tmp_path: Path) -> None:
    assert remotes.normalize_url("mem.git", str(tmp_path)) == str(tmp_path / "mem.git")
    assert remotes.normalize_url("git://h/x", str(tmp_path)) == "git://h/x"
    with pytest.raises(UsageError):
        remotes.normalize_url("ssh://-oProxyCommand=x/y", str(tmp_path))
    with pytest.raises(UsageError):
        remotes.normalize_url("  ", str(tmp_path))


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("ht!tp:::/x", "invalid host name 'ht!tp'"),
        ("https://exa mple.org/m.git", "invalid host name"),
        ("https:///m.git", "names no host"),
        ("https://host:80x/m.git", "invalid port"),
        ("ssh://git@host:22x/m.git", "invalid port"),
        ("git://ho$t/m.git", "invalid host name"),
        ("file://", "names no path"),
    ],
)
def test_normalize_url_refuses_malformed_urls_at_add_time(url: str, problem: str) -> None:
    with pytest.raises(UsageError, match=re.escape(problem)) as caught:
        remotes.normalize_url(url, "/tmp")
    assert caught.value.exit_code == 2 and "ssh://user@host/path" in caught.value.hint


@pytest.mark.parametrize(
    "url",
    [
        "git@github.com:me/mem.git",
        "my_alias:mem.git",
        "ssh://git@host:2222/mem.git",
        "https://[::1]:8443/mem.git",
        "http://127.0.0.1:8080/mem.git",
        "https://me:tok@example.org/mem.git",
        "file:///srv/mem.git",
    ],
)
def test_normalize_url_keeps_good_urls(url: str) -> None:
    assert remotes.normalize_url(url, "/tmp") == url


def test_split_http_credentials_decodes_and_strips() -> None:
    clean, user, password = remotes.split_http_credentials("https://me:p%40ss@host:8443/x.git")
    assert (clean, user, password) == ("https://host:8443/x.git", "me", "p@ss")


def test_ssh_transport_uses_system_ssh_without_prompts_and_with_a_timeout() -> None:
    """No sshd here: only the URL handling and the command dulwich will run are checked."""
    transport = remotes.open_transport(
        "ssh://git@example.org:2222/srv/mem.git", credentials=Credentials(), env={}, timeout=7
    )
    client = transport.client
    assert transport.path == "/srv/mem.git"
    assert (client.host, client.port, client.username) == ("example.org", 2222, "git")
    assert "BatchMode=yes" in client.ssh_command and "ConnectTimeout=7" in client.ssh_command
    scp = remotes.open_transport(
        "me@example.org:mem.git", credentials=Credentials(), env={}, timeout=3
    )
    assert (scp.client.host, scp.client.username, scp.path) == ("example.org", "me", "mem.git")


def test_git_ssh_command_replaces_ssh_and_keeps_our_options() -> None:
    env = {"GIT_SSH_COMMAND": "ssh -F '/my config' -i key"}
    client = remotes.open_transport(
        "ssh://h/m.git", credentials=Credentials(), env=env, timeout=3
    ).client
    assert client.ssh_command.startswith("ssh -F '/my config' -i key -o BatchMode=yes")
    with pytest.raises(UsageError, match="GIT_SSH_COMMAND"):
        remotes.open_transport(
            "ssh://h/m.git", credentials=Credentials(), env={"GIT_SSH_COMMAND": "ssh '"}, timeout=3
        )


def test_http_transport_takes_credentials_from_url_then_explicit() -> None:
    from_url = remotes.open_transport(
        "https://u:urltok@example.org/x.git",
        credentials=Credentials("envuser", "envtok"),
        env={},
        timeout=3,
    )
    assert from_url.secrets == ("urltok", "envtok")
    assert "urltok" not in from_url.client.get_url("")
    explicit = remotes.open_transport(
        "https://example.org/x.git", credentials=Credentials(None, "tok"), env={}, timeout=3
    )
    assert explicit.secrets == ("tok", "tok")


def test_missing_local_remote_is_a_remote_error(tmp_path: Path) -> None:
    with pytest.raises(RemoteError, match="no git repository"):
        remotes.open_transport(
            str(tmp_path / "nope.git"), credentials=Credentials(), env={}, timeout=1
        )


@pytest.mark.parametrize("target", ["work", "work/.git"])
def test_push_to_a_local_repo_with_a_work_tree_is_refused(tmp_path: Path, target: str) -> None:
    """Its .git folder too: C git's denyCurrentBranch would refuse, and its checkout would move."""
    subprocess.run(["git", "init", "-q", str(tmp_path / "work")], check=True)
    with pytest.raises(RemoteError, match="bare"):
        remotes.open_transport(
            str(tmp_path / target), credentials=Credentials(), env={}, timeout=1, for_push=True
        )


def test_remote_error_classifies_a_real_refused_connection() -> None:
    import socket

    from servers import closed_port

    try:
        socket.create_connection(("127.0.0.1", closed_port()), 1)
    except OSError as exc:
        error = remotes.remote_error(exc, "https://u:tok@127.0.0.1/x", "fetching from", ("tok",))
    assert error.exit_code == 5
    assert "connection refused" in error.message and "tok" not in str(error)


def test_remote_config_round_trip_is_readable_by_c_git(tmp_path: Path, clock: list[int]) -> None:
    machine = Machine(tmp_path, "m", clock)
    machine.remember("Remote config must be C git compatible")
    git_dir = str(gitdir(machine.root))
    remotes.add_remote(git_dir, "origin", "https://tok@example.org/x.git")
    assert git_in(machine.root, "config", "remote.origin.fetch").strip() == (
        "+refs/heads/main:refs/remotes/origin/main"
    )
    with pytest.raises(UsageError, match="already exists"):
        remotes.add_remote(git_dir, "origin", "/x")
    with pytest.raises(UsageError, match="invalid remote name"):
        remotes.add_remote(git_dir, "-bad", "/x")
    assert [r.as_dict() for r in remotes.list_remotes(git_dir)] == [
        {"name": "origin", "url": "https://***@example.org/x.git", "kind": "https"}
    ]
    remotes.remove_remote(git_dir, "origin")
    assert remotes.list_remotes(git_dir) == []
    with pytest.raises(UsageError, match="has no remote"):
        remotes.default_remote(git_dir)


# --- hostile histories ------------------------------------------------------------------------


def _evil_clone(tmp_path: Path, remote: Path) -> Path:
    work = tmp_path / "evil"
    subprocess.run(["git", "clone", "-q", str(remote), str(work)], check=True)
    return work


def _blob(work: Path, data: bytes) -> str:
    return git_in(work, "hash-object", "-w", "--stdin", stdin=data).strip()


def _commit_index(work: Path, *cacheinfo: str) -> None:
    for info in cacheinfo:
        git_in(work, "update-index", "--add", "--cacheinfo", info)
    git_in(work, "commit", "-q", "-m", "hostile")
    git_in(work, "push", "-q", "origin", "main")


def _push_tree(work: Path, extra_root_entries: list[str]) -> None:
    """A commit whose root tree is HEAD's plus raw entries C git's index would refuse."""
    entries = git_in(work, "ls-tree", "HEAD").splitlines() + extra_root_entries
    tree = git_in(work, "mktree", stdin="\n".join(entries) + "\n").strip()
    commit = git_in(work, "commit-tree", tree, "-p", "HEAD", "-m", "hostile").strip()
    git_in(work, "push", "-q", "origin", f"{commit}:refs/heads/main")


def _sub_tree(work: Path, name: str, data: bytes) -> str:
    blob = _blob(work, data)
    return git_in(work, "mktree", stdin=f"100644 blob {blob}\t{name}\n").strip()


HOSTILE = {
    "symlink": ("user/link.md", "symlink"),
    "gitlink": ("user/sub", "submodule"),
    "dot-git": (".git/", "git metadata"),
    "device-name": ("user/con.md", "Windows device name"),
    "case-collision": ("user/a.md", "collides with user/A.md"),
    "big-blob": ("user/big.md", "the limit is 262,144"),
    "executable": ("user/run.md", "executable"),
    "conflict-markers": ("user/merged.md", "conflict marker"),
    "secret": ("user/key.md", "secret"),
}


def _craft(case: str, work: Path) -> None:
    doc = DOC.format(n="Hostile memory entry").encode()
    head = git_in(work, "rev-parse", "HEAD").strip()
    if case == "symlink":
        _commit_index(work, f"120000,{_blob(work, b'../../etc/passwd')},user/link.md")
    elif case == "gitlink":
        _commit_index(work, f"160000,{head},user/sub")
    elif case == "dot-git":
        _push_tree(work, [f"040000 tree {_sub_tree(work, 'config', b'[core]')}\t.git"])
    elif case == "device-name":
        _commit_index(work, f"100644,{_blob(work, doc)},user/con.md")
    elif case == "case-collision":
        _commit_index(
            work, f"100644,{_blob(work, doc)},user/A.md", f"100644,{_blob(work, doc)},user/a.md"
        )
    elif case == "big-blob":
        big = doc + b"x" * (300 * 1024)
        _commit_index(work, f"100644,{_blob(work, big)},user/big.md")
    elif case == "executable":
        _commit_index(work, f"100755,{_blob(work, doc)},user/run.md")
    elif case == "outside-type-folders":
        _push_tree(work, [f"040000 tree {_sub_tree(work, 'x.md', doc)}\tnotes"])
    elif case == "conflict-markers":
        text = doc + b"<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> other\n"
        _commit_index(work, f"100644,{_blob(work, text)},user/merged.md")
    elif case == "not-a-document":
        plain = _blob(work, b"just text\n")
        _commit_index(work, f"100644,{plain},user/plain.md")
    elif case in TEXTS:
        path, text = TEXTS[case]
        _commit_index(work, f"100644,{_blob(work, text.encode())},{path}")


# documents parse_document reads, but validate refuses (each an error-level rule)
TEXTS = {
    "yaml-alias": (
        "user/alias.md",
        "---\nname: &n Alias bomb\ndescription: *n\ntype: user\n---\n\nAliased fact\n",
    ),
    "yaml-python-tag": (
        "user/tag.md",
        "---\nname: Tagged\ndescription: !!python/object/apply:os.system [id]\n"
        "type: user\n---\n\nTagged fact\n",
    ),
    "secret": ("user/key.md", DOC.format(n="Deploy key AKIAIOSFODNN7EXAMPLE for the bucket")),
    "body-empty": ("user/empty.md", "---\nname: Empty\ndescription: Empty\ntype: user\n---\n"),
}


# what the agent accepts (Qwen Code 0.24 lists or keeps them): style, never a reason to refuse
ACCEPTED = ("outside-type-folders", "not-a-document", "yaml-alias", "yaml-python-tag", "body-empty")


@pytest.mark.parametrize("case", ACCEPTED)
def test_style_in_the_remotes_history_is_fetched_and_never_blocks_a_push(
    case: str, tmp_path: Path, remote: Path, pair: tuple[Machine, Machine]
) -> None:
    """Fetch and push gate safety only (issue 18): a lint finding in history never wedges a
    sync, in either direction."""
    _, b = pair
    _craft(case, _evil_clone(tmp_path, remote))
    b.sync()
    b.remember("The staging cluster deploys from branch release-7")
    assert b.sync().action == "pushed"
    assert git_in(remote, "rev-parse", "main") == git_in(b.root, "rev-parse", "HEAD")


def _snapshot(machine: Machine) -> tuple[str, dict[str, str], list[str], list[str], str]:
    git_dir = gitdir(machine.root)
    packs = sorted(os.listdir(git_dir / "objects" / "pack"))
    tracking = git_in(machine.root, "rev-parse", "refs/remotes/origin/main").strip()
    return machine.head(), machine.files(), packs, sorted(os.listdir(git_dir)), tracking


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_history_is_refused_naming_the_path_and_nothing_changes(
    case: str, tmp_path: Path, remote: Path, pair: tuple[Machine, Machine]
) -> None:
    _, b = pair
    _craft(case, _evil_clone(tmp_path, remote))
    before = _snapshot(b)
    with pytest.raises(UnsafePath) as caught:
        b.sync()
    path, problem = HOSTILE[case]
    assert path in caught.value.message and problem in caught.value.message
    assert caught.value.exit_code == 1
    assert _snapshot(b) == before
    assert not (b.root / "user" / "link.md").exists()


@pytest.mark.parametrize(
    ("rel", "text", "problem"),
    [
        ("user/aux.md", DOC.format(n="Named like a Windows device"), "Windows device name"),
        ("user/key.md", DOC.format(n="Deploy key AKIAIOSFODNN7EXAMPLE for the bucket"), "secret"),
    ],
)
def test_a_hand_made_commit_other_machines_would_refuse_is_not_pushed(
    rel: str, text: str, problem: str, remote: Path, pair: tuple[Machine, Machine]
) -> None:
    """A commit made with --no-verify would stop every other machine's sync at the remote."""
    a, b = pair
    b.remember("The staging cluster deploys from branch release-7")
    b.sync()  # the remote moved on: a has to merge before it could push
    remote_before = git_in(remote, "rev-parse", "main")
    path = a.root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    git_in(a.root, "add", "-A")
    git_in(a.root, "-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "by hand")
    before = a.head()
    with pytest.raises((UnsafePath, UsageError)) as caught:
        a.sync()
    message = caught.value.message
    named = rel if rel.startswith("user/") else rel.split("/")[0] + "/"  # folders: the folder
    assert message.startswith(f"refusing to push: {named}: ") and problem in message
    assert caught.value.hint
    assert git_in(remote, "rev-parse", "main") == remote_before
    assert a.head() == before  # refused before merging: nothing changed here
    assert b.sync().action == "up-to-date"


def test_what_the_remote_already_has_does_not_block_a_push(
    remote: Path, pair: tuple[Machine, Machine]
) -> None:
    """A file C git pushed to the remote earlier is the remote's problem, not a reason to
    refuse every later qmem commit that leaves it as it is."""
    a, _ = pair
    (a.root / "README.txt").write_text("not a memory\n")
    git_in(a.root, "add", "README.txt")
    git_in(a.root, "-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "by hand")
    git_in(a.root, "push", "-q", str(remote), "main")
    a.remember("The staging cluster deploys from branch release-7")
    assert a.sync().action == "pushed"
    assert git_in(remote, "rev-parse", "main") == git_in(a.root, "rev-parse", "HEAD")


def test_a_merge_of_two_spellings_of_one_name_keeps_both_under_two_names(
    remote: Path, pair: tuple[Machine, Machine]
) -> None:
    """Each side is fine alone; their merge would hold user/Proxy.md and user/proxy.md: the
    later spelling moves to user/proxy-2.md (issue 21: that merge used to wedge every sync)."""
    from qmem_git.core.names import find_case_collisions

    a, b = pair
    for machine, name in ((a, "Proxy"), (b, "proxy")):
        path = machine.root / "user" / f"{name}.md"
        path.parent.mkdir(exist_ok=True)
        path.write_text(DOC.format(n=f"The proxy host is {name}.corp.example"))
        machine.remember(f"The {name} fact was written by hand into its own file")
    a.sync()
    result = b.sync()
    assert result.pushed and "renamed-case-clash" in [n.kind for n in result.reconciled]
    paths = git_in(remote, "ls-tree", "-r", "--name-only", "main").split()
    assert find_case_collisions(paths) == []
    assert {"user/Proxy.md", "user/proxy-2.md"} <= set(paths)
    assert "proxy.corp.example" in (b.root / "user" / "proxy-2.md").read_text()
    assert a.sync().action == "fast-forward"
    assert git_in(remote, "rev-parse", "main") == git_in(a.root, "rev-parse", "HEAD")
    fsck_strict(remote)


def test_malformed_object_is_refused_like_fsck(
    tmp_path: Path, remote: Path, pair: tuple[Machine, Machine]
) -> None:
    """A tree whose entries are out of order: git fsck calls it treeNotSorted."""
    _, b = pair
    work = _evil_clone(tmp_path, remote)
    blob = _blob(work, DOC.format(n="Unsorted tree entry").encode())
    raw = b"".join(b"100644 " + name + b"\0" + bytes.fromhex(blob) for name in (b"b.md", b"a.md"))
    user = git_in(work, "hash-object", "-t", "tree", "-w", "--literally", "--stdin", stdin=raw)
    entries = [e for e in git_in(work, "ls-tree", "HEAD").splitlines() if not e.endswith("\tuser")]
    entries.append(f"040000 tree {user.strip()}\tuser")
    tree = git_in(work, "mktree", stdin="\n".join(entries) + "\n").strip()
    commit = git_in(work, "commit-tree", tree, "-p", "HEAD", "-m", "unsorted").strip()
    git_in(work, "push", "-q", "origin", f"{commit}:refs/heads/main")
    before = _snapshot(b)
    with pytest.raises(UnsafePath, match="malformed"):
        b.sync()
    assert _snapshot(b) == before


def test_a_commit_with_its_headers_out_of_order_is_refused_like_fsck(
    tmp_path: Path, remote: Path, pair: tuple[Machine, Machine]
) -> None:
    """Committer before author parses, but git fsck calls it missingAuthor: the commit rules
    still run on commits parsed once."""
    _, b = pair
    work = _evil_clone(tmp_path, remote)
    tree = git_in(work, "rev-parse", "HEAD^{tree}").strip()
    parent = git_in(work, "rev-parse", "HEAD").strip()
    who = "Evil <evil@example.org> 1700000000 +0000"
    raw = f"tree {tree}\nparent {parent}\ncommitter {who}\nauthor {who}\n\nswapped\n"
    commit = git_in(
        work, "hash-object", "-t", "commit", "-w", "--literally", "--stdin", stdin=raw
    ).strip()
    git_in(work, "push", "-q", "--no-verify", "origin", f"{commit}:refs/heads/main")
    before = _snapshot(b)
    with pytest.raises(UnsafePath, match=f"object {commit} is malformed"):
        b.sync()
    assert _snapshot(b) == before


# --- rewound remote ---------------------------------------------------------------------------


def test_rewound_remote_is_refused_unless_forced(
    remote: Path, pair: tuple[Machine, Machine]
) -> None:
    _, b = pair
    first = git_in(remote, "rev-list", "--max-parents=0", "main").strip()
    git_in(remote, "update-ref", "refs/heads/main", first)  # force-push to the root commit
    b.remember("Local memory made after the rewind")
    before = _snapshot(b)
    with pytest.raises(QmemError, match="rewound or force-pushed") as caught:
        b.sync()
    assert caught.value.exit_code == 1 and "--force" in caught.value.hint
    assert _snapshot(b) == before
    result = b.sync(force=True)
    assert result.pushed and result.action == "pushed"
    assert git_in(remote, "rev-parse", "main").strip() == b.head()
    assert "Use pnpm for every install in this repo" in b.summaries()
    fsck_strict(remote)


# --- time from history ------------------------------------------------------------------------


def test_history_times_match_git_log_on_a_merged_history(
    tmp_path: Path, remote: Path, clock: list[int], pair: tuple[Machine, Machine]
) -> None:
    a, b = pair
    c = Machine(tmp_path, "c", clock)
    c.clone(str(remote))
    a.remember("Alpha machine prefers dark mode in every editor")
    b.remember("Beta machine runs the integration tests nightly")
    c.remember("Gamma machine owns the deploy credentials rotation")
    for machine in (a, b, c, a, b):
        machine.sync()
    repo = Repository(str(b.root))
    objects = Objects(repo.objects)
    paths = [p for p in git_in(b.root, "ls-files").split() if p]
    times = last_change_times(objects, b.head(), paths)
    for path in paths:
        expected = int(git_in(b.root, "log", "-1", "--format=%ct", "--", path).strip())
        assert times[path] == expected, path
        if path != "MEMORY.md":
            assert int((b.root / path).stat().st_mtime) == expected, path
    assert a.head() == b.head()
    assert a.mtimes() == b.mtimes()
    assert (a.root / "MEMORY.md").read_bytes() == (b.root / "MEMORY.md").read_bytes()


def test_clone_gives_files_their_history_times_and_the_same_index(
    pair: tuple[Machine, Machine],
) -> None:
    a, b = pair
    assert b.head() == a.head()
    assert b.mtimes() == a.mtimes()
    assert (b.root / "MEMORY.md").read_bytes() == (a.root / "MEMORY.md").read_bytes()
    assert git_in(b.root, "status", "--porcelain") == ""


# --- housekeeping -----------------------------------------------------------------------------


def _loose_and_packs(root: Path) -> tuple[int, int]:
    counts = dict(line.split(": ") for line in git_in(root, "count-objects", "-v").splitlines())
    return int(counts["count"]), int(counts["packs"])


def test_sync_packs_loose_objects_once_they_pile_up_and_removes_stale_quarantines(
    pair: tuple[Machine, Machine], tmp_path: Path
) -> None:
    """A commit's few loose objects stay loose (packing them cost three disk flushes per push);
    from LOOSE_OBJECTS_TO_PACK on, a sync packs them all, as git's gc.auto does (later)."""
    from qmem_git.store.sync import LOOSE_OBJECTS_TO_PACK

    a, _ = pair
    stale = gitdir(a.root) / "qmem-incoming-deadbeef"
    (stale / "pack").mkdir(parents=True)
    a.remember("Packing waits until loose objects pile up")
    assert a.sync().packed == 0
    assert not stale.exists()
    loose, _ = _loose_and_packs(a.root)
    assert 0 < loose < LOOSE_OBJECTS_TO_PACK
    extra = tmp_path / "extra"
    extra.mkdir()
    for n in range(LOOSE_OBJECTS_TO_PACK):
        (extra / f"{n}.txt").write_text(f"loose object {n}\n")
    names = "".join(f"{path}\n" for path in sorted(extra.iterdir()))
    git_in(a.root, "hash-object", "-w", "--stdin-paths", stdin=names)
    a.remember("Then one sync packs every loose object")
    assert a.sync().packed >= LOOSE_OBJECTS_TO_PACK + loose
    loose, packs = _loose_and_packs(a.root)
    assert loose == 0 and packs >= 1
    fsck_strict(a.root)


def test_packs_piling_up_are_folded_without_rewriting_the_history_pack(tmp_path: Path) -> None:
    """Past REPACK_THRESHOLD packs, the small ones (one per fetch) become one, at a sync that
    packs no loose object too; the largest (a clone's history) is neither read nor rewritten,
    and nothing is lost."""
    from qmem_git.store.sync import REPACK_THRESHOLD, pack_objects

    work = tmp_path / "w"
    git_in(tmp_path, "init", "-q", "-b", "main", f"--separate-git-dir={work}.git", str(work))
    for n in range(50):
        (work / f"{n}.md").write_text(f"history {n}\n")
    git_in(work, "add", "-A")
    git_in(work, "commit", "-q", "-m", "history")
    git_in(work, "repack", "-a", "-d", "-q")
    pack_dir = gitdir(work) / "objects" / "pack"
    (history,) = pack_dir.glob("*.pack")
    inode = history.stat().st_ino
    blobs = []
    for n in range(REPACK_THRESHOLD + 2):  # one small pack each, as syncs leave them
        blobs.append(git_in(work, "hash-object", "-w", "--stdin", stdin=f"sync {n}\n").strip())
        git_in(work, "pack-objects", "-q", str(pack_dir / "pack"), stdin=blobs[-1] + "\n")
        git_in(work, "prune-packed")
    blobs.append(git_in(work, "hash-object", "-w", "--stdin", stdin="still loose\n").strip())
    assert len(list(pack_dir.glob("*.pack"))) == REPACK_THRESHOLD + 3
    with Repository(str(work)) as repo:  # fewer loose objects than asked for: packs folded only
        assert pack_objects(repo, minimum=2) == 0
    assert len(list(pack_dir.glob("*.pack"))) == 2
    git_in(work, "cat-file", "-e", blobs[-1])  # still loose
    for n in range(REPACK_THRESHOLD + 1):  # and they pile up again
        blobs.append(git_in(work, "hash-object", "-w", "--stdin", stdin=f"again {n}\n").strip())
        git_in(work, "pack-objects", "-q", str(pack_dir / "pack"), stdin=blobs[-1] + "\n")
        git_in(work, "prune-packed")
    with Repository(str(work)) as repo:
        assert pack_objects(repo) == 1
    packs = sorted(pack_dir.glob("*.pack"))
    assert len(packs) == 2, packs
    assert history in packs and history.stat().st_ino == inode
    assert not [p for p in pack_dir.iterdir() if p.suffix not in (".pack", ".idx", ".rev")]
    for sha in blobs:
        git_in(work, "cat-file", "-e", sha)
    counts = dict(line.split(": ") for line in git_in(work, "count-objects", "-v").splitlines())
    assert counts["count"] == "0"
    fsck_strict(work)


def test_dry_run_fetches_nothing_into_the_repository(
    remote: Path, pair: tuple[Machine, Machine]
) -> None:
    a, b = pair
    a.remember("Dry runs must not change the local repository")
    a.sync()
    before = _snapshot(b)
    result = b.sync(dry_run=True)
    assert result.action == "fast-forward" and result.dry_run
    assert "MEMORY.md" in result.changed_paths
    assert _snapshot(b) == before
    assert b.sync().action == "fast-forward"


# --- a remote without main ----------------------------------------------------------------------


def _master_only(tmp_path: Path) -> Path:
    """A bare repository whose only branch is ``master``, holding one valid memory."""
    bare = tmp_path / "master.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "master", str(bare)], check=True)
    work = tmp_path / "master-work"
    subprocess.run(["git", "clone", "-q", str(bare), str(work)], check=True, capture_output=True)
    (work / "user").mkdir()
    (work / "user" / "m.md").write_text(DOC.format(n="Memory kept on master"))
    git_in(work, "add", ".")
    git_in(work, "commit", "-q", "-m", "on master")
    git_in(work, "push", "-q", "origin", "master")
    return bare


def test_clone_of_a_remote_without_main_is_refused_naming_its_branches(
    tmp_path: Path, clock: list[int]
) -> None:
    bare = _master_only(tmp_path)
    before = git_in(bare, "for-each-ref").strip()
    m = Machine(tmp_path, "m", clock)
    with pytest.raises(QmemError) as caught:
        m.clone(str(bare))
    assert caught.value.exit_code == 1
    assert "has no branch main (its branches: master)" in caught.value.message
    assert f"git push {bare} master:main" in caught.value.hint
    assert git_in(bare, "for-each-ref").strip() == before  # no unrelated main pushed beside it
    assert m.files() == {}


def test_sync_to_a_remote_without_main_is_refused_and_changes_nothing(
    tmp_path: Path, clock: list[int], pair: tuple[Machine, Machine]
) -> None:
    a, _ = pair
    bare = _master_only(tmp_path)
    remotes.add_remote(str(gitdir(a.root)), "other", str(bare))
    head, files = a.head(), a.files()
    with pytest.raises(QmemError, match="its branches: master"):
        a.sync("other")
    assert git_in(bare, "branch", "--list").split() == ["*", "master"]
    assert (a.head(), a.files()) == (head, files)


# --- MEMORY.md after a fast-forward -------------------------------------------------------------


def _plain_git_memory(tmp_path: Path, remote: Path, name: str) -> str:
    """Commit a memory with C git on the remote's main without touching MEMORY.md."""
    work = tmp_path / f"plain-{name}"
    if not work.exists():
        subprocess.run(["git", "clone", "-q", str(remote), str(work)], check=True)
    git_in(work, "pull", "-q", "origin", "main")
    (work / "user").mkdir(exist_ok=True)
    (work / "user" / f"{name}.md").write_text(DOC.format(n=f"Plain git memory {name}"))
    git_in(work, "add", ".")
    git_in(work, "commit", "-q", "-m", f"hand-made {name}")
    git_in(work, "push", "-q", "origin", "main")
    return git_in(work, "rev-parse", "HEAD").strip()


def _index_check(machine: Machine) -> int:
    from clihelpers import qmem

    return qmem(machine.root, "index", "--check", env=machine.env).code


def test_fast_forward_to_a_stale_memory_index_commits_and_pushes_a_rebuilt_one(
    tmp_path: Path, remote: Path, pair: tuple[Machine, Machine]
) -> None:
    _, b = pair
    plain = _plain_git_memory(tmp_path, remote, "one")
    result = b.sync()
    assert result.action == "fast-forward" and result.pushed
    assert result.index_commit == b.head() == git_in(remote, "rev-parse", "main").strip()
    assert git_in(b.root, "rev-parse", "HEAD~1").strip() == plain
    assert "Qmem-Op: index" in git_in(b.root, "log", "-1", "--format=%B")
    assert git_in(b.root, "diff", "--name-only", "HEAD~1", "HEAD").split() == ["MEMORY.md"]
    assert "user/one.md" in (b.root / "MEMORY.md").read_text()
    assert _index_check(b) == 0
    assert git_in(b.root, "status", "--porcelain") == ""
    assert b.sync().action == "up-to-date"  # the rebuilt index is current: nothing more
    fsck_strict(remote)


def test_fast_forward_without_push_keeps_the_index_commit_local(
    tmp_path: Path, remote: Path, pair: tuple[Machine, Machine]
) -> None:
    _, b = pair
    plain = _plain_git_memory(tmp_path, remote, "two")
    result = b.sync(push=False)
    assert result.index_commit == b.head() and not result.pushed
    assert git_in(remote, "rev-parse", "main").strip() == plain
    assert _index_check(b) == 0
    assert b.sync().action == "pushed"


def test_fast_forward_to_a_current_index_makes_no_commit(
    remote: Path, pair: tuple[Machine, Machine]
) -> None:
    a, b = pair
    a.remember("Indexes made by qmem-git are already current")
    a.sync()
    result = b.sync()
    assert result.action == "fast-forward" and result.index_commit is None
    assert b.head() == a.head()


def test_clone_of_a_stale_memory_index_rebuilds_and_pushes_it(
    tmp_path: Path, remote: Path, clock: list[int], pair: tuple[Machine, Machine]
) -> None:
    plain = _plain_git_memory(tmp_path, remote, "three")
    c = Machine(tmp_path, "c", clock)
    outcome = c.clone(str(remote))
    assert outcome.mode == "cloned" and outcome.result.pushed
    assert outcome.result.index_commit == c.head() == git_in(remote, "rev-parse", "main").strip()
    assert git_in(c.root, "rev-parse", "HEAD~1").strip() == plain
    assert _index_check(c) == 0
    assert git_in(c.root, "status", "--porcelain") == ""


# --- a merge whose result equals our side ------------------------------------------------------


def test_merge_that_changes_nothing_on_our_side_keeps_our_tree(
    remote: Path, pair: tuple[Machine, Machine]
) -> None:
    """Both machines made the same change: the merge commit must not have an empty tree."""
    a, b = pair
    a.remember("Both machines learn the very same durable fact")
    b.remember("Both machines learn the very same durable fact")
    assert a.head() != b.head()
    a.sync()
    result = b.sync()
    assert result.merge_commit == b.head()
    tree = git_in(b.root, "ls-tree", "-r", "--name-only", "HEAD").split()
    assert tree == git_in(b.root, "ls-tree", "-r", "--name-only", "HEAD^1").split()
    assert len(tree) == 4  # MEMORY.md and three memories
    assert git_in(b.root, "status", "--porcelain") == ""
    a.sync()
    assert sorted(a.files()) == sorted(b.files()) and len(a.files()) == 3
    fsck_strict(remote)


# --- a memory file and a folder of the same name -------------------------------------------------


def _turn_into_folder(machine: Machine, rel: str) -> None:
    """Replace the memory file ``rel`` by a folder holding one memory; the next writer commits."""
    path = machine.root / rel
    path.unlink()
    path.mkdir()
    (path / "inner.md").write_text(DOC.format(n="inner"), encoding="utf-8")
    machine.remember(f"Folder switch noted on machine {machine.name}")


def _turn_back_into_a_file(machine: Machine, rel: str) -> None:
    """Undo :func:`_turn_into_folder` by hand and commit it."""
    (machine.root / rel / "inner.md").unlink()
    (machine.root / rel).rmdir()
    (machine.root / rel).write_text(DOC.format(n="back"), encoding="utf-8")
    machine.remember("A file is back where the folder was")


def _shared_folder(pair: tuple[Machine, Machine]) -> str:
    """b turned a memory into a folder of the same name; both machines now have the folder."""
    a, b = pair
    rel = _one_memory(b)
    _turn_into_folder(b, rel)
    b.sync()
    a.sync()
    return rel


def _one_memory(machine: Machine) -> str:
    rel = machine.path_of("The release train leaves every Tuesday")
    assert rel is not None
    return rel


def test_fast_forward_replaces_a_file_by_a_folder_of_the_same_name(
    remote: Path, pair: tuple[Machine, Machine]
) -> None:
    a, b = pair
    rel = _one_memory(b)
    _turn_into_folder(b, rel)
    b.sync()
    assert a.sync().action == "fast-forward"
    assert (a.root / rel).is_dir() and f"{rel}/inner.md" in a.files()
    assert git_in(a.root, "status", "--porcelain") == ""
    fsck_strict(a.root)


def test_fast_forward_replaces_a_folder_by_a_file_of_the_same_name(
    remote: Path, pair: tuple[Machine, Machine]
) -> None:
    a, b = pair
    rel = _shared_folder(pair)
    _turn_back_into_a_file(a, rel)
    a.sync()
    assert b.sync().action == "fast-forward"
    assert (b.root / rel).is_file() and "back" in (b.root / rel).read_text(encoding="utf-8")
    assert git_in(b.root, "status", "--porcelain") == ""


@pytest.mark.parametrize("untracked", ["draft.txt", "empty-folder/"])
def test_a_folder_holding_untracked_work_blocks_the_checkout_and_nothing_changes(
    remote: Path, pair: tuple[Machine, Machine], untracked: str
) -> None:
    a, b = pair
    rel = _shared_folder(pair)
    if untracked.endswith("/"):
        (a.root / rel / untracked).mkdir()
    else:
        (a.root / rel / untracked).write_text("not a memory yet", encoding="utf-8")
    _turn_back_into_a_file(b, rel)
    b.sync()
    head = a.head()
    with pytest.raises(UnsafePath, match=f"cannot write {rel}: {rel} in the memory folder is a"):
        a.sync()
    assert a.head() == head and (a.root / rel / "inner.md").is_file()
    assert (a.root / rel / untracked).exists()
    fsck_strict(a.root)


def _newest_pack_objects(repo: Path) -> int:
    packs = sorted((repo / "objects" / "pack").glob("*.idx"), key=lambda p: p.stat().st_mtime_ns)
    shown = subprocess.run(
        ["git", "show-index"], stdin=packs[-1].open("rb"), capture_output=True, check=True
    )
    return len(shown.stdout.splitlines())


def _loose_objects(repo: Path) -> set[str]:
    folders = (d for d in (repo / "objects").iterdir() if len(d.name) == 2)
    return {d.name + f.name for d in folders for f in d.iterdir()}


def test_a_push_sends_only_what_the_remote_lacks_and_what_it_dropped(
    remote: Path, pair: tuple[Machine, Machine]
) -> None:
    """A memory forgotten and saved again is pushed whole: its blob is no longer in the
    remote's tip tree (only further back), and what is sent is that commit's, not history."""
    a, b = pair
    for n in range(30):  # a longer history the push must not walk or resend
        a.remember(f"The build cache lives in bucket artifacts-{n:02d} for team {n}")
    a.sync()
    rel = next(p for p in a.files() if "pnpm" in p)
    text = a.files()[rel]
    a.forget_path(rel)
    a.sync()
    a.remember("Use pnpm for every install in this repo")
    assert a.files()[rel] == text  # the very blob the remote had three commits ago
    before = _loose_objects(remote)
    assert _newest_pack_objects(remote) >= 30  # the first push: a pack (over receive's limit)
    assert a.sync().action == "pushed"
    sent = _loose_objects(remote) - before  # fewer than 100 objects: loose, as C git's push
    assert 3 <= len(sent) <= 5  # commit, root and user trees, the blob, MEMORY.md
    fsck_strict(remote)
    assert b.sync().action == "fast-forward"
    assert b.files()[rel] == text
    fsck_strict(b.root)


def test_a_lock_left_on_the_remote_main_is_named_and_a_brief_one_waited_for(
    remote: Path, pair: tuple[Machine, Machine]
) -> None:
    """A push killed while holding the remote's refs/heads/main.lock leaves it behind: say so
    (not "the server is unreachable"), change nothing; a push that holds it briefly is waited
    for."""
    import threading

    a, _ = pair
    lock = remote / "refs" / "heads" / "main.lock"
    lock.write_text("")
    a.remember("The staging cluster deploys from branch release-7")
    before = git_in(remote, "rev-parse", "main")
    with pytest.raises(RemoteError) as caught:
        a.sync()
    assert caught.value.message.startswith("the remote's main is locked: cannot lock ref")
    assert str(lock) in caught.value.message and "delete that .lock file" in caught.value.hint
    assert git_in(remote, "rev-parse", "main") == before and lock.exists()

    timer = threading.Timer(0.4, lock.unlink)  # another push lets go of it meanwhile
    timer.start()
    try:
        assert a.sync().action == "pushed"
    finally:
        timer.join()
    assert git_in(remote, "rev-parse", "main").strip() == a.head()
    fsck_strict(remote)


def test_an_annotated_tag_on_the_remote_does_not_stop_a_push(
    remote: Path, pair: tuple[Machine, Machine]
) -> None:
    """A remote advertises its tags beside main; one that points at a commit we have is a
    tag object, not a commit, among what it has."""
    a, b = pair
    git_in(a.root, "tag", "-a", "v1", "-m", "release")
    git_in(a.root, "push", "-q", str(remote), "v1")
    a.remember("Prefer pytest over unittest in this repository")
    assert a.sync().action == "pushed"
    assert git_in(remote, "rev-parse", "main").strip() == a.head()
    fsck_strict(remote)
    assert b.sync().action == "fast-forward"


def test_ancestry_is_exact_when_committer_clocks_disagree(tmp_path: Path) -> None:
    """B -> X on main; a side branch from B gets Q (dated 2027), main gets P after X (dated
    2001), and Y merges them. X is an ancestor of Y (git merge-base --is-ancestor agrees), so
    a sync that last saw X must fast-forward to Y, not call the remote rewound."""
    from qmem_git.store.sync import is_ancestor, merge_base, relation

    work = tmp_path / "w"
    init_memory_git(work)

    def commit(name: str, date: str) -> str:
        (work / f"{name}.md").write_text(name)
        git_in(work, "add", f"{name}.md")
        env_date = f"{date}T00:00:00+0000"
        subprocess.run(
            [*git_argv(str(work)), "commit", "-q", "-m", name],
            env={**os.environ, "GIT_COMMITTER_DATE": env_date, "GIT_AUTHOR_DATE": env_date},
            check=True,
        )
        return git_in(work, "rev-parse", "HEAD").strip()

    b = commit("b", "2026-01-02")
    x = commit("x", "2026-01-03")
    git_in(work, "checkout", "-q", "-b", "side", b)
    commit("q", "2027-01-01")
    git_in(work, "checkout", "-q", "main")
    commit("p", "2001-01-01")
    subprocess.run(
        [*git_argv(str(work)), "merge", "-q", "--no-edit", "side"],
        env={**os.environ, "GIT_COMMITTER_DATE": "2027-02-01T00:00:00+0000"},
        check=True,
    )
    y = git_in(work, "rev-parse", "HEAD").strip()
    assert (
        subprocess.run([*git_argv(str(work)), "merge-base", "--is-ancestor", x, y]).returncode == 0
    )
    with Repository(str(work)) as repo:
        objects = Objects(repo.objects)
        assert is_ancestor(objects, x, y)
        assert merge_base(objects, x, y) == x
        assert relation(objects, x, y) == ("behind", x)


def test_a_merge_base_another_base_reaches_is_dropped(tmp_path: Path) -> None:
    """Of two bases where one is an ancestor of the other, only the nearer is a merge base."""
    from qmem_git.store.sync import _independent

    work = tmp_path / "w"
    init_memory_git(work)
    shas = []
    for name in ("a", "b", "c"):
        (work / f"{name}.md").write_text(name)
        git_in(work, "add", f"{name}.md")
        git_in(work, "commit", "-q", "-m", name)
        shas.append(git_in(work, "rev-parse", "HEAD").strip())
    with Repository(str(work)) as repo:
        objects = Objects(repo.objects)
        assert _independent(objects, [shas[0], shas[2]]) == [shas[2]]
        assert _independent(objects, [shas[2], shas[1], shas[0]]) == [shas[2]]
        assert _independent(objects, [shas[1]]) == [shas[1]]


def test_the_remotes_root_tree_moved_into_a_type_folder_is_pushed(
    remote: Path, pair: tuple[Machine, Machine]
) -> None:
    """A tree the remote has, moved inside a type folder, brings user/MEMORY.md: a plain file
    below the root (issue 18: any *.md at any depth is the agent's), so it is pushed."""
    a, _ = pair
    root_tree = git_in(a.root, "rev-parse", "HEAD^{tree}").strip()
    others = [
        line
        for line in git_in(a.root, "ls-tree", "HEAD").splitlines()
        if not line.endswith("\tuser")
    ]
    listing = "".join(f"{line}\n" for line in others) + f"040000 tree {root_tree}\tuser\n"
    tree = git_in(a.root, "mktree", stdin=listing).strip()
    commit = git_in(a.root, "commit-tree", tree, "-p", "HEAD", stdin="relocate\n").strip()
    git_in(a.root, "update-ref", "refs/heads/main", commit)
    git_in(a.root, "-c", "core.hooksPath=/dev/null", "checkout", "-q", "-f", "main")
    assert a.sync().pushed
    assert "user/MEMORY.md" in git_in(remote, "ls-tree", "-r", "--name-only", "main").split()


def test_the_push_check_scans_only_the_blobs_the_remote_lacks(
    remote: Path, pair: tuple[Machine, Machine]
) -> None:
    """Issue 21: every new blob is scanned for secrets, so the cost follows what is new, not
    the length of history: after 25 pushed memories, one more reads two blobs (it and
    MEMORY.md)."""
    from qmem_git.store.sync import OutgoingCheck

    a, _ = pair
    for i in range(25):
        a.remember(f"Service {i} of the fleet answers on port {9100 + i}")
    a.sync()
    a.remember("One more memory after the push")
    repo = Repository(str(a.root))
    try:
        objects = Objects(repo.objects)
        read: list[str] = []
        blob = objects.blob

        def counted(sha: str) -> bytes:
            read.append(sha)
            return blob(sha)

        objects.blob = counted  # type: ignore[method-assign]
        pushed = git_in(remote, "rev-parse", "main").strip()
        OutgoingCheck(objects, pushed).check(a.head())
        new = git_in(a.root, "diff-tree", "-r", "--no-commit-id", "--format=", "HEAD").split("\n")
        assert len(set(read)) == len([line for line in new if line]) == 2
    finally:
        repo.close()


class _Response:
    def status(self) -> int:  # a method where a number was meant
        return 500


def test_an_error_holding_a_bound_method_is_described_without_it() -> None:
    exc = OSError(_Response().status, "http://example.invalid/mem.git/objects/info/packs")
    assert "<bound method" in str(exc)
    error = remotes.remote_error(exc, "http://example.invalid/mem.git", "fetching from")
    assert "<bound method" not in error.message and "bound" not in error.message
    assert "objects/info/packs" in error.message and error.exit_code == 5


def test_a_push_reads_only_the_trees_on_the_way_to_what_changed(
    remote: Path, pair: tuple[Machine, Machine]
) -> None:
    """The outgoing check and the objects sent follow what changed: a folder the new commit
    did not touch is not read (on a 10,000-file store, its whole listing was read on every
    push), and only the new commit's new objects are sent."""
    from qmem_git.store.sync import OutgoingCheck, RepoObjects, objects_to_send

    a, _ = pair
    a.remember("I am a data engineer who mostly writes Go")  # a second folder: user/
    a.sync()
    a.remember("Use pnpm workspaces for the monorepo build")
    pushed = git_in(remote, "rev-parse", "main").strip()
    folders = git_in(a.root, "ls-tree", "HEAD").split("\n")
    unchanged = {line.split()[2] for line in folders if " tree " in line} & {
        line.split()[2]
        for line in git_in(a.root, "ls-tree", pushed).split("\n")
        if " tree " in line
    }
    assert unchanged, "a folder the new commit leaves as it was"
    repo = Repository(str(a.root))
    try:
        objects = Objects(RepoObjects(repo))
        read: list[str] = []
        raw = objects.raw

        def counted(sha: str) -> tuple[int, bytes]:
            read.append(sha)
            return raw(sha)

        objects.raw = counted  # type: ignore[method-assign]
        OutgoingCheck(objects, pushed).check(a.head())
        sent = {sha.decode() for sha in objects_to_send(objects, [a.head()], [pushed])}
        assert not unchanged & set(read)
        new = git_in(a.root, "rev-list", "--objects", f"{pushed}..HEAD").split("\n")
        assert sent == {line.split()[0] for line in new if line}  # what C git would send
    finally:
        repo.close()


def test_a_remote_too_deep_to_read_says_so() -> None:
    error = remotes.remote_error(RecursionError("maximum"), "/srv/mem.git", "fetching from")
    assert "nested too deeply" in error.message and error.exit_code == 5
