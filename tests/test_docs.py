"""README and docs/: the shell examples in README run, links resolve, nothing points outside.

Every fenced ``sh``, ``bash`` or ``console`` block of README.md runs, in order, in one scratch
project folder with HOME isolated (tests/conftest.py) and this checkout's ``qmem-git`` first on
PATH; each must exit 0. In ``console`` blocks the lines starting with ``$ `` are the commands,
the other lines are output. A block right after a ``<!-- no-run: reason -->`` comment is not run
(the make targets themselves, installing, a model endpoint); keep those few.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import require_tool

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
PAGES = [README, *DOCS]
FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
SHELL_LANGUAGES = {"sh", "bash", "console"}
NO_RUN = re.compile(r"<!--\s*no-run\b")
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")
OUTSIDE = ("../shared", "spec §", "ARCHITECTURE", "/work/")
DOC_PAGES = ("commands", "stores", "sync", "models", "integrations", "crash-safety", "benchmarks")


@dataclass(frozen=True)
class Block:
    language: str
    text: str
    line: int
    runs: bool

    @property
    def script(self) -> str:
        if self.language != "console":
            return self.text
        return "\n".join(line[2:] for line in self.text.splitlines() if line.startswith("$ "))


def blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        line = text.count("\n", 0, match.start()) + 1
        found.append(Block(match.group(1), match.group(2), line, not NO_RUN.match(before)))
    return found


def shell_blocks(path: Path) -> list[Block]:
    return [block for block in blocks(path) if block.language in SHELL_LANGUAGES]


def qmem_git_bin() -> str:
    beside = Path(sys.executable).with_name("qmem-git")
    found = str(beside) if beside.exists() else shutil.which("qmem-git")
    assert found, "qmem-git is not installed in this environment (make test installs it)"
    return os.path.dirname(found)


def test_readme_starts_with_the_two_commands() -> None:
    first = blocks(README)[0]
    commands = [line.split("#")[0].strip() for line in first.script.splitlines()]
    assert commands == ["make demo", "make test"]
    text = README.read_text(encoding="utf-8")
    assert text.index("make demo") < text.index("\n## ")
    assert len(text.splitlines()) <= 300


def test_readme_shell_examples_run(tmp_path: Path) -> None:
    require_tool(shutil.which("git") is not None, "C git (the sync example makes a bare repo)")
    examples = [block for block in shell_blocks(README) if block.runs]
    skipped = [block for block in shell_blocks(README) if not block.runs]
    assert len(examples) >= 5 and len(skipped) <= 4, "keep no-run blocks few"
    project = tmp_path / "proj"
    project.mkdir()
    env = {**os.environ, "PATH": qmem_git_bin() + os.pathsep + os.environ["PATH"]}
    for block in examples:
        result = subprocess.run(
            ["bash", "-e", "-u", "-o", "pipefail", "-c", block.script],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        where = f"README.md:{block.line} ({block.language} block)"
        assert result.returncode == 0, f"{where} exited {result.returncode}:\n{result.stderr}"
    clone = Path(env["HOME"]) / "laptop-2" / "projects"
    assert clone.is_dir(), "the second-machine example should have cloned the memory"


def test_readme_links_to_every_docs_page() -> None:
    text = README.read_text(encoding="utf-8")
    for page in DOC_PAGES:
        assert (REPO / "docs" / f"{page}.md").is_file()
        assert f"](docs/{page}.md" in text, f"README does not link docs/{page}.md"


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    for block in blocks(path):
        text = text.replace(block.text, "")
    return {slug(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def prose(path: Path) -> str:
    """The page without code blocks and inline code (where ``[a](b)`` is not a link)."""
    text = path.read_text(encoding="utf-8")
    for block in blocks(path):
        text = text.replace(block.text, "")
    return re.sub(r"`[^`\n]*`", "", text)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page: Path) -> None:
    for target in LINK.findall(prose(page)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.exists(), f"{page.name}: link to missing {target}"
        assert REPO in resolved.parents or resolved == REPO, f"{page.name}: {target} leaves"
        if anchor and resolved.suffix == ".md":
            assert anchor in anchors(resolved), f"{page.name}: no heading for {target}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_references_outside_the_repository(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    for needle in OUTSIDE:
        assert needle not in text, f"{page.name} mentions {needle!r}"


def test_packaging_metadata() -> None:
    assert (REPO / "LICENSE").read_text(encoding="utf-8").split()[:4] == [
        "Apache",
        "License",
        "Version",
        "2.0,",
    ]
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert 'license = "Apache-2.0"' in pyproject
    urls = pyproject.split("[project.urls]\n", 1)[1].split("\n\n", 1)[0]
    assert [line.split(" = ")[0] for line in urls.splitlines()] == [
        "Homepage",
        "Documentation",
        "Issues",
        "Source",
    ]
    runtime = pyproject.split("dependencies = [", 1)[1].split("]", 1)[0]
    dev = pyproject.split("dev = [", 1)[1].split("]", 1)[0]
    assert "pre-commit" not in runtime and '"pre-commit>=' in dev


def test_nothing_at_run_time_imports_pre_commit() -> None:
    pattern = re.compile(r"^\s*(import|from)\s+pre_commit\b", re.M)
    for source in (REPO / "qmem_git").rglob("*.py"):
        assert not pattern.search(source.read_text(encoding="utf-8")), source
