"""Settings built once from the environment by the CLI and passed down (ARCHITECTURE §2)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import NamedTuple

from qmem_git.core.limits import QUIET_SECONDS
from qmem_git.core.paths import Layout, chats_dir, expand_dir, tier_layout
from qmem_git.envvalues import DEFAULT_LOCK_TIMEOUT, current_dir, lock_timeout
from qmem_git.store.qwensettings import runtime_output_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmem_git.modelconfig import ModelConfig


class Settings(NamedTuple):
    """Everything an operation needs to know about where it runs.

    A NamedTuple, not a frozen dataclass: ~0.2 ms instead of ~0.9 ms to define, on every
    command (``remember`` included).
    """

    layout: Layout
    host: str
    home: str
    cwd: str
    env: Mapping[str, str]  # may hold API keys (QMEM_LLM_API_KEY): left out of repr()
    telemetry: bool = True
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    author_name: str = ""
    author_email: str = ""
    model: ModelConfig | None = None  # the optional LLM endpoint (modelconfig.py); None = none
    auto_dream: bool = True  # QMEM_AUTO_DREAM=0: gated (scheduled) dreams are skipped
    output_dir: str | None = None  # Qwen's settings: advanced.runtimeOutputDir, as written
    # QMEM_QUIET_SECONDS: a file changed more recently is held back as still being written
    quiet_seconds: float = QUIET_SECONDS
    agent: str = "qwen"  # --agent claude: the store is Claude Code's auto-memory folder

    def __repr__(self) -> str:
        pairs = zip(self._fields, self, strict=True)
        return f"Settings({', '.join(f'{k}={v!r}' for k, v in pairs if k != 'env')})"

    @property
    def chats_dir(self) -> str:
        project = self.layout.project_root or self.cwd
        return chats_dir(project, self.env, self.home, self.cwd, self.output_dir)


def build_settings(
    env: Mapping[str, str],
    *,
    project: str | None = None,
    memory_dir: str | None = None,
    cwd: str | None = None,
    home: str | None = None,
    with_model: bool = True,
    tier: str = "project",
    agent: str = "qwen",
) -> Settings:
    """Resolve the layout from flags and env (``--memory-dir`` > spec §2 resolution).

    ``with_model=False``: leave the model endpoint unread (``model`` None), for a command that
    never calls one (``remember``): its config module and files cost every call ~3 ms.
    ``tier``: Qwen's memory tier (``--tier``, :func:`qmem_git.core.paths.tier_layout`).
    """
    cwd = cwd or current_dir()
    home = home or env.get("HOME") or os.path.expanduser("~")
    output_dir = runtime_output_dir(env, home, cwd, expand_dir(project or cwd, home, cwd))
    layout = tier_layout(tier, project, memory_dir, env, home, cwd, os.path.lexists, output_dir)
    if agent == "claude" or layout.mode == "explicit":
        from qmem_git.store.claudesettings import claude_layout_for

        layout, agent = claude_layout_for(layout, agent, project, env, home, cwd)
    return Settings(
        layout=layout,
        host=env.get("QMEM_HOST") or _hostname() or "localhost",
        home=home,
        cwd=cwd,
        env=dict(env),
        telemetry=env.get("QMEM_TELEMETRY", "1") != "0",
        lock_timeout=lock_timeout(env),
        author_name=env.get("GIT_AUTHOR_NAME", ""),
        author_email=env.get("GIT_AUTHOR_EMAIL", ""),
        model=_model(env, home) if with_model else None,
        auto_dream=env.get("QMEM_AUTO_DREAM", "1") != "0",
        output_dir=output_dir,
        quiet_seconds=_seconds(env.get("QMEM_QUIET_SECONDS"), QUIET_SECONDS),
        agent=agent,
    )


def _seconds(value: str | None, default: float) -> float:
    """A non-negative number of seconds from the environment; ``default`` when unset or bad."""
    try:
        seconds = float(value) if value else default
    except ValueError:
        return default
    return seconds if seconds >= 0 and seconds == seconds else default


def _model(env: Mapping[str, str], home: str) -> ModelConfig | None:
    from qmem_git.modelconfig import load_model_config

    return load_model_config(env, home).config


def _hostname() -> str:
    """``socket.gethostname()`` without importing socket (~5 ms) where ``os.uname`` exists."""
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket  # pragma: no cover - Windows

    return socket.gethostname()  # pragma: no cover
