"""Loopback git servers that misbehave, for the sync's bounds: one that drips its ref
advertisement (a valid line every so often, never finished) and one that floods it (endless
distinct ref names, as fast as the socket takes them), over git:// and smart HTTP.

They run in threads of the test process; each connection is served until the client hangs up.
``connections`` counts the clients that reached the advertisement.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
import time

SHA = b"1" * 40
_CAPS = b"multi_ack side-band-64k ofs-delta agent=hostile"


def pkt(data: bytes) -> bytes:
    return f"{len(data) + 4:04x}".encode() + data


def ref_line(n: int, *, long: bool) -> bytes:
    name = f"refs/heads/{'flood-' * 30 if long else 'drip-'}{n}".encode()
    return pkt(SHA + b" " + name + b"\n")


class HostileServer:
    """``mode``: ``drip`` (one ref line every ``interval`` s) or ``flood``; ``kind``: ``git``
    (git://) or ``http`` (smart HTTP, an advertisement without Content-Length)."""

    def __init__(self, mode: str, kind: str, interval: float = 0.5) -> None:
        self.mode, self.kind, self.interval = mode, kind, interval
        self.connections = 0
        self.stop_event = threading.Event()
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                outer.serve(self.request)

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, name: str = "memory.git") -> str:
        return f"{self.kind}://127.0.0.1:{self.port}/{name}"

    def __enter__(self) -> HostileServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        self.server.shutdown()
        self.server.server_close()

    def serve(self, sock: socket.socket) -> None:
        sock.recv(65536)  # the git:// request line, or the HTTP GET of info/refs
        self.connections += 1
        with contextlib.suppress(OSError):  # the client hung up: what a bounded client does
            if self.kind == "http":
                sock.sendall(
                    b"HTTP/1.1 200 OK\r\n"
                    b"Content-Type: application/x-git-upload-pack-advertisement\r\n"
                    b"Cache-Control: no-cache\r\nConnection: close\r\n\r\n"
                )
            sock.sendall(self._head())
            n = 0
            while not self.stop_event.is_set():
                sock.sendall(ref_line(n, long=self.mode == "flood"))
                n += 1
                if self.mode == "drip":
                    time.sleep(self.interval)

    def _head(self) -> bytes:
        first = pkt(SHA + b" HEAD\0" + _CAPS + b"\n")
        if self.kind == "git":
            return first
        return pkt(b"# service=git-upload-pack\n") + b"0000" + first
