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
from conftest import require_tool
from real_clients import npm_cache, npm_install

QWEN_VERSION = "0.24.4"
QWEN_PACKAGE = f"@qwen-code/qwen-code@{QWEN_VERSION}"
BRIDGE = Path(__file__).with_name("bridge.mjs")
_CACHE = npm_cache("QMEM_TEST_QWEN_DIR", f"qwen-code-{QWEN_VERSION}")

Bridge = Callable[[list[dict[str, Any]]], list[Any]]


def _package_dir(cache: Path) -> Path:
    return cache / "node_modules" / "@qwen-code" / "qwen-code"


def _installed_version(cache: Path) -> str | None:
    try:
        manifest = json.loads((_package_dir(cache) / "package.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    version = manifest.get("version")
    return version if isinstance(version, str) else None


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
    if _installed_version(_CACHE) != QWEN_VERSION:
        npm_install(_CACHE, QWEN_PACKAGE)
    assert _installed_version(_CACHE) == QWEN_VERSION
    return _package_dir(_CACHE)


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
