"""What the real-client tests (``tests/qwen``, ``tests/claude``) share: installing a pinned npm
package once, and running a client headless through its driver in a loopback-only namespace.

A headless test sets up a project with one remembered memory and qmem-git's hooks
(``HeadlessRun.set_up``), runs the client through its driver (``HeadlessRun.drive``), then reads
what the model received and the memory repository (``qmem-git log --json`` and C git).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pytest
from conftest import REPO_ROOT, require_tool

from qmem_git.integrations.agents import log_path

RECALL_TOKEN = "quagga7"  # only in the remembered memory's body: once per recall of it
REMEMBERED = "The zebra project builds with pnpm, never npm."
ANSWER = "Use pnpm."

Rules = list[dict[str, Any]]
Run = TypeVar("Run", bound="HeadlessRun")


def npm_cache(variable: str, name: str) -> Path:
    """The folder ``variable`` names, else ``<repo>/.cache/<name>``; read it at import: the
    autouse isolation fixture clears QMEM_* from each test's environment."""
    override = os.environ.get(variable, "")
    return Path(override) if override else REPO_ROOT / ".cache" / name


def npm_install(
    cache: Path, package: str, finish: Callable[[Path], None] = lambda scratch: None
) -> None:
    """``npm install`` into a scratch folder beside ``cache``, ``finish`` it there (fail the test
    if it is unusable), then move it into place as a whole."""
    cache.parent.mkdir(parents=True, exist_ok=True)
    scratch = cache.with_name(f"{cache.name}.installing-{os.getpid()}")
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        command = ["npm", "install", "--prefix", str(scratch), package]
        command += ["--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
        run_or_fail(command, f"npm install {package}")
        finish(scratch)
        shutil.rmtree(cache, ignore_errors=True)
        scratch.rename(cache)
    except OSError:  # another test process installed it first
        pass
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_or_fail(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        pytest.fail(f"{what} failed:\n{done.stdout[-1000:]}\n{done.stderr[-2000:]}")


def namespace_prefix() -> list[str]:
    """``unshare -n`` (root) or ``unshare -rn`` (a user namespace), checked by bringing lo up."""
    require_tool(shutil.which("unshare") is not None, "unshare (util-linux)")
    require_tool(shutil.which("ip") is not None, "ip (apt-get install iproute2)")
    prefix = ["unshare", "-n"] if os.geteuid() == 0 else ["unshare", "-rn"]
    probe = subprocess.run([*prefix, "ip", "link", "set", "lo", "up"], capture_output=True)
    what = f"a network namespace ({' '.join(prefix)}): {probe.stderr.decode(errors='replace')}"
    require_tool(probe.returncode == 0, what)
    return prefix


def qmem(env: dict[str, str], project: Path, *args: str) -> str:
    """stdout of a qmem-git run that must succeed."""
    done = subprocess.run(
        [sys.executable, "-m", "qmem_git", "--project", str(project), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=project,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def isolated_env(home: Path, client: dict[str, str]) -> dict[str, str]:
    """Only what the run needs (``client``: the client's own variables): nothing of the
    caller's HOME, QWEN_*, CLAUDE_*, QMEM_* or git config."""
    venv_bin = os.path.dirname(sys.executable)
    return {
        "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Test Author",
        "GIT_AUTHOR_EMAIL": "author@example.com",
        "GIT_COMMITTER_NAME": "Test Author",
        "GIT_COMMITTER_EMAIL": "author@example.com",
        "QMEM_TELEMETRY": "0",
        "NO_COLOR": "1",
        **client,
    }


def count(body: dict[str, Any], text: str) -> int:
    return json.dumps(body, ensure_ascii=False).count(text)


@dataclass
class HeadlessRun:
    """A project with one remembered memory and the hooks, and its last headless run: what the
    model received and where the memory lives."""

    client: ClassVar[str]  # the client's name: its part of ``result``
    driver: ClassVar[Path]  # its ``headless.py``
    env: dict[str, str]
    project: Path
    where: dict[str, Any]
    result: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def set_up(
        cls: type[Run],
        tmp: Path,
        client_env: dict[str, str],
        settings: Callable[[Path], None],
        *install: str,
    ) -> Run:
        """``tmp/home`` (``settings`` writes the client's settings there) and ``tmp/proj``, a
        git project with one remembered memory and the hooks installed (``install-hooks
        install``); not run yet."""
        home, project = tmp / "home", tmp / "proj"
        env = isolated_env(home, client_env)
        home.mkdir()
        subprocess.run(["git", "init", "-q", str(project)], check=True)
        settings(home)
        qmem(env, project, "-q", "init")
        remember = [REMEMBERED, "--why", RECALL_TOKEN]
        qmem(env, project, "-q", "remember", "--type", "project", *remember)
        qmem(env, project, "-q", "install-hooks", *install)
        return cls(env, project, json.loads(qmem(env, project, "where", "--json")))

    def drive(self, command: Path, args: list[str], rules: Rules, out: Path) -> Any:
        """One run of the client ``command`` in this HOME and project, through the driver in a
        loopback-only namespace (its files in ``out``); its result."""
        prefix = namespace_prefix()
        spec = {
            self.client: str(command),
            "args": args,
            "cwd": str(self.project),
            "env": self.env,
            "rules": rules,
            "settle_timeout": 40,
            "timeout": 90,
            "out": str(out / "result.json"),
        }
        (out / "spec.json").write_text(json.dumps(spec), "utf-8")
        argv = [*prefix, sys.executable, str(self.driver), str(out / "spec.json")]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads((out / "result.json").read_text("utf-8"))

    @property
    def memory_root(self) -> Path:
        return Path(self.where["memory_root"])

    @property
    def state_dir(self) -> Path:
        return Path(self.where["state_dir"])

    def qmem(self, *args: str) -> str:
        return qmem(self.env, self.project, *args)

    @property
    def git_dir(self) -> Path:
        """The memory repository's git dir: ``where`` may name it; else beside or in the root."""
        named = self.where.get("git_dir")
        candidates = [Path(named)] if named else []
        root = self.memory_root
        candidates += [root.parent / f"{root.name}.git", root / ".git"]
        return next(path for path in candidates if path.is_dir())

    def git(self, *args: str) -> bytes:
        """C git on the memory repository."""
        done = subprocess.run(
            ["git", "--git-dir", str(self.git_dir), *args],
            capture_output=True,
            env=self.env,
            timeout=60,
            check=True,
        )
        return done.stdout

    def operations(self) -> list[dict[str, Any]]:
        return list(json.loads(self.qmem("log", "--json")))

    def uncommitted(self) -> list[str]:
        """Memory files (any ``*.md`` below the root) whose bytes differ from HEAD's."""
        committed = set(self.git("ls-tree", "-r", "--name-only", "HEAD").decode().splitlines())
        differ = []
        for path in sorted(self.memory_root.rglob("*.md")):
            relative = path.relative_to(self.memory_root)
            if ".git" in relative.parts:
                continue
            name = relative.as_posix()
            if name not in committed or self.git("show", f"HEAD:{name}") != path.read_bytes():
                differ.append(name)
        return differ

    def hook_log(self) -> str:
        log = Path(log_path(str(self.state_dir)))
        return log.read_text("utf-8", "replace") if log.exists() else ""

    def hook_problems(self) -> list[str]:
        """Lines of qmem-git's hook log that report a crash or a failed worker step."""
        lines = self.hook_log().splitlines()
        return [line for line in lines if "internal error" in line or " worker " in line]

    def explain(self) -> str:
        """What a failing assertion should show: the client's output, the hook log, stragglers."""
        ran = self.result[self.client]
        return (
            f"{self.client} exit {ran['rc']} after {ran['seconds']} s\n"
            f"stdout: {ran['stdout'][-800:]}\nstderr: {ran['stderr'][-1500:]}\n"
            f"hook log: {self.hook_log()[-1500:] or '(empty)'}\n"
            f"still running {self.result['settled_seconds']} s after exit: "
            f"{self.result['still_running']}"
        )
