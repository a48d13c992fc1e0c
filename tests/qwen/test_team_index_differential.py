"""The team tier's MEMORY.md (``<git root>/.qwen/team-memory``) from qmem-git against Qwen Code
0.24.4's own ``rebuildTeamAutoMemoryIndex``, byte for byte.

Qwen does not export that builder: the bridge runs it from the bundled source modules (see
``bridge.mjs``). Hypothesis makes team folders whose descriptions often collide once normalised
(letter case, whitespace runs, closing punctuation), with the names, paths and fields of the
project-index test; ``qmem-git --tier team index`` and ``validate`` must agree with Qwen's file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import given, seed, settings
from hypothesis import strategies as st

from qmem_git.ops.tierindex import expected_index
from qwen.conftest import Bridge
from qwen.test_index_differential import BASE_NS, DIR, FIELD_TEXT, NAME, TYPES

# descriptions Qwen groups (normalizeDescription) and some it must not
DESCRIPTIONS = [
    "Use rg, not grep.", "use RG,   not grep", "USE rg, not grep!!", "use rg, not grep)'\"",
    "Use rg not grep", "", "  ", "...", "Ünïcode Ä.", "ünïcode ä", "记忆。", "记忆", "a\tb", "a b",
    "ΣΑΣ", "σας", "İstanbul", "i̇stanbul",
]  # fmt: skip


@st.composite
def team_file(draw: st.DrawFn) -> tuple[str, str, int]:
    rel = draw(DIR) + draw(NAME).strip(".") + ".md"
    kind = draw(st.sampled_from([*TYPES, *TYPES, "note"]))
    description = draw(st.one_of(st.sampled_from(DESCRIPTIONS), FIELD_TEXT))
    name = draw(st.one_of(st.just(""), FIELD_TEXT))
    fields = [f"type: {kind}", f"description: {description}"]
    fields += [f"name: {name}"] if name else []
    text = "---\n" + "\n".join(draw(st.permutations(fields))) + "\n---\nbody\n"
    return rel, text, BASE_NS + draw(st.sampled_from([0, 1, 5_000_000_000]))


TEAM_FOLDER = st.lists(team_file(), max_size=16, unique_by=lambda f: f[0].lower())


def _folders(count: int) -> list[list[tuple[str, str, int]]]:
    found: list[list[tuple[str, str, int]]] = []

    @seed(419)
    @settings(max_examples=count, database=None, deadline=None)
    @given(TEAM_FOLDER)
    def collect(folder: list[tuple[str, str, int]]) -> None:
        found.append(folder)

    collect()
    return found


def _project(tmp: Path, index: int, files: list[tuple[str, str, int]]) -> Path:
    project = tmp / f"c{index}" / "proj"
    (project / ".git").mkdir(parents=True)  # the git root Qwen's getTeamAutoMemoryRoot finds
    root = project / ".qwen" / "team-memory"
    root.mkdir(parents=True)
    for rel, text, mtime_ns in files:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
        os.utime(path, ns=(mtime_ns, mtime_ns))
    return project


def _compare(qwen: Bridge, tmp: Path, folders: list[list[tuple[str, str, int]]]) -> list[str]:
    projects = [_project(tmp, index, files) for index, files in enumerate(folders)]
    roots = [project / ".qwen" / "team-memory" for project in projects]
    ours = [expected_index(str(root)).text.encode("utf-8") for root in roots]
    calls: list[dict[str, Any]] = [{"op": "teamIndex", "project": str(p)} for p in projects]
    problems = []
    for root, mine, result in zip(roots, ours, qwen(calls), strict=True):
        assert not (isinstance(result, dict) and "error" in result), result
        theirs = (root / "MEMORY.md").read_bytes()
        if mine != theirs:
            problems.append(f"{root}:\n ours {mine!r}\n qwen {theirs!r}")
    return problems


def test_generated_team_folders_give_qwens_team_index_byte_for_byte(
    qwen: Bridge, tmp_path: Path
) -> None:
    folders = _folders(150)
    problems = _compare(qwen, tmp_path, folders)
    assert not problems, f"{len(problems)} of {len(folders)} differ:\n" + "\n".join(problems[:3])
    written = [
        (tmp_path / f"c{i}/proj/.qwen/team-memory/MEMORY.md").read_text() for i in range(150)
    ]
    assert sum(text.count("(also: ") for text in written) >= 20  # grouping was exercised


def test_team_limits_and_long_groups_give_qwens_index(qwen: Bridge, tmp_path: Path) -> None:
    """Over 200 memories (the first 200 by path are kept), lines cut at 150 units with their
    ``(also: …)`` list, 25,000-unit cut."""

    def memory(rel: str, name: str, description: str) -> tuple[str, str, int]:
        text = f"---\nname: {name}\ndescription: {description}\ntype: project\n---\nb\n"
        return rel, text, BASE_NS

    folders = [
        [memory(f"p/m{i:03d}.md", f"M {i}", f"d{i % 40}") for i in range(230)],
        [memory(f"记忆/{i:03d}😀.md", "记忆" * 30, "same") for i in range(12)],
        [memory(f"z{i}.md", "t" * 100, "描述" * 40 + str(i)) for i in range(205)],
    ]
    problems = _compare(qwen, tmp_path, folders)
    assert not problems, "\n".join(problems[:2])


def test_index_and_validate_on_the_team_tier_agree_with_qwen(qwen: Bridge, tmp_path: Path) -> None:
    """``index --check --tier team`` accepts Qwen's file; ``index --tier team`` writes the same
    bytes Qwen writes (and commits nothing: the project's git does)."""
    files = [
        ("a.md", "---\nname: A\ndescription: Prefer rg.\ntype: project\n---\nx\n", BASE_NS),
        ("b/c.md", "---\nname: C\ndescription: prefer RG\ntype: user\n---\nx\n", BASE_NS),
        ("d.md", "---\nname: D\ndescription: other\ntype: feedback\n---\nx\n", BASE_NS),
    ]
    project = _project(tmp_path, 0, files)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    index = project / ".qwen" / "team-memory" / "MEMORY.md"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "qmem_git", "--tier", "team", *args]
        return subprocess.run(argv, cwd=project, capture_output=True, text=True, check=False)

    assert cli("index", "--check").returncode == 1  # no MEMORY.md yet
    assert cli("index").returncode == 0
    ours = index.read_bytes()
    assert ours.decode() == "- [A](a.md) — Prefer rg. (also: b/c.md)\n- [D](d.md) — other"
    index.unlink()
    (result,) = qwen([{"op": "teamIndex", "project": str(project)}])
    assert index.read_bytes() == ours and result == ours.decode("utf-8")
    assert cli("index", "--check").returncode == 0
    assert cli("validate").returncode == 0
    assert not list((project / ".qwen").glob("*.git"))
