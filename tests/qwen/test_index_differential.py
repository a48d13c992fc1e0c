"""MEMORY.md from qmem-git against Qwen Code 0.24.4's own builders, byte for byte.

Hypothesis makes memory folders (unicode, CJK, emoji, control and invisible characters, long
fields, equal mtimes, nested folders, empty and missing fields, CRLF, invalid types); qmem-git
renders each folder's index, then one node process runs Qwen's ``rebuildManagedAutoMemoryIndex``
(project tier, ``QWEN_CODE_MEMORY_LOCAL=1``) or ``rebuildUserAutoMemoryIndex`` (user tier,
``QWEN_CODE_MEMORY_BASE_DIR``) on every folder, and the MEMORY.md bytes Qwen wrote are compared
with ours. Folders hold what an agent's folder holds (issue 18): pinned/ in any letter case,
root-level notes, logs/ and deep folders, nested files named MEMORY.md, files that are not
Markdown. A second family adds what an agent may also leave there: dot-folders (``.git/``
too) and symlinks (to files inside and outside the root, dangling, to folders, a folder named
``*.md``); :func:`agent_listing` must list those folders as Qwen does (its index shows the
order), and the writers' index follows once they use it. Not generated: files over 256 KiB,
undecodable bytes or control characters in file names, FIFOs (Qwen's read of one never ends).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from qmem_git.core.collate import collation_key
from qmem_git.core.index import encode_target
from qmem_git.core.limits import MAX_FILE_BYTES
from qmem_git.store.walk import agent_listing
from qmem_git.store.workdir import render_index
from qwen.conftest import Bridge

TYPES = ["user", "feedback", "project", "reference"]
BASE_NS = 1_790_000_000_123_456_789
TRICKY = [
    "`", "](", "[", "]", "(", ")", "\t", "\r", "\x00", "\x1b", "\x7f", "\x85", "\u00a0",
    "\u200b", "\u200d", "\u200f", "\u202e", "\u2066", "\u2069", "\ufeff", "\u2028", "\u3000",
    "é", "É", "ß", "记", "忆", "あ", "ア", "😀", "👍🏽", "—", "…", " ", "  ", "-", "_", "#", ":",
]  # fmt: skip
FIELD_TEXT = st.lists(
    st.one_of(
        st.sampled_from(TRICKY),
        st.text(min_size=1, max_size=12),
        st.sampled_from(["a", "word ", "记忆", "😀"]).map(lambda s: s * 70),
    ),
    max_size=8,
).map("".join)
# characters file names hold: letters and digits of the common scripts, marks, punctuation,
# emoji (collation of rarer characters is approximate, see qmem_git/core/collate.py)
NAME_CHARS = st.characters(
    whitelist_categories=("Lu", "Ll", "Lo", "Nd", "Mn", "Pd", "Pc", "Po", "Zs", "So", "Sc"),
    blacklist_characters="/\\",
    max_codepoint=0x1F64F,
).filter(
    lambda c: (
        ord(c) < 0x3400
        or 0x3040 <= ord(c) <= 0x30FF
        or 0x4E00 <= ord(c) <= 0x9FFF
        or 0xAC00 <= ord(c) <= 0xD7A3
        or ord(c) >= 0x1F600
    )
)
NAME_PART = st.one_of(
    st.sampled_from(["a", "B", "b", "é", "e", "记忆", "😀", "x y", "x-y", "x_y", "Z", "10", "9"]),
    st.text(NAME_CHARS, min_size=1, max_size=6),
)  # fmt: skip
NAME = st.lists(NAME_PART, min_size=1, max_size=3).map("".join)
DIR = st.sampled_from(
    ["", "", "user/", "feedback/", "project/", "reference/", "pinned/", "Pinned/", "PINNED/",
     "notes/deep/", "logs/", "notes/a/b/"]
)  # fmt: skip
BODIES = [
    "Body.\n",
    "",
    "**Why:** x\n**How to apply:** y\n",
    "Title\n=====\n\nSetext heading above.\n",
    "\n\n",
]
# values as YAML writes them and Qwen's line reader reads them (quotes kept, folds not joined)
ODD_VALUES = ['"quoted"', "'single'", ">\n  folded line", "|-\n  literal", '"a: b"', "''"]
NOT_MEMORIES = {  # files a memory folder holds beside memories: never listed
    "logs/run.log": "2026-01-01 started\n",
    "notes/x.md.bak": "---\nname: Backup\ndescription: d\ntype: user\n---\n",
    "image.png": "\x89PNG\n",
}


@st.composite
def memory_file(draw: st.DrawFn) -> tuple[str, str, int]:
    """(relative path, text, mtime in ns): mtimes from a few values, so ties are common."""
    rel = draw(DIR) + draw(NAME).strip(".") + ".md"
    fields: list[str] = []
    kind = draw(st.sampled_from([*TYPES, *TYPES, "note", "", " user "]))
    if draw(st.booleans()) or kind:
        fields.append(f"type: {kind}")
    for key in ("name", "title", "description"):
        choice = draw(st.integers(0, 5))
        if choice == 0:
            continue
        if choice == 5:
            fields.append(f"{key}: {draw(st.sampled_from(ODD_VALUES))}")
            continue
        value = "" if choice == 1 else ("  " if choice == 2 else draw(FIELD_TEXT))
        fields.append(f"{key}:{'' if choice == 1 else ' '}{value}")
    fields = draw(st.permutations(fields))
    if draw(st.booleans()):
        fields.append("extra: kept")
    body = draw(st.sampled_from(BODIES))
    if draw(st.integers(0, 9)) == 0 and "/" in rel:  # a nested file named like the index
        rel = rel.rsplit("/", 1)[0] + "/MEMORY.md"
    text = "---\n" + "\n".join(fields) + "\n---\n" + body
    if draw(st.integers(0, 5)) == 0:
        text = text.replace("\n", "\r\n")
    tick = draw(st.sampled_from([0, 0, 1, 2, 1_000_000, 5_000_000_000]))
    return rel, text, BASE_NS + tick


FOLDER = st.lists(memory_file(), max_size=14, unique_by=lambda f: f[0].lower())


def _folders(count: int) -> list[list[tuple[str, str, int]]]:
    """``count`` hypothesis-generated folders, the same on every run (fixed seed)."""
    found: list[list[tuple[str, str, int]]] = []

    @seed(418)
    @settings(max_examples=count, database=None, deadline=None)
    @given(FOLDER)
    def collect(folder: list[tuple[str, str, int]]) -> None:
        found.append(folder)

    collect()
    return found


def _write(root: Path, files: list[tuple[str, str, int]]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    others = [(rel, text, BASE_NS) for rel, text in NOT_MEMORIES.items()]
    _write_files(root, [*files, *others])


def _write_files(root: Path, files: list[tuple[str, str, int]]) -> None:
    for rel, text, mtime_ns in files:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
        os.utime(path, ns=(mtime_ns, mtime_ns))


def _case(tmp: Path, index: int, files: list[tuple[str, str, int]]) -> tuple[Path, dict[str, Any]]:
    """A folder for one tier (alternating), and the bridge call that rebuilds its index."""
    case = tmp / f"c{index}"
    if index % 2:
        root = case / "base" / "memories"
        call = {
            "op": "index",
            "tier": "user",
            "env": {"QWEN_CODE_MEMORY_BASE_DIR": str(case / "base")},
        }
    else:
        root = case / "proj" / ".qwen" / "memory"
        call = {
            "op": "index",
            "project": str(case / "proj"),
            "env": {"QWEN_CODE_MEMORY_LOCAL": "1"},
        }
    _write(root, files)
    return root, call


def _compare(
    qwen: Bridge,
    tmp: Path,
    folders: list[list[tuple[str, str, int]]],
    extras: Sequence[Extras] = (),
    render: Callable[[str], bytes] = lambda root: render_index(root).text.encode("utf-8"),
) -> list[str]:
    cases = [_case(tmp, index, files) for index, files in enumerate(folders)]
    for (root, _), extra in zip(cases, extras, strict=False):
        _write_extras(root, extra)
    ours = [render(str(root)) for root, _ in cases]
    results = qwen([call for _, call in cases])
    problems = []
    for (root, _), mine, result in zip(cases, ours, results, strict=True):
        assert not (isinstance(result, dict) and "error" in result), result
        theirs = (root / "MEMORY.md").read_bytes()
        if mine != theirs:
            problems.append(_first_difference(root, mine, theirs))
    return problems


def _first_difference(root: Path, mine: bytes, theirs: bytes) -> str:
    ours_lines, their_lines = mine.split(b"\n"), theirs.split(b"\n")
    for number, (a, b) in enumerate(zip(ours_lines, their_lines, strict=False), 1):
        if a != b:
            return f"{root} line {number}:\n ours {a!r}\n qwen {b!r}"
    return f"{root}: ours {len(ours_lines)} lines, qwen {len(their_lines)}"


def test_generated_folders_give_qwens_index_byte_for_byte(qwen: Bridge, tmp_path: Path) -> None:
    folders = _folders(200)
    problems = _compare(qwen, tmp_path, folders)
    assert not problems, f"{len(problems)} of {len(folders)} differ:\n" + "\n".join(problems[:5])
    assert sum(len(folder) for folder in folders) > 1000


def test_limits_give_qwens_index_byte_for_byte(qwen: Bridge, tmp_path: Path) -> None:
    """200 lines, 25,000 UTF-16 code units (199 CJK memories fit), 150-unit lines, ties."""

    def memory(rel: str, name: str, description: str, tick: int) -> tuple[str, str, int]:
        text = f"---\nname: {name}\ndescription: {description}\ntype: project\n---\nb\n"
        return rel, text, BASE_NS + tick

    folders = [
        [memory(f"project/m{i:03d}.md", f"M {i}", "d" * (i % 160), i // 7) for i in range(230)],
        [memory(f"project/记忆{i:03d}.md", "记忆" * 30, "描述" * 40, i % 3) for i in range(199)],
        [memory(f"user/{i}.md", "é" * 130, "😀" * 70, 0) for i in range(205)],
        [memory(f"p/{'x' * i}😀.md", "t" * i, "", 0) for i in range(1, 180, 4)],
    ]
    problems = _compare(qwen, tmp_path, folders)
    assert not problems, "\n".join(problems[:3])


AGENT_FOLDER = [  # every case of issue 18, one file each
    ("Pinned/deploy.md", "---\nname: Deploy\ndescription: by hand\ntype: project\n---\nx\n"),
    ("Pinned/lower.md", "---\nname: Lower\ndescription: d\ntype: user\n---\nx\n"),
    ("root-note.md", "---\nname: Root\ndescription: at the root\ntype: reference\n---\n"),
    ("logs/session.md", "---\nname: Log\ndescription: in logs\ntype: project\n---\nx\n"),
    ("notes/a/b/deep.md", "---\nname: Deep\ndescription: deep\ntype: user\n---\nx\n"),
    ("notes/MEMORY.md", "---\nname: Nested index\ndescription: skipped\ntype: user\n---\n"),
    ("user/empty-desc.md", "---\nname: Empty description\ndescription:\ntype: user\n---\nx\n"),
    ("user/title.md", "---\ntitle: Title not name\ndescription: t\ntype: feedback\n---\nx\n"),
    ("user/no-name.md", "---\ndescription: no name at all\ntype: user\n---\nx\n"),
    ("user/empty-body.md", "---\nname: Empty body\ndescription: e\ntype: user\n---\n"),
    ("user/setext.md", "---\nname: Setext\ndescription: s\ntype: user\n---\nT\n=====\n"),
    ("user/crlf.md", "---\r\nname: CRLF\r\ndescription: c\r\ntype: user\r\n---\r\nx\r\n"),
    ("user/quoted.md", "---\nname: \"Quoted\"\ndescription: 'single'\ntype: user\n---\nx\n"),
    ("user/folded.md", "---\nname: Folded\ndescription: >\n  folded\ntype: user\n---\nx\n"),
    ("user/extra.md", "---\nname: Extra\ndescription: e\ntype: user\nupdated: 1\n---\nx\n"),
    ("user/not-memory.md", "# Just notes\n"),
    ("user/bad-type.md", "---\nname: Bad type\ndescription: b\ntype: misc\n---\nx\n"),
]


def test_an_agents_folder_gives_qwens_index_byte_for_byte(qwen: Bridge, tmp_path: Path) -> None:
    folder = [(rel, text, BASE_NS + n % 3) for n, (rel, text) in enumerate(AGENT_FOLDER)]
    problems = _compare(qwen, tmp_path, [folder, folder])  # project tier, then user tier
    assert not problems, "\n".join(problems)
    listed = (tmp_path / "c0" / "proj" / ".qwen" / "memory" / "MEMORY.md").read_text()
    assert "(Pinned/deploy.md)" in listed and "(notes/a/b/deep.md)" in listed
    assert "notes/MEMORY.md" not in listed and "not-memory" not in listed


def test_a_file_over_the_size_limit_is_in_qwens_index_and_ours(
    qwen: Bridge, tmp_path: Path
) -> None:
    """Qwen lists a memory of any size; qmem-git holds one over MAX_FILE_BYTES back from its
    commits but lists it in MEMORY.md all the same (walk and writer's survey alike)."""
    big = "---\nname: Big\ndescription: large\ntype: user\n---\n" + "x" * (300 * 1024)
    small = "---\nname: Small\ndescription: small\ntype: user\n---\nb\n"
    folder = [("user/big.md", big, BASE_NS), ("user/small.md", small, BASE_NS + 1)]
    assert len(big.encode()) > MAX_FILE_BYTES
    for render in (_walk_render, _writer_render):
        problems = _compare(qwen, tmp_path / render.__name__, [folder, folder], render=render)
        assert not problems, "\n".join(problems)
    listed = tmp_path / "_walk_render" / "c0" / "proj" / ".qwen" / "memory" / "MEMORY.md"
    assert "(user/big.md)" in listed.read_text()


def _walk_render(root: str) -> bytes:
    return render_index(root).text.encode("utf-8")


# --- what else an agent leaves under the root: dot-folders and symlinks (issue 18) ---------

VALID = "---\nname: t\ndescription: d\ntype: user\n---\nb\n"
# short names whose index line is never cut, so Qwen's index shows its whole listing
SIMPLE_NAME = st.text("abcXYZ019-_ é😀", min_size=1, max_size=6)
TICK = st.sampled_from([0, 0, 1, 2, 1_000_000, 5_000_000_000])
LINK_NS = BASE_NS + 9_000_000_000  # a link's own mtime: newer than any file, unused by Qwen
DOT_PLACES = [".notes/", ".git/", ".git/hooks/", ".hidden/deep/", "user/.cache/", "."]
EXTRA_KINDS = [
    "dot", "dot", "file-in", "file-out", "dangling", "dir-in", "dir-out", "dir-md", "folder-md",
]  # fmt: skip


class Extras(NamedTuple):
    """Written after a folder's files: ``files`` inside the root, ``outside`` beside it, and
    ``links`` (rel, target): a target starting with ``@`` is in the outside folder."""

    files: list[tuple[str, str, int]]
    outside: list[tuple[str, str, int]]
    links: list[tuple[str, str]]


def _folder_of(rels: list[str], draw: st.DrawFn) -> str:
    folders = sorted({rel.rsplit("/", 1)[0] for rel in rels if "/" in rel})
    return draw(st.sampled_from(folders)) if folders else "user"  # missing: a dangling link


@st.composite
def agent_extras(
    draw: st.DrawFn, inside: list[str], text: st.SearchStrategy[str], name: st.SearchStrategy[str]
) -> Extras:
    extras = Extras([], [], [])
    for k, kind in enumerate(draw(st.lists(st.sampled_from(EXTRA_KINDS), min_size=1, max_size=6))):
        item = draw(name).strip(".") + ".md"
        if kind == "dot":
            place = draw(st.sampled_from(DOT_PLACES))
            extras.files.append((place + item, draw(text), BASE_NS + draw(TICK)))
        elif kind == "file-in":
            target = draw(st.sampled_from(inside)) if inside else "missing.md"
            extras.links.append((f"~ln{k}.md", target))
        elif kind == "file-out":
            extras.outside.append((f"o{k}.md", draw(text), BASE_NS + draw(TICK)))
            extras.links.append((f"~ln{k}.md", f"@o{k}.md"))
        elif kind == "dangling":
            extras.links.append((f"~ln{k}.md", f"missing{k}.md"))
        elif kind in ("dir-in", "dir-md"):
            suffix = ".md" if kind == "dir-md" else ""
            deco = draw(st.sampled_from(["", "\U0001f600", "\uff04"]))  # JS sorts 😀 first
            extras.links.append((f"~{deco}dir{k}{suffix}", _folder_of(inside, draw)))
        elif kind == "dir-out":
            for rel in (f"d{k}/{item}", f"d{k}/deep/{item}"):
                extras.outside.append((rel, draw(text), BASE_NS + draw(TICK)))
            extras.links.append((f"~dir{k}", f"@d{k}"))
        else:  # a real folder named like a memory file
            extras.files.append((f"~f{k}.md/{item}", draw(text), BASE_NS + draw(TICK)))
    return extras


def _write_extras(root: Path, extras: Extras) -> None:
    outside = root.parent / "outside-of-root"
    _write_files(root, extras.files)
    _write_files(outside, extras.outside)
    for rel, target in extras.links:
        path = root / rel
        path.symlink_to(str(outside / target[1:]) if target.startswith("@") else target)
        os.utime(path, ns=(LINK_NS, LINK_NS), follow_symlinks=False)


@st.composite
def linked_folder(draw: st.DrawFn, simple: bool) -> tuple[list[tuple[str, str, int]], Extras]:
    """A folder and its extras. ``simple``: valid memories with short names only, so Qwen's
    index shows every file it lists; otherwise :data:`FOLDER`'s whole variety."""
    if simple:
        memory = st.tuples(DIR, SIMPLE_NAME, TICK).map(
            lambda t: (t[0] + t[1].strip(".") + ".md", VALID, BASE_NS + t[2])
        )
        files = draw(st.lists(memory, max_size=8, unique_by=lambda f: f[0].lower()))
        text, name = st.just(VALID), SIMPLE_NAME
    else:
        files = draw(st.lists(memory_file(), max_size=10, unique_by=lambda f: f[0].lower()))
        text, name = memory_file().map(lambda f: f[1]), NAME
    inside = [rel for rel, _, _ in files if rel.rsplit("/", 1)[-1] != "MEMORY.md"]
    return files, draw(agent_extras(inside, text, name))


def _linked_folders(count: int, simple: bool) -> list[tuple[list[tuple[str, str, int]], Extras]]:
    found: list[tuple[list[tuple[str, str, int]], Extras]] = []

    @seed(1818)
    @settings(max_examples=count, database=None, deadline=None)
    @given(linked_folder(simple))
    def collect(folder: tuple[list[tuple[str, str, int]], Extras]) -> None:
        found.append(folder)

    collect()
    return found


_QWEN_LINE = re.compile(r"^- \[t\]\((.*)\) \u2014 d$")


def _listing_in_qwens_order(root: Path) -> list[str]:
    """:func:`agent_listing` in Qwen's scan order, as MEMORY.md link targets: sorted as
    Qwen sorts its listing (stable: newest first, then the basename's collation), so the
    listing's own order decides the ties."""
    listed = agent_listing(str(root))
    ordered = sorted(listed, key=lambda item: (-item[1].st_mtime_ns / 1e6, _basename_key(item[0])))
    return [encode_target(rel) for rel, _ in ordered]


def _basename_key(rel: str) -> tuple[object, ...]:
    return collation_key(rel.rsplit("/", 1)[-1])


def _compare_listings(
    qwen: Bridge, tmp: Path, folders: list[tuple[list[tuple[str, str, int]], Extras]]
) -> tuple[list[str], list[str]]:
    """Where :func:`agent_listing`, in Qwen's scan order, differs from the files Qwen's own
    index lists, folder by folder (every regular ``*.md`` there is a valid memory); and every
    link target listed."""
    cases = [_case(tmp, index, files) for index, (files, _) in enumerate(folders)]
    ours = []
    for (root, _), (_, extras) in zip(cases, folders, strict=True):
        _write_extras(root, extras)
        ours.append(_listing_in_qwens_order(root)[:200])
    results = qwen([call for _, call in cases])
    problems = []
    for (root, _), mine, result in zip(cases, ours, results, strict=True):
        assert not (isinstance(result, dict) and "error" in result), result
        lines = [line for line in (root / "MEMORY.md").read_text("utf-8").split("\n") if line]
        theirs = [m.group(1) for line in lines if (m := _QWEN_LINE.match(line))]
        assert len(theirs) == len(lines), lines  # no line cut short
        if mine != theirs:
            problems.append(f"{root}:\n ours {mine}\n qwen {theirs}")
    return problems, [target for targets in ours for target in targets]


def _through(listed: list[str], marks: tuple[str, ...]) -> int:
    return sum(any(mark in rel for mark in marks) for rel in listed)


def test_agent_listing_is_qwens_listing_on_generated_folders(qwen: Bridge, tmp_path: Path) -> None:
    """Dot-folders, .git/, symlinks in and out of the root, dangling and folder links: the
    paths and the order (so the stat: a link's own mtime is newer than everything)."""
    folders = _linked_folders(120, simple=True)
    problems, listed = _compare_listings(qwen, tmp_path, folders)
    assert not problems, f"{len(problems)} of {len(folders)} differ:\n" + "\n".join(problems[:3])
    assert _through(listed, (".git/", ".notes/", ".hidden/", "/.cache/")) > 40
    assert _through(listed, ("~ln",)) > 40 and _through(listed, ("~dir",)) > 40


LOOPED = (
    [("sub/s.md", VALID, BASE_NS), ("top.md", VALID, BASE_NS + 1), ("a/MEMORY.md", VALID, BASE_NS)],
    Extras(
        files=[
            (".git/hooks/pre-commit.md", VALID, BASE_NS + 2), (".git/MEMORY.md", VALID, BASE_NS),
            (".notes/UP.MD", VALID, BASE_NS), (".dot.md", VALID, BASE_NS + 3),
            ("x.md/inner.md", VALID, BASE_NS + 4), ("memory.md", VALID, BASE_NS + 5),
        ],
        outside=[("o.md", VALID, BASE_NS + 6), ("dir/in.md", VALID, BASE_NS + 7)],
        links=[
            ("sub/loop", "."), ("link.md", "top.md"), ("out.md", "@o.md"), ("dir", "@dir"),
            ("sub.md", "sub"), ("dangling.md", "gone.md"), ("self.md", "self.md"),
            # same files, same mtimes: listing order decides, UTF-16 code units (D83D < FF04)
            ("\U0001f600", "sub"), ("\uff04", "sub"),
        ],
    ),
)  # fmt: skip


def test_agent_listing_is_qwens_listing_through_a_symlink_loop(
    qwen: Bridge, tmp_path: Path
) -> None:
    """sub/loop -> . is followed until the kernel's ELOOP (by Qwen and by agent_listing)."""
    problems, _ = _compare_listings(qwen, tmp_path, [LOOPED, LOOPED])
    assert not problems, "\n".join(problems)
    listed = (tmp_path / "c0" / "proj" / ".qwen" / "memory" / "MEMORY.md").read_text()
    assert listed.count("(sub/loop/") > 30 and listed.count("(sub.md/loop/") > 30
    assert "(.git/hooks/pre-commit.md)" in listed and "(out.md)" in listed
    assert "(dir/in.md)" in listed and "dangling" not in listed and "(x.md/inner.md)" in listed


def _writer_render(root: str) -> bytes:
    """MEMORY.md as a writer renders it: from the survey it made of the folder under the lock
    (``store.survey``, with what Qwen reaches through symlinks), not from a second walk."""
    from qmem_git.core.index import build_index
    from qmem_git.store import survey, workdir
    from qmem_git.store.recovery import _render_files

    seen = survey.survey(root)
    docs = workdir.scan_documents(root, stats=_render_files(seen.files, seen.linked))
    return build_index(docs).text.encode("utf-8")


@pytest.mark.parametrize("render", ["walk", "writer's survey"])
def test_generated_folders_with_dot_folders_and_links_give_qwens_index(
    qwen: Bridge, tmp_path: Path, render: str
) -> None:
    folders = _linked_folders(60, simple=False)
    how = _writer_render if render == "writer's survey" else None
    args = (qwen, tmp_path, [f for f, _ in folders], [e for _, e in folders])
    problems = _compare(*args, render=how) if how else _compare(*args)
    assert not problems, f"{len(problems)} of {len(folders)} differ:\n" + "\n".join(problems[:5])
