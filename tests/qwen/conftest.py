"""The real Qwen Code package for differential tests: installed once, called through a bridge.

The pinned ``@qwen-code/qwen-code`` is installed from npm into ``<repo>/.cache`` (or the folder
``QMEM_TEST_QWEN_DIR`` names) and reused while present. ``bridge.mjs`` imports Qwen's functions
from the package's chunks, found by the name a chunk exports, and runs a whole batch of calls in
one node process. Without node or npm these tests skip (and fail under ``CI``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO_ROOT, require_tool

QWEN_VERSION = "0.24.4"
QWEN_PACKAGE = f"@qwen-code/qwen-code@{QWEN_VERSION}"
BRIDGE = Path(__file__).with_name("bridge.mjs")
# read at import: the autouse isolation fixture clears QMEM_* from each test's environment
_CACHE_OVERRIDE = os.environ.get("QMEM_TEST_QWEN_DIR", "")

Bridge = Callable[[list[dict[str, Any]]], list[Any]]


def _cache_dir() -> Path:
    if _CACHE_OVERRIDE:
        return Path(_CACHE_OVERRIDE)
    return REPO_ROOT / ".cache" / f"qwen-code-{QWEN_VERSION}"


def _package_dir(cache: Path) -> Path:
    return cache / "node_modules" / "@qwen-code" / "qwen-code"


def _installed_version(cache: Path) -> str | None:
    try:
        manifest = json.loads((_package_dir(cache) / "package.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    version = manifest.get("version")
    return version if isinstance(version, str) else None


def _install(cache: Path) -> None:
    """``npm install`` into a scratch folder beside ``cache``, then move it into place."""
    cache.parent.mkdir(parents=True, exist_ok=True)
    scratch = cache.with_name(f"{cache.name}.installing-{os.getpid()}")
    shutil.rmtree(scratch, ignore_errors=True)
    command = ["npm", "install", "--prefix", str(scratch), QWEN_PACKAGE]
    command += ["--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        shutil.rmtree(scratch, ignore_errors=True)
        pytest.fail(f"npm install {QWEN_PACKAGE} failed:\n{done.stderr[-2000:]}")
    shutil.rmtree(cache, ignore_errors=True)
    try:
        scratch.rename(cache)
    except OSError:  # another test process installed it first
        shutil.rmtree(scratch, ignore_errors=True)


def _isolation_prefix() -> list[str]:
    """Run node without a network (only loopback) where this user may: importing Qwen's chunks
    must not reach anything, and this makes sure of it."""
    unshare = shutil.which("unshare")
    if unshare and os.geteuid() == 0:
        probe = subprocess.run([unshare, "-n", "true"], capture_output=True, check=False)
        if probe.returncode == 0:
            return [unshare, "-n"]
    return []


@pytest.fixture(scope="session")
def qwen_package() -> Path:
    """The installed ``@qwen-code/qwen-code`` package folder (installed on first use)."""
    require_tool(shutil.which("node") is not None, "node (apt-get install nodejs)")
    require_tool(shutil.which("npm") is not None, "npm (apt-get install npm)")
    cache = _cache_dir()
    if _installed_version(cache) != QWEN_VERSION:
        _install(cache)
    assert _installed_version(cache) == QWEN_VERSION
    return _package_dir(cache)


@pytest.fixture(scope="session")
def qwen(qwen_package: Path) -> Bridge:
    """``qwen(cases)``: run a batch of bridge cases in one node process, results in order.

    A case whose call threw comes back as ``{"error": text}``; the others as their value.
    """
    prefix = _isolation_prefix()

    def run(cases: list[dict[str, Any]]) -> list[Any]:
        request = json.dumps({"cases": cases})
        command = [*prefix, "node", str(BRIDGE), str(qwen_package)]
        env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ["HOME"]}
        env["NO_COLOR"] = "1"
        done = subprocess.run(
            command, input=request, capture_output=True, text=True, env=env, timeout=300
        )
        assert done.returncode == 0, done.stderr[-4000:]
        results = json.loads(done.stdout)["results"]
        assert len(results) == len(cases)
        return [result.get("ok", result) for result in results]

    return run
