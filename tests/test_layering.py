"""The layer rules of ARCHITECTURE §2, enforced by reading every module's source with ``ast``.

The walk is generic: new modules are checked as soon as they exist.  A failure lists every
offending ``module:line`` with the rule it broke.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "qmem_git"

# Third-party packages that must never load in the pure core.
CORE_FORBIDDEN = frozenset({"dulwich", "requests", "click", "filelock", "psutil"})
# Modules allowed to read the environment or use click (argv/env/printing edge).
EDGE_MODULES = frozenset(
    {"qmem_git.cli", "qmem_git.__main__", "qmem_git.fastpath", "qmem_git.hookentry"}
)
ENV_NAMES = frozenset({"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"})


@dataclass(frozen=True)
class Use:
    """One thing a module uses: an imported top-level module path, or an environment access."""

    kind: str  # "import" or "env"
    name: str  # dotted module name for imports; what was touched for env
    line: int


def module_name(path: Path, package_dir: Path = PACKAGE_DIR) -> str:
    rel = path.relative_to(package_dir.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def iter_modules(package_dir: Path = PACKAGE_DIR) -> Iterator[tuple[str, Path]]:
    for path in sorted(package_dir.rglob("*.py")):
        yield module_name(path, package_dir), path


def _resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    return ".".join([*parts, target] if target else parts)


def uses(module: str, source: str, is_package: bool = False) -> list[Use]:
    """Imports (absolute, relative and ``importlib.import_module("x")``) and env reads."""
    tree = ast.parse(source)
    found: list[Use] = []
    os_aliases = {"os"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append(Use("import", alias.name, node.lineno))
                if alias.name == "os" and alias.asname:
                    os_aliases.add(alias.asname)
        elif isinstance(node, ast.ImportFrom):
            base = (
                _resolve_relative(module, is_package, node.level, node.module)
                if node.level
                else node.module or ""
            )
            found.append(Use("import", base, node.lineno))
            if base == "os":
                found += [
                    Use("env", f"from os import {a.name}", node.lineno)
                    for a in node.names
                    if a.name in ENV_NAMES
                ]
            else:
                # `from qmem_git import cli` imports the submodule qmem_git.cli
                found += [Use("import", f"{base}.{a.name}", node.lineno) for a in node.names]
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            first = node.args[0]
            if (
                name in {"import_module", "__import__"}
                and isinstance(first, ast.Constant)
                and isinstance(first.value, str)
            ):
                found.append(Use("import", first.value, node.lineno))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ENV_NAMES
            and isinstance(node.value, ast.Name)
            and node.value.id in os_aliases
        ):
            found.append(Use("env", f"{node.value.id}.{node.attr}", node.lineno))
    return found


def _top(name: str) -> str:
    return name.split(".", 1)[0]


def _is_under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def violations(module: str, source: str, is_package: bool = False) -> list[str]:
    """Every rule of ARCHITECTURE §2 this module's source breaks, as ``module:line: why``."""
    problems: list[str] = []
    in_core = _is_under(module, "qmem_git.core")
    for use in uses(module, source, is_package):
        where = f"{module}:{use.line}"
        if use.kind == "env":
            if module not in EDGE_MODULES:
                problems.append(f"{where}: reads the environment ({use.name}); only cli does")
            continue
        top = _top(use.name)
        if in_core and top in CORE_FORBIDDEN:
            problems.append(f"{where}: core imports {use.name}; core must stay pure")
        if (
            in_core
            and top == "qmem_git"
            and not (
                _is_under(use.name, "qmem_git.core")
                or _is_under(use.name, "qmem_git.errors")
                or use.name == "qmem_git"
            )
        ):
            problems.append(f"{where}: core imports {use.name}; layers point down only")
        if top == "dulwich" and not _is_under(module, "qmem_git.store"):
            problems.append(f"{where}: imports dulwich; only qmem_git.store may")
        if top == "requests" and module != "qmem_git.integrations.llm":
            problems.append(f"{where}: imports requests; only qmem_git.integrations.llm may")
        if top == "click" and module not in EDGE_MODULES:
            problems.append(f"{where}: imports click; only {', '.join(sorted(EDGE_MODULES))} may")
    return list(dict.fromkeys(problems))  # `from x import a, b` reports a line once per rule


def test_package_layering() -> None:
    modules = list(iter_modules())
    assert any(name == "qmem_git.core.index" for name, _ in modules)  # the walk found the code
    problems = [
        problem
        for name, path in modules
        for problem in violations(
            name, path.read_text(encoding="utf-8"), path.name == "__init__.py"
        )
    ]
    assert not problems, "layering violations:\n" + "\n".join(problems)


