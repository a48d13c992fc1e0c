"""Real git servers on 127.0.0.1 for the sync tests: bare repos, ``git daemon``, smart HTTP.

The HTTP server is C git's ``git http-backend`` run as CGI behind a small threaded
``http.server`` with Basic auth; it runs in its own process (``python servers.py http ...``) so a
test can kill it mid-transfer. ``--die-on-receive-pack`` makes it exit as soon as a push has
uploaded its pack, before answering: a server dying in the middle of a push.
"""

from __future__ import annotations

import base64
import contextlib
import getpass
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from conftest import require_tool
from helpers_git import git_argv

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.02)
    raise RuntimeError(f"nothing listens on port {port}")


def init_bare(path: Path) -> Path:
    """A bare repository whose HEAD is ``main`` (what a hosting service creates)."""
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(path)], check=True)
    return path


def git_in(repo: Path, *args: str, stdin: str | bytes | None = None) -> str:
    data = stdin.encode() if isinstance(stdin, str) else stdin
    proc = subprocess.run(
        [*git_argv(str(repo)), *args], input=data, capture_output=True, check=True, timeout=60
    )
    return proc.stdout.decode()


def fsck_strict(repo: Path) -> None:
    subprocess.run([*git_argv(str(repo)), "fsck", "--strict"], check=True, capture_output=True)


class GitDaemon:
    """``git daemon`` serving every repo under ``base`` with pushes enabled."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self, name: str) -> str:
        return f"git://127.0.0.1:{self.port}/{name}"

    def start(self) -> GitDaemon:
        self.proc = subprocess.Popen(
            [
                "git",
                "daemon",
                "--reuseaddr",
                f"--base-path={self.base}",
                "--export-all",
                "--enable=receive-pack",
                f"--port={self.port}",
                "--listen=127.0.0.1",
                str(self.base),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port)
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None


class SshServer:
    """OpenSSH's ``sshd`` on 127.0.0.1: a throwaway host key, one authorised client key.

    Clients use :attr:`command` (``ssh -F <config>``, for ``GIT_SSH_COMMAND``) and the host
    alias in :meth:`url`, so nothing reads or writes the user's own ``~/.ssh``. The server runs
    ``git-upload-pack`` / ``git-receive-pack`` through the login shell of the current user.
    """

    SSHD = "/usr/sbin/sshd"
    HOST = "qmem-test-sshd"

    def __init__(self, work: Path) -> None:
        self.work = work
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.command = f"ssh -F {work / 'ssh_config'}"

    def url(self, path: Path) -> str:
        return f"ssh://{self.HOST}{path}"

    def start(self) -> SshServer:
        require_tool(os.path.exists(self.SSHD), "sshd (apt-get install openssh-server)")
        self.work.mkdir(parents=True, exist_ok=True)
        for name in ("host_key", "client_key"):
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.work / name)],
                check=True,
            )
        (self.work / "authorized_keys").write_bytes((self.work / "client_key.pub").read_bytes())
        self._write_configs()
        if os.geteuid() == 0:
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation
        with open(self.work / "sshd.log", "wb") as log:
            self.proc = subprocess.Popen(
                [self.SSHD, "-D", "-e", "-f", str(self.work / "sshd_config")],
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        wait_for_port(self.port)
        return self

    def _write_configs(self) -> None:
        work = self.work
        (work / "sshd_config").write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {work / 'host_key'}\n"
            f"AuthorizedKeysFile {work / 'authorized_keys'}\nPidFile {work / 'sshd.pid'}\n"
            "StrictModes no\nUsePAM no\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
        )
        (work / "ssh_config").write_text(
            f"Host {self.HOST}\n  HostName 127.0.0.1\n  Port {self.port}\n"
            f"  User {getpass.getuser()}\n  IdentityFile {work / 'client_key'}\n"
            "  IdentitiesOnly yes\n  StrictHostKeyChecking no\n"
            "  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"
        )

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None


class HttpGitServer:
    """``git http-backend`` behind Basic auth, in a child process that can be killed."""

    def __init__(self, root: Path, user: str = "alice", password: str = "s3cret-token") -> None:
        self.root = root
        self.user = user
        self.password = password
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self, name: str, *, auth: bool = False) -> str:
        userinfo = f"{self.user}:{self.password}@" if auth else ""
        return f"http://{userinfo}127.0.0.1:{self.port}/{name}"

    def start(self, *, die_on_receive_pack: bool = False) -> HttpGitServer:
        args = [sys.executable, str(HERE / "servers.py"), "http", str(self.root), str(self.port)]
        args += [self.user, self.password]
        if die_on_receive_pack:
            args.append("--die-on-receive-pack")
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port)
        return self

    def wait_dead(self, timeout: float = 10.0) -> int | None:
        assert self.proc is not None
        code = self.proc.wait(timeout)
        self.proc = None
        return code

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None


@contextlib.contextmanager
def silent_server() -> Iterator[int]:
    """A port that accepts TCP connections (kernel backlog) and never says a word."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield int(sock.getsockname()[1])
    finally:
        sock.close()


def closed_port() -> int:
    """A port nothing listens on (connections are refused)."""
    return free_port()


# --- the CGI server process -------------------------------------------------------------------


