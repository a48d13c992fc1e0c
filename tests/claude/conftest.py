"""The real Claude Code package for end-to-end tests: installed once, run only without a network.

The pinned ``@anthropic-ai/claude-code`` is installed from npm into ``<repo>/.cache`` (or the
folder ``QMEM_TEST_CLAUDE_DIR`` names) and reused while present. The package is a thin wrapper:
its ``bin/claude.exe`` is a stub until its postinstall (``install.cjs``) links in the native
binary of the platform package npm installed beside it. npm runs with ``--ignore-scripts``, so
the fixture then runs that same ``install.cjs`` itself, inside a network namespace: it only links
a file. Without node, npm, unshare or ip these tests skip (and fail under ``CI``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO_ROOT, require_tool

CLAUDE_VERSION = "2.1.197"
CLAUDE_PACKAGE = f"@anthropic-ai/claude-code@{CLAUDE_VERSION}"
STUB_MAX_BYTES = 4096  # the placeholder bin/claude.exe is a short shell script
# read at import: the autouse isolation fixture clears QMEM_* from each test's environment
_CACHE_OVERRIDE = os.environ.get("QMEM_TEST_CLAUDE_DIR", "")


def _cache_dir() -> Path:
    if _CACHE_OVERRIDE:
        return Path(_CACHE_OVERRIDE)
    return REPO_ROOT / ".cache" / f"claude-code-{CLAUDE_VERSION}"


def _package_dir(cache: Path) -> Path:
    return cache / "node_modules" / "@anthropic-ai" / "claude-code"


def _installed(cache: Path) -> bool:
    """The pinned version is there and its native binary is in place (not the stub)."""
    package = _package_dir(cache)
    try:
        manifest = json.loads((package / "package.json").read_text("utf-8"))
        binary = (package / "bin" / "claude.exe").stat()
    except (OSError, ValueError):
        return False
    return manifest.get("version") == CLAUDE_VERSION and binary.st_size > STUB_MAX_BYTES


def namespace_prefix() -> list[str]:
    """``unshare -n`` (root) or ``unshare -rn`` (a user namespace), checked by bringing lo up."""
    require_tool(shutil.which("unshare") is not None, "unshare (util-linux)")
    require_tool(shutil.which("ip") is not None, "ip (apt-get install iproute2)")
    prefix = ["unshare", "-n"] if os.geteuid() == 0 else ["unshare", "-rn"]
    probe = subprocess.run([*prefix, "ip", "link", "set", "lo", "up"], capture_output=True)
    what = f"a network namespace ({' '.join(prefix)}): {probe.stderr.decode(errors='replace')}"
    require_tool(probe.returncode == 0, what)
    return prefix


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        pytest.fail(f"{what} failed:\n{done.stdout[-1000:]}\n{done.stderr[-2000:]}")


def _install(cache: Path, prefix: list[str]) -> None:
    """``npm install`` and the postinstall into a scratch folder beside ``cache``, then move it.

    The binary is hard-linked (or copied) by ``install.cjs`` within the scratch folder, so the
    finished folder can be renamed into place as a whole.
    """
    cache.parent.mkdir(parents=True, exist_ok=True)
    scratch = cache.with_name(f"{cache.name}.installing-{os.getpid()}")
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        command = ["npm", "install", "--prefix", str(scratch), CLAUDE_PACKAGE]
        command += ["--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
        _run(command, f"npm install {CLAUDE_PACKAGE}")
        postinstall = [*prefix, "node", str(_package_dir(scratch) / "install.cjs")]
        _run(postinstall, f"{CLAUDE_PACKAGE}'s install.cjs (links the native binary)")
        if not _installed(scratch):
            pytest.fail(f"{CLAUDE_PACKAGE}: no native binary for this platform was installed")
        shutil.rmtree(cache, ignore_errors=True)
        scratch.rename(cache)
    except OSError:  # another test process installed it first
        pass
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture(scope="session")
def claude_exe() -> Path:
    """The ``claude`` command of the installed package (installed on first use).

    Never run it outside ``namespace_prefix()``: it must not reach anything but loopback.
    """
    require_tool(shutil.which("node") is not None, "node (apt-get install nodejs)")
    require_tool(shutil.which("npm") is not None, "npm (apt-get install npm)")
    prefix = namespace_prefix()
    cache = _cache_dir()
    if not _installed(cache):
        _install(cache, prefix)
    assert _installed(cache), f"{CLAUDE_PACKAGE} is not installed in {cache}"
    return cache / "node_modules" / ".bin" / "claude"
