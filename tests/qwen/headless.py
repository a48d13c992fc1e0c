"""Drive the real ``qwen -p`` against a scripted model server, both inside one network namespace.

Run as a script under ``unshare -n`` (``python headless.py RUN.json``): it brings the
namespace's loopback up, serves OpenAI-style chat completions on 127.0.0.1 (streamed as SSE when
asked, tool calls included), runs ``qwen`` with the run's arguments and environment, waits for it
to exit and then for every process still running with the run's HOME (qmem-git's detached hook
worker) to finish, and writes what happened to the run's ``out`` file as JSON: each request the
server received, qwen's exit status and output, and how long the stragglers took.

Only the standard library: the namespace has no network, and this file must not depend on the
package under test. Replies are scripted by rules (see ``pick``) matched against each request.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Rule = dict[str, Any]
LISTED = re.compile(r"- \[[a-z]+\] (.+?) \(\d{4}-\d\d-\d\dT[^)]*\): ")


def pick(rules: list[Rule], body: dict[str, Any], used: dict[int, int]) -> dict[str, Any]:
    """The first rule whose every ``when`` substring occurs in the request's last message and
    whose ``unless`` substrings do not, and which has ``times`` left; else the default reply.

    Matching the last message (not the whole request) tells Qwen's main turn from its side
    queries and from the continuation after a tool result, which repeat the earlier messages.
    """
    messages = body.get("messages") or [{}]
    last = json.dumps(messages[-1], ensure_ascii=False)
    for number, rule in enumerate(rules):
        if used.get(number, 0) >= rule.get("times", 1_000_000):
            continue
        if all(s in last for s in rule.get("when", [])) and not any(
            s in last for s in rule.get("unless", [])
        ):
            used[number] = used.get(number, 0) + 1
            reply = {**rule["reply"], "delay": rule.get("delay", 0)}
            if rule.get("select_listed"):
                reply["tool_calls"] = [select_listed(last)]
            return reply
    return {"content": "OK."}


def select_listed(text: str) -> dict[str, Any]:
    """Qwen's recall selector (``respond_in_schema``) choosing every memory its query lists.

    The query lists one memory a line: ``- [<type>] <absolute path> (<mtime>): <description>``.
    """
    body = json.loads(text).get("content")
    if isinstance(body, list):
        body = "".join(part.get("text", "") for part in body if isinstance(part, dict))
    listed = (LISTED.match(line) for line in str(body).splitlines())
    paths = [match.group(1) for match in listed if match]
    return {"name": "respond_in_schema", "arguments": {"selected_memories": paths}}


def completion(reply: dict[str, Any], model: str) -> dict[str, Any]:
    """A whole (non-streamed) chat completion for ``reply``."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("content", "")}
    calls = _tool_calls(reply)
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl-qmem",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def chunks(reply: dict[str, Any], model: str) -> list[dict[str, Any]]:
    """The same reply as streamed chunks: role, content, each tool call, finish, usage."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-qmem",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    out = [chunk({"role": "assistant", "content": ""})]
    if reply.get("content"):
        out.append(chunk({"content": reply["content"]}))
    calls = _tool_calls(reply)
    for index, call in enumerate(calls):
        out.append(chunk({"tool_calls": [{"index": index, **call}]}))
    out.append(chunk({}, "tool_calls" if calls else "stop"))
    usage = chunk({})
    usage["choices"] = []
    usage["usage"] = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    out.append(usage)
    return out


def _tool_calls(reply: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "id": f"call_{index}_{call['name']}",
            "type": "function",
            "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])},
        }
        for index, call in enumerate(reply.get("tool_calls", []))
    ]


class Server:
    """The scripted chat-completions server; ``requests`` keeps every body it received."""

    def __init__(self, rules: list[Rule]) -> None:
        self.rules = rules
        self.used: dict[int, int] = {}
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

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
                with server.lock:
                    reply = pick(server.rules, body, server.used)
                    server.requests.append(
                        {
                            "at": round(time.monotonic() - server.started, 3),
                            "path": self.path,
                            "body": body,
                            "reply": reply,
                        }
                    )
                model = str(body.get("model") or "test-model")
                time.sleep(reply.get("delay", 0))
                if body.get("stream"):
                    data = b"".join(
                        b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks(reply, model)
                    )
                    self._send(data + b"data: [DONE]\n\n", "text/event-stream")
                else:
                    self._send(json.dumps(completion(reply, model)).encode(), "application/json")

            def do_GET(self) -> None:
                self._send(b'{"object":"list","data":[]}', "application/json")

            def _send(self, data: bytes, kind: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def processes_of(home: str) -> list[dict[str, Any]]:
    """Running processes (not this one) started with ``HOME=home``: what qwen left behind.

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
    env["OPENAI_BASE_URL"] = server.base_url
    started = time.monotonic()
    try:
        done = subprocess.run(
            [spec["qwen"], *spec["args"]],
            cwd=spec["cwd"],
            env=env,
            capture_output=True,
            text=True,
            timeout=spec.get("timeout", 90),
            check=False,
        )
        qwen = {"rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr[-8000:]}
    except subprocess.TimeoutExpired as exc:
        qwen = {"rc": "timeout", "stdout": str(exc.stdout), "stderr": str(exc.stderr)[-8000:]}
    qwen["seconds"] = round(time.monotonic() - started, 3)
    qwen["exited_at"] = round(time.monotonic() - server.started, 3)
    qwen["exited_wall"] = time.time()
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
        "qwen": qwen,
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
