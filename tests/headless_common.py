"""What the two end-to-end drivers, ``qwen/headless.py`` and ``claude/headless.py``, share.

A driver runs as a script under ``unshare -n`` (``python headless.py RUN.json``): ``main`` brings
the namespace's loopback up, serves the client's model API (the driver's ``Handler``) on
127.0.0.1 in a thread, runs the client with the run's arguments and environment, waits for it to
exit and then for every process still running with the run's HOME (qmem-git's detached hook
worker) to finish, and writes what happened to the run's ``out`` file as JSON: the requests the
server recorded, the client's exit status and output, and how long the stragglers took.

Only the standard library: the namespace has no network, and the drivers must not depend on the
package under test. Replies are scripted by rules (see ``matching_rule``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Rule = dict[str, Any]
Pick = Callable[[list[Rule], dict[str, Any], dict[int, int]], dict[str, Any]]


def matching_rule(rules: list[Rule], text: str, used: dict[int, int]) -> Rule | None:
    """The first rule whose every ``when`` substring occurs in ``text`` and whose ``unless``
    substrings do not, and which has ``times`` left (counted in ``used``)."""
    for number, rule in enumerate(rules):
        if used.get(number, 0) >= rule.get("times", 1_000_000):
            continue
        if all(s in text for s in rule.get("when", [])) and not any(
            s in text for s in rule.get("unless", [])
        ):
            used[number] = used.get(number, 0) + 1
            return rule
    return None


class Server(ThreadingHTTPServer):
    """The scripted model server; ``requests`` keeps every request it recorded, in order."""

    daemon_threads = True

    def __init__(self, rules: list[Rule], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.rules = rules
        self.used: dict[int, int] = {}
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.started = time.monotonic()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client closing its keep-alive connection is not an error worth a traceback."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def record(self, handler: BaseHTTPRequestHandler, body: Any, reply: Any) -> int:
        """Keep one request; its number (1 for the first)."""
        with self.lock:
            return self._append(handler, body, reply)

    def answer(
        self, handler: BaseHTTPRequestHandler, body: dict[str, Any], pick: Pick
    ) -> tuple[dict[str, Any], int]:
        """The scripted reply to ``body`` (after its ``delay``), recorded; and its number."""
        with self.lock:
            reply = pick(self.rules, body, self.used)
            number = self._append(handler, body, reply)
        time.sleep(reply.get("delay", 0))
        return reply, number

    def _append(self, handler: BaseHTTPRequestHandler, body: Any, reply: Any) -> int:
        self.requests.append(
            {
                "at": round(time.monotonic() - self.started, 3),
                "method": handler.command,
                "path": handler.path,
                "headers": dict(handler.headers.items()),
                "body": body,
                "reply": reply,
            }
        )
        return len(self.requests)


class Handler(BaseHTTPRequestHandler):
    """The plumbing of a driver's request handler: read a JSON body, send an answer, no log."""

    protocol_version = "HTTP/1.1"
    server: Server
    extra_headers: tuple[tuple[str, str], ...] = ()

    def json_body(self) -> Any:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            return json.loads(raw)
        except ValueError:
            return {"unparsed": raw.decode("utf-8", "replace")}

    def send(self, data: bytes, kind: str = "application/json", status: int = 200) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        for name, value in self.extra_headers:
            self.send_header(name, value)
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def processes_of(home: str) -> list[dict[str, Any]]:
    """Running processes (not this one) started with ``HOME=home``: what the client left behind.

    The environment, not the command line, tells them: a hook's detached worker inherits HOME
    whatever its arguments are.
    """
    wanted = b"HOME=" + home.encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if wanted not in handle.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
        except OSError:
            continue
        found.append({"pid": int(entry), "cmdline": b" ".join(argv).decode("utf-8", "replace")})
    return found


def run(
    spec: dict[str, Any],
    client: str,
    handler: type[Handler],
    url_variable: str,
    url_path: str = "",
    stdin: int | None = None,
) -> dict[str, Any]:
    """Run the command ``spec[client]`` against ``handler``'s server, whose URL (``url_path``
    appended) it gets in ``url_variable``; the result, the client's run under ``client``."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    server = Server(spec["rules"], handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    env = dict(spec["env"])
    env[url_variable] = f"http://127.0.0.1:{server.server_address[1]}{url_path}"
    started = time.monotonic()
    try:
        done = subprocess.run(
            [spec[client], *spec["args"]],
            cwd=spec["cwd"],
            env=env,
            capture_output=True,
            text=True,
            timeout=spec.get("timeout", 90),
            check=False,
            stdin=stdin,
        )
        ran = {"rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr[-8000:]}
    except subprocess.TimeoutExpired as exc:
        ran = {"rc": "timeout", "stdout": str(exc.stdout), "stderr": str(exc.stderr)[-8000:]}
    ran["seconds"] = round(time.monotonic() - started, 3)
    ran["exited_at"] = round(time.monotonic() - server.started, 3)
    ran["exited_wall"] = time.time()
    exited = time.monotonic()
    home = env["HOME"]
    left = processes_of(home)
    deadline = exited + spec.get("settle_timeout", 30)
    while processes_of(home) and time.monotonic() < deadline:
        time.sleep(0.05)
    stragglers = processes_of(home)
    for process in stragglers:  # this run's own leftovers: stop them, the test reports them
        with contextlib.suppress(OSError):
            os.kill(process["pid"], signal.SIGKILL)
    server.shutdown()
    with server.lock:
        requests = list(server.requests)
    return {
        "interfaces": sorted(name for _, name in socket.if_nameindex()),
        "requests": requests,
        client: ran,
        "left_at_exit": left,
        "settled_seconds": round(time.monotonic() - exited, 3),
        "still_running": stragglers,
    }


def main(argv: list[str], **client: Any) -> int:
    """``run`` the spec file ``argv[0]`` names, ``client`` as ``run`` takes it; write the result."""
    with open(argv[0], encoding="utf-8") as handle:
        spec = json.load(handle)
    result = run(spec, **client)
    with open(spec["out"], "w", encoding="utf-8") as handle:
        json.dump(result, handle, ensure_ascii=False, indent=1)
    return 0
