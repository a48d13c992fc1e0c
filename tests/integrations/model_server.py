"""A real chat-completions server on 127.0.0.1 for tests: scripted replies, recorded requests.

No patching of ``requests``: the client under test opens real sockets to this server.

    with ModelServer() as server:
        server.script(chat({"patches": []}), Reply(status=429, headers={"Retry-After": "1"}))
        config = server.config()
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from qmem_git.modelconfig import ApiKey, ModelConfig

API_KEY = "sk-test-" + "k3y" * 10 + "-do-not-print"
MODEL = "qwen-test"


@dataclass
class Reply:
    """One scripted HTTP answer; ``delay`` seconds pass before anything is sent.

    ``trickle``: seconds between single bytes of the body (of the whole response, status line
    included, with ``trickle_head``). ``padding``: that many spaces after the body (JSON still
    parses), sent in 64 KiB pieces; ``content_length`` False leaves the length out, so the end
    of the body is the end of the connection.
    """

    status: int = 200
    body: Any = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    trickle: float = 0.0
    trickle_head: bool = False
    padding: int = 0
    content_length: bool = True

    def payload(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode("utf-8")
        return json.dumps(self.body).encode("utf-8")


def chat(content: object, **extra: Any) -> Reply:
    """A 200 chat-completions response whose message content is ``content`` (JSON-encoded
    unless it is already a string)."""
    text = content if isinstance(content, str) else json.dumps(content)
    body = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": MODEL,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    return Reply(200, body, {"Content-Type": "application/json"}, **extra)


def error(status: int, message: str = "failed", **extra: Any) -> Reply:
    """An OpenAI-style error body."""
    return Reply(status, {"error": {"message": message, "type": "error"}}, **extra)


@dataclass
class Recorded:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    def message(self, role: str) -> str:
        return next(m["content"] for m in self.json["messages"] if m["role"] == role)


class ModelServer:
    """The server, its script (a queue of replies) and what it received."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[Recorded] = []
        self.sent: list[int] = []  # body bytes written per finished reply
        self.stopping = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def _serve(self) -> None:
        self.httpd.serve_forever(poll_interval=0.02)  # a fast shutdown keeps tests fast

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def config(self, **overrides: Any) -> ModelConfig:
        """A config for this server with a key and short timeouts (tests must stay fast)."""
        values: dict[str, Any] = {
            "base_url": self.base_url,
            "model": MODEL,
            "api_key": ApiKey(API_KEY),
            "connect_timeout": 2.0,
            "read_timeout": 2.0,
            "max_retries": 2,
            "max_retry_wait": 0.05,
        }
        values.update(overrides)
        return ModelConfig(**values)

    def __enter__(self) -> ModelServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                server.requests.append(
                    Recorded("POST", self.path, dict(self.headers), body, time.monotonic())
                )
                reply = server.replies.popleft() if server.replies else error(500, "unscripted")
                if reply.delay and server.stopping.wait(reply.delay):
                    return
                self._send(reply)

            def do_GET(self) -> None:
                self._send(error(404, "not found"))

            def _send(self, reply: Reply) -> None:
                data = reply.payload()
                written = 0
                try:
                    head = [f"{self.protocol_version} {reply.status} Scripted"]
                    head += [f"{key}: {value}" for key, value in reply.headers.items()]
                    if reply.content_length:
                        head.append(f"Content-Length: {len(data) + reply.padding}")
                    raw_head = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")
                    if reply.trickle and reply.trickle_head:
                        data, raw_head = raw_head + data, b""
                    self.wfile.write(raw_head)
                    self.wfile.flush()
                    if reply.trickle:
                        for index in range(len(data)):
                            if server.stopping.wait(reply.trickle):
                                return
                            self.wfile.write(data[index : index + 1])
                            self.wfile.flush()
                            written += 1
                    else:
                        self.wfile.write(data)
                        written = len(data)
                    filler = b" " * 65536
                    while written - len(data) < reply.padding and not server.stopping.is_set():
                        piece = filler[: reply.padding - (written - len(data))]
                        self.wfile.write(piece)
                        written += len(piece)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout and size tests)
                finally:
                    server.sent.append(written)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def refused_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