# --- the checker itself must catch violations ------------------------------------------------


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        (
            "qmem_git.core.x",
            "import dulwich.repo\n",
            "qmem_git.core.x:1: core imports dulwich.repo",
        ),
        (
            "qmem_git.core.x",
            "\nfrom requests import get\n",
            "qmem_git.core.x:2: core imports requests",
        ),
        ("qmem_git.core.x", "import click", "qmem_git.core.x:1: core imports click"),
        ("qmem_git.core.x", "import filelock", "qmem_git.core.x:1: core imports filelock"),
        ("qmem_git.core.x", "import psutil as p", "qmem_git.core.x:1: core imports psutil"),
        (
            "qmem_git.core.x",
            "import os\nx = os.environ['A']",
            "qmem_git.core.x:2: reads the environment",
        ),
        (
            "qmem_git.core.x",
            "import os as o\no.getenv('A')",
            "qmem_git.core.x:2: reads the environment",
        ),
        ("qmem_git.core.x", "from os import environ", "qmem_git.core.x:1: reads the environment"),
        (
            "qmem_git.core.x",
            "from os import getenv as g",
            "qmem_git.core.x:1: reads the environment",
        ),
        ("qmem_git.core.x", "from qmem_git.store import workdir", "core imports qmem_git.store"),
        ("qmem_git.core.x", "from ..ops import extract", "core imports qmem_git.ops"),
        ("qmem_git.core.x", "from qmem_git import cli", "core imports qmem_git.cli"),
        (
            "qmem_git.core.x",
            "import importlib\nimportlib.import_module('dulwich')",
            "qmem_git.core.x:2: core imports dulwich",
        ),
        ("qmem_git.ops.x", "from dulwich import porcelain", "qmem_git.ops.x:1: imports dulwich"),
        (
            "qmem_git.settings",
            "import os\nos.environ.get('X')",
            "qmem_git.settings:2: reads the environment",
        ),
        ("qmem_git.integrations.agents", "import requests", "imports requests; only"),
        ("qmem_git.store.repo", "import requests", "imports requests; only"),
        ("qmem_git.ops.x", "import click", "qmem_git.ops.x:1: imports click"),
        (
            "qmem_git.ops.x",
            "def f():\n    if True:\n        import click\n",
            "qmem_git.ops.x:3: imports click",
        ),
    ],
)
def test_checker_detects_violation(module: str, source: str, expected: str) -> None:
    found = violations(module, source)
    assert any(expected in problem for problem in found), found


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("qmem_git.store.repo", "import dulwich.repo\nfrom dulwich.objects import Tree"),
        ("qmem_git.integrations.llm", "import requests"),
        ("qmem_git.cli", "import click\nimport os\nos.environ['X']"),
        ("qmem_git.__main__", "from os import environ"),
        ("qmem_git.hookentry", "import os\nos.getenv('X')"),
        ("qmem_git.core.x", "import os.path\nimport re\nfrom qmem_git.core.model import Entry"),
        ("qmem_git.core.x", "from . import model\nfrom .text import normalize_space"),
        ("qmem_git.core.x", "from qmem_git.errors import QmemError\nimport yaml"),
        ("qmem_git.core.x", "environ = {}\nenviron.get('x')"),  # a local name, not os.environ
    ],
)
def test_checker_allows_legal_code(module: str, source: str) -> None:
    assert violations(module, source) == []


def test_relative_imports_resolve_from_packages_and_modules() -> None:
    assert next(u.name for u in uses("qmem_git.core", "from .x import y", is_package=True)) == (
        "qmem_git.core.x"
    )
    assert next(u.name for u in uses("qmem_git.core.a", "from ..store import b")) == (
        "qmem_git.store"
    )


def test_failure_message_lists_module_and_line() -> None:
    problems = violations("qmem_git.core.bad", "import json\n\nimport dulwich\nimport click\n")
    assert problems == [
        "qmem_git.core.bad:3: core imports dulwich; core must stay pure",
        "qmem_git.core.bad:3: imports dulwich; only qmem_git.store may",
        "qmem_git.core.bad:4: core imports click; core must stay pure",
        "qmem_git.core.bad:4: imports click; only qmem_git.__main__, qmem_git.cli, "
        "qmem_git.fastpath, qmem_git.hookentry may",
    ]
