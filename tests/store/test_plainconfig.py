"""plainconfig against C git: whatever it reads, ``git config --file F --list -z`` reads the
same (sections, subsections, keys, values, in order); what it does not read it leaves to
dulwich (None), and the files qmem-git, dulwich and ``git init`` write are read."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from qmem_git.store.plainconfig import PlainConfig, parse, read_plain, read_plain_stack


def git_list(path: Path) -> bytes | None:
    """What C git lists for the file, or None when it refuses it."""
    done = subprocess.run(
        ["git", "config", "--file", str(path), "--list", "-z"], capture_output=True, check=False
    )
    return done.stdout if done.returncode == 0 else None


def as_git_lists(config: PlainConfig) -> bytes:
    out = b""
    for section, subsection, key, value in config.entries:
        name = section + (b"." + subsection if subsection is not None else b"") + b"." + key
        out += name + (b"\n" + value if value is not None else b"") + b"\0"
    return out


def agrees_with_git(tmp_path: Path, data: bytes) -> PlainConfig | None:
    path = tmp_path / "config"
    path.write_bytes(data)
    parsed = parse(data)
    if parsed is not None:
        listed = git_list(path)
        assert listed is not None, f"git refuses what plainconfig read: {data!r}"
        assert as_git_lists(parsed) == listed, data
    return parsed


_name = st.text("abcXYZ09-.", min_size=0, max_size=6)
_sub = st.text('aB c/"\\]\t#;.é', min_size=0, max_size=6)
_key = st.text("abKEY09-_", min_size=0, max_size=6)
_value = st.text('ab C/:@"\\#;\t=é.-', min_size=0, max_size=10)
_blank = st.sampled_from(["", " ", "\t", "  \t"])
_header = st.one_of(
    st.builds(lambda b, n: f"{b}[{n}]", _blank, _name),
    st.builds(
        lambda b, n, s, g: f'{b}[{n}{g}"{s}"]',
        _blank,
        _name,
        _sub,
        st.sampled_from(["", " ", "\t"]),
    ),
    st.builds(
        lambda n, tail: f"[{n}]{tail}", _name, st.sampled_from([" # c", "; c", " x = 1", " "])
    ),
)
_line = st.one_of(
    _header,
    st.builds(lambda b, k, g, v: f"{b}{k}{g}={g}{v}", _blank, _key, _blank, _value),
    st.builds(lambda b, k, t: f"{b}{k}{t}", _blank, _key, _blank),
    st.builds(lambda b, c: f"{b}{c} comment", _blank, st.sampled_from(["#", ";"])),
    st.just(""),
    st.just("[include]\n\tpath = other"),
    st.just('[remote "origin"]\n\turl = /srv/memory.git'),
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(_line, max_size=8), crlf=st.booleans())
@example(lines=["[core]", '\tbare = "true"'], crlf=False)
@example(lines=["[core]", "\tx = a\\", "b"], crlf=False)
def test_whatever_it_reads_git_reads_the_same(tmp_path: Path, lines: list[str], crlf: bool) -> None:
    data = ("\r\n" if crlf else "\n").join(lines).encode() + b"\n"
    agrees_with_git(tmp_path, data)


_plain_name = st.text("abcXYZ-", min_size=1, max_size=6).filter(lambda n: n[0].isalpha())
_plain_value = st.text("ab C/:@=é.-", max_size=10)
_plain_line = st.one_of(
    st.builds(lambda b, n: f"{b}[{n}]", _blank, _plain_name.filter(lambda n: "include" not in n)),
    st.builds(
        lambda n, s: f'[{n} "{s}"]',
        _plain_name,
        st.text("aB c/.é]", min_size=1, max_size=6).filter(lambda s: "]" not in s),
    ),
    st.builds(lambda b, k, g, v: f"{b}{k}{g}={g}{v}", _blank, _plain_name, _blank, _plain_value),
    st.builds(
        lambda b, k, v, c: f"{b}{k} = {v} {c}",
        _blank,
        _plain_name,
        _plain_value,
        st.sampled_from(["#", ";"]),
    ),
    st.builds(lambda b, k: f"{b}{k}", _blank, _plain_name),
    st.builds(lambda b, c: f'{b}{c} comment \\ "', _blank, st.sampled_from(["#", ";"])),
    st.just(""),
)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(_plain_line, max_size=8))
def test_plain_files_are_read_and_git_reads_them_the_same(tmp_path: Path, lines: list[str]) -> None:
    data = "\n".join(["[core]", *lines]).encode() + b"\n"
    assert agrees_with_git(tmp_path, data) is not None


TRICKY = [
    b'[Remote "Origin"]\n\tURL = /a\n\turl = /b\n',  # case: section no, subsection yes; last wins
    b"[core]\n\tbare\n\tempty =\n\tcommented = x # y\n\tsemi = x;y\n\tspaced =  a  b  \n",
    b'[remote "a b"]\n\turl = /x\n',
    b"[core] # after a header\n\tbare = false\n",
    b"\t[core]\n  bare = true\n",
    b"[core]\nbare = tr\xc3\xa9s\n",
]
FALLBACK = [
    b'[core]\n\tx = "quoted # value"\n',  # quotes
    b"[core]\n\tx = a\\tb\n",  # an escape
    b"[core]\n\tx = a \\\n b\n",  # a continuation line
    b"[core.sub]\n\tx = 1\n",  # the old subsection spelling
    b"[include]\n\tpath = other\n",
    b'[includeIf "gitdir:/x/"]\n\tpath = other\n',
    b"[core] bare = true\n",  # a key on the header's line
    b"x = 1\n",  # no section
    b"[core]\r\n\tx = 1\r\n",
    b"\xef\xbb\xbf[core]\n\tx = 1\n",
    b'[remote "a\\"b"]\n\turl = /x\n',
    b"[core]\n\tx = a\tb\n",
    b"[core\n",
    b"[core]\n\t9x = 1\n",
]


@pytest.mark.parametrize("data", TRICKY)
def test_tricky_files_are_read_as_git_reads_them(tmp_path: Path, data: bytes) -> None:
    assert agrees_with_git(tmp_path, data) is not None


@pytest.mark.parametrize("data", FALLBACK)
def test_anything_unusual_is_left_to_dulwich(data: bytes) -> None:
    assert parse(data) is None


def test_lookups_follow_dulwich_and_git(tmp_path: Path) -> None:
    config = parse(TRICKY[0] + TRICKY[1])
    assert config is not None
    assert config.get((b"remote", b"Origin"), b"url") == b"/b"  # git config --get: the last
    with pytest.raises(KeyError):
        config.get((b"remote", b"origin"), b"url")  # subsections keep their case
    assert config.sections() == [(b"remote", b"Origin"), (b"core",)]
    assert config.get_boolean((b"CORE",), b"BARE") is True  # a bare key is true
    assert config.get((b"core",), "spaced") == b"a  b"
    assert config.get_boolean((b"core",), b"missing", False) is False
    with pytest.raises(ValueError):
        config.get_boolean((b"core",), b"commented")
    path = tmp_path / "config"
    path.write_bytes(TRICKY[0])
    got = subprocess.run(
        ["git", "config", "--file", str(path), "--get", "remote.Origin.url"],
        capture_output=True,
        check=True,
    )
    assert got.stdout.strip() == b"/b"


def test_the_files_git_dulwich_and_qmem_write_are_read(tmp_path: Path) -> None:
    from dulwich.config import ConfigFile

    bare = tmp_path / "bare.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    subprocess.run(
        ["git", "--git-dir", str(bare), "remote", "add", "origin", "/srv/x.git"], check=True
    )
    assert agrees_with_git(tmp_path, (bare / "config").read_bytes()) is not None
    written = ConfigFile()
    written.set((b"remote", b"origin"), b"url", b"https://example.org/memory.git")
    written.set((b"remote", b"origin"), b"fetch", b"+refs/heads/main:refs/remotes/origin/main")
    written.set((b"core",), b"bare", False)
    path = tmp_path / "written"
    written.write_to_path(str(path))
    assert agrees_with_git(tmp_path, path.read_bytes()) is not None


def test_a_stack_answers_from_the_first_file_that_sets_a_key(tmp_path: Path) -> None:
    (tmp_path / "own").write_bytes(b"[core]\n\thooksPath = mine\n")
    (tmp_path / "user").write_bytes(b"[core]\n\thooksPath = theirs\n[receive]\n\tdenyDeletes\n")
    stack = read_plain_stack([str(tmp_path / p) for p in ("own", "absent", "user")])
    assert stack is not None
    assert stack.get((b"core",), b"hookspath") == b"mine"
    assert stack.get_boolean((b"receive",), b"denyDeletes", False) is True
    (tmp_path / "user").write_bytes(b'[core]\n\tx = "q"\n')
    assert read_plain_stack([str(tmp_path / "own"), str(tmp_path / "user")]) is None
    with pytest.raises(FileNotFoundError):
        read_plain(str(tmp_path / "absent"))
