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
import shutil
from pathlib import Path

import pytest
from conftest import require_tool
from real_clients import namespace_prefix, npm_cache, npm_install, run_or_fail

CLAUDE_VERSION = "2.1.197"
CLAUDE_PACKAGE = f"@anthropic-ai/claude-code@{CLAUDE_VERSION}"
STUB_MAX_BYTES = 4096  # the placeholder bin/claude.exe is a short shell script
_CACHE = npm_cache("QMEM_TEST_CLAUDE_DIR", f"claude-code-{CLAUDE_VERSION}")


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


def _link_binary(prefix: list[str], scratch: Path) -> None:
    """The package's postinstall, in ``prefix``'s namespace: it hard-links (or copies) the native
    binary within the scratch folder, so the folder can be moved into place as a whole."""
    postinstall = [*prefix, "node", str(_package_dir(scratch) / "install.cjs")]
    run_or_fail(postinstall, f"{CLAUDE_PACKAGE}'s install.cjs (links the native binary)")
    if not _installed(scratch):
        pytest.fail(f"{CLAUDE_PACKAGE}: no native binary for this platform was installed")


@pytest.fixture(scope="session")
def claude_exe() -> Path:
    """The ``claude`` command of the installed package (installed on first use).

    Never run it outside ``namespace_prefix()``: it must not reach anything but loopback.
    """
    require_tool(shutil.which("node") is not None, "node (apt-get install nodejs)")
    require_tool(shutil.which("npm") is not None, "npm (apt-get install npm)")
    prefix = namespace_prefix()
    if not _installed(_CACHE):
        npm_install(_CACHE, CLAUDE_PACKAGE, lambda scratch: _link_binary(prefix, scratch))
    assert _installed(_CACHE), f"{CLAUDE_PACKAGE} is not installed in {_CACHE}"
    return _CACHE / "node_modules" / ".bin" / "claude"
