"""Drive the real ``claude -p`` against a scripted Anthropic Messages API, in one network namespace.

Run as a script under ``unshare -n`` (``python headless.py RUN.json``): it brings the namespace's
loopback up, serves the Messages API on 127.0.0.1 (``POST /v1/messages``, streamed as SSE when
asked, ``tool_use`` blocks included, and ``POST /v1/messages/count_tokens``), runs ``claude`` with
the run's arguments and environment, waits for it to exit and then for every process still
running with the run's HOME (qmem-git's detached hook worker) to finish, and writes what happened
to the run's ``out`` file as JSON: every request the server received (method, path, headers,
body), claude's exit status and output, and how long the stragglers took.

Only the standard library: the namespace has no network, and this file must not depend on the
package under test. Replies are scripted by rules (see ``pick``) matched against each request.
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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Rule = dict[str, Any]
USAGE = {"input_tokens": 10, "output_tokens": 5}


def pick(rules: list[Rule], body: dict[str, Any], used: dict[int, int]) -> dict[str, Any]:
    """The first rule whose every ``when`` substring occurs in the request's new messages and
    whose ``unless`` substrings do not, and which has ``times`` left; else the default reply.

    The new messages are those after the last assistant message: the prompt (and the ``system``
    message carrying hook context) in the first request, the ``tool_result`` in a continuation.
    Matching them, not the whole request, tells the two apart: a continuation repeats the rest.
    """
    last = json.dumps(new_messages(body), ensure_ascii=False)
    for number, rule in enumerate(rules):
        if used.get(number, 0) >= rule.get("times", 1_000_000):
            continue
        if all(s in last for s in rule.get("when", [])) and not any(
            s in last for s in rule.get("unless", [])
        ):
            used[number] = used.get(number, 0) + 1
            return {**rule["reply"], "delay": rule.get("delay", 0)}
    return {"text": "OK."}


def new_messages(body: dict[str, Any]) -> list[Any]:
    messages = body.get("messages") or []
    roles = [m.get("role") if isinstance(m, dict) else None for m in messages]
    start = max((i + 1 for i, role in enumerate(roles) if role == "assistant"), default=0)
    return list(messages[start:])


def blocks(reply: dict[str, Any]) -> list[dict[str, Any]]:
    """The reply's content blocks: its text, then one ``tool_use`` per scripted call."""
    out: list[dict[str, Any]] = []
    if reply.get("text"):
        out.append({"type": "text", "text": reply["text"]})
    for index, call in enumerate(reply.get("tool_uses", [])):
        tool_id = f"toolu_qmem{index}_{call['name']}"
        out.append(
            {"type": "tool_use", "id": tool_id, "name": call["name"], "input": call["input"]}
        )
    return out


def message(reply: dict[str, Any], model: str, number: int) -> dict[str, Any]:
    """A whole (non-streamed) Messages API answer for ``reply``."""
    content = blocks(reply)
    tools = any(block["type"] == "tool_use" for block in content)
    return {
        "id": f"msg_qmem{number}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if tools else "end_turn",
        "stop_sequence": None,
        "usage": USAGE,
    }


def events(reply: dict[str, Any], model: str, number: int) -> list[tuple[str, dict[str, Any]]]:
    """The same answer as the SSE events a streamed request gets, in order."""
    whole = message(reply, model, number)
    start = {**whole, "content": [], "stop_reason": None, "usage": {**USAGE, "output_tokens": 1}}
    out: list[tuple[str, dict[str, Any]]] = [("message_start", {"message": start})]
    for index, block in enumerate(whole["content"]):
        if block["type"] == "text":
            first = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            first = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        out.append(("content_block_start", {"index": index, "content_block": first}))
        out.append(("content_block_delta", {"index": index, "delta": delta}))
        out.append(("content_block_stop", {"index": index}))
    final = {"stop_reason": whole["stop_reason"], "stop_sequence": None}
    out.append(("message_delta", {"delta": final, "usage": {"output_tokens": 5}}))
    out.append(("message_stop", {}))
    return [(name, {"type": name, **data}) for name, data in out]


class Quiet(ThreadingHTTPServer):
    """A client closing its keep-alive connection is not an error worth a traceback."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class Server:
    """The scripted Messages API; ``requests`` keeps every request it received, in order."""

    def __init__(self, rules: list[Rule]) -> None:
        self.rules = rules
        self.used: dict[int, int] = {}
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.httpd = Quiet(("127.0.0.1", 0), self._handler())

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def record(self, handler: BaseHTTPRequestHandler, body: Any, reply: Any) -> int:
        with self.lock:
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

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {"unparsed": raw.decode("utf-8", "replace")}
                path = self.path.split("?")[0]
                if path.endswith("/v1/messages/count_tokens"):
                    server.record(self, body, "count_tokens")
                    self._send(json.dumps({"input_tokens": 100}).encode(), "application/json")
                    return
                if not path.endswith("/v1/messages"):
                    server.record(self, body, "404")
                    self._send(b'{"type":"error","error":{"type":"not_found_error"}}', "", 404)
                    return
                with server.lock:
                    reply = pick(server.rules, body, server.used)
                number = server.record(self, body, reply)
                model = str(body.get("model") or "test-model")
                time.sleep(reply.get("delay", 0))
                if body.get("stream"):
                    data = b"".join(
                        f"event: {name}\ndata: {json.dumps(event)}\n\n".encode()
                        for name, event in events(reply, model, number)
                    )
                    self._send(data, "text/event-stream")
                else:
                    self._send(json.dumps(message(reply, model, number)).encode(), "")

            def do_GET(self) -> None:
                server.record(self, None, "404")
                self._send(b'{"type":"error","error":{"type":"not_found_error"}}', "", 404)

            do_HEAD = do_GET

            def _send(self, data: bytes, kind: str, status: int = 200) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind or "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("request-id", "req_qmem")
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def processes_of(home: str) -> list[dict[str, Any]]:
    """Running processes (not this one) started with ``HOME=home``: what claude left behind.

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


def run(spec: dict[str, Any]) -> dict[str, Any]:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    server = Server(spec["rules"])
    thread = threading.Thread(target=server.httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    env = dict(spec["env"])
    env["ANTHROPIC_BASE_URL"] = server.base_url
    started = time.monotonic()
    try:
        done = subprocess.run(
            [spec["claude"], *spec["args"]],
            cwd=spec["cwd"],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=spec.get("timeout", 90),
            check=False,
        )
        claude = {"rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr[-8000:]}
    except subprocess.TimeoutExpired as exc:
        claude = {"rc": "timeout", "stdout": str(exc.stdout), "stderr": str(exc.stderr)[-8000:]}
    claude["seconds"] = round(time.monotonic() - started, 3)
    claude["exited_at"] = round(time.monotonic() - server.started, 3)
    claude["exited_wall"] = time.time()
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
    server.httpd.shutdown()
    with server.lock:
        requests = list(server.requests)
    return {
        "interfaces": sorted(name for _, name in socket.if_nameindex()),
        "requests": requests,
        "claude": claude,
        "left_at_exit": left,
        "settled_seconds": round(time.monotonic() - exited, 3),
        "still_running": stragglers,
    }


def main(argv: list[str]) -> int:
    with open(argv[0], encoding="utf-8") as handle:
        spec = json.load(handle)
    result = run(spec)
    with open(spec["out"], "w", encoding="utf-8") as handle:
        json.dump(result, handle, ensure_ascii=False, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