def _backend() -> str:
    exec_path = subprocess.run(
        ["git", "--exec-path"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return os.path.join(exec_path, "git-http-backend")


def _handler(root: str, user: str, password: str, die: bool) -> type[BaseHTTPRequestHandler]:
    backend = _backend()
    expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            del format, args

        def do_GET(self) -> None:
            self._cgi()

        def do_POST(self) -> None:
            self._cgi()

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                chunks = []
                while True:
                    size = int(self.rfile.readline().strip().split(b";")[0], 16)
                    if size == 0:
                        self.rfile.readline()
                        return b"".join(chunks)
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _cgi(self) -> None:
            body = self._body() if self.command == "POST" else b""
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="qmem test"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            path, _, query = self.path.partition("?")
            if die and self.command == "POST" and path.endswith("/git-receive-pack"):
                os._exit(3)  # the pack was uploaded; the server dies before answering
            env = {
                **os.environ,
                "GIT_PROJECT_ROOT": root,
                "GIT_HTTP_EXPORT_ALL": "1",
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "REQUEST_METHOD": self.command,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
                "REMOTE_USER": user,
                "REMOTE_ADDR": "127.0.0.1",
                "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
                "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
            }
            out = subprocess.run([backend], input=body, env=env, capture_output=True).stdout
            head, _, payload = out.partition(b"\r\n\r\n")
            if not _:
                head, _, payload = out.partition(b"\n\n")
            status, headers = 200, []
            for line in head.decode("latin-1").splitlines():
                key, _, value = line.partition(":")
                if key.lower() == "status":
                    status = int(value.split()[0])
                elif key:
                    headers.append((key, value.strip()))
            self.send_response(status)
            for key, value in headers:
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


def serve_http(root: str, port: int, user: str, password: str, die: bool) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(root, user, password, die))
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    if sys.argv[1] == "http":
        serve_http(
            sys.argv[2],
            int(sys.argv[3]),
            sys.argv[4],
            sys.argv[5],
            "--die-on-receive-pack" in sys.argv[6:],
        )


# --- machines: memory stores driven through the library ------------------------------------------


class Machine:
    """One machine's memory store (own HOME-like base dir and memory root), driven in process.

    ``clock`` is shared by all machines of a test so commit times increase across machines.
    """

    def __init__(self, base: Path, name: str, clock: list[int], **env: str) -> None:
        self.name = name
        self.root = base / name / "memory"
        self.clock = clock
        self.env = {**os.environ, "QMEM_HOST": name, "QMEM_TELEMETRY": "0", **env}

    @property
    def settings(self):  # type: ignore[no-untyped-def]
        from qmem_git.settings import build_settings

        return build_settings(self.env, memory_dir=str(self.root))

    def now(self):  # type: ignore[no-untyped-def]
        from datetime import datetime, timezone

        self.clock[0] += 60
        return datetime.fromtimestamp(self.clock[0], timezone.utc)

    def remember(self, text: str, why: str | None = None) -> str | None:
        from qmem_git.ops.lifecycle import ensure_repository
        from qmem_git.ops.remember import plan_remember
        from qmem_git.ops.runner import execute

        now = self.now()
        ensure_repository(self.settings, now)
        settings = self.settings
        outcome = execute(
            settings, lambda: plan_remember(str(self.root), text, why=why, now=now), now
        )
        return outcome.commit

    def forget_path(self, rel: str) -> None:
        from qmem_git.ops.pipeline import run_forget

        run_forget(self.settings, self.now(), query=None, ids=[rel])

    def dream(self) -> None:
        from qmem_git.ops.pipeline import run_dream

        run_dream(self.settings, self.now(), force=True)

    def sync(self, remote: str | None = None, **options: bool):  # type: ignore[no-untyped-def]
        from qmem_git.ops.sync import run_sync

        return run_sync(self.settings, self.now(), remote=remote, **options).result

    def connect(self, url: str):  # type: ignore[no-untyped-def]
        from qmem_git.ops.sync import connect

        return connect(self.settings, url, self.now())

    def clone(self, url: str, merge: bool = False):  # type: ignore[no-untyped-def]
        from qmem_git.ops.sync import run_clone

        return run_clone(self.settings, url, self.now(), merge=merge)

    def head(self) -> str:
        return git_in(self.root, "rev-parse", "HEAD").strip()

    def files(self) -> dict[str, str]:
        """Memory files (not MEMORY.md) -> text."""
        return {
            str(p.relative_to(self.root)): p.read_text(encoding="utf-8")
            for p in sorted(self.root.rglob("*.md"))
            if ".git" not in p.parts and p.name != "MEMORY.md" and p.is_file()
        }

    def summaries(self) -> list[str]:
        from qmem_git.core.codec import split_frontmatter
        from qmem_git.core.entries import parse_entries

        found = []
        for text in self.files().values():
            split = split_frontmatter(text)
            assert split is not None, text
            found += [entry.summary for entry in parse_entries(split.body)]
        return sorted(found)

    def path_of(self, summary: str) -> str | None:
        for rel, text in self.files().items():
            if summary in text:
                return rel
        return None

    def mtimes(self) -> dict[str, int]:
        return {
            str(p.relative_to(self.root)): int(p.stat().st_mtime)
            for p in self.root.rglob("*.md")
            if ".git" not in p.parts
        }
