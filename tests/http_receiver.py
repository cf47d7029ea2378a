"""A real HTTP receiver on 127.0.0.1 for alert delivery tests (stdlib ThreadingHTTPServer in a thread).

It records every request (method, path, headers, body) before it decides how to answer, so a test
sees failed attempts too. How it answers is a script: one behaviour per request, in order, then
``default``. Behaviours: ``"ok"`` (200), an HTTP status code (500, 429, 404...), ``"hang"`` (accept,
read the request, then never answer until the receiver stops) and ``"close"`` (drop the connection
without an answer). ``stop()`` releases hung requests and joins every thread it started.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Behaviour = str | int
HANG_MAX_S = 30.0  # a hung request is released by stop(); this only bounds a forgotten receiver


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    answered: Behaviour

    def json(self) -> Any:
        return json.loads(self.body)


class Receiver:
    def __init__(
        self, script: Sequence[Behaviour] = (), default: Behaviour = "ok", body: bytes = b"ok", echo_path: bool = False
    ) -> None:
        self.script = list(script)
        self.default = default
        self.reply_body = body
        self.echo_path = echo_path  # error bodies repeat the request path (as some servers do: a secret leak test)
        self.requests: list[Received] = []
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- life cycle ---------------------------------------------------------------------------
    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                receiver._handle(self)

            def do_GET(self) -> None:  # a client's probe (e.g. a heartbeat) is recorded the same way
                receiver._handle(self)

            def log_message(self, format: str, *args: Any) -> None:  # quiet test output
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = True  # server_close() joins the request threads
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    @property
    def port(self) -> int:
        assert self._server is not None, "receiver not started"
        return int(self._server.server_address[1])

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    # -- what it saw --------------------------------------------------------------------------
    def received(self, path_prefix: str = "") -> list[Received]:
        with self._lock:
            return [r for r in self.requests if r.path.startswith(path_prefix)]

    def succeeded(self, path_prefix: str = "") -> list[Received]:
        return [r for r in self.received(path_prefix) if r.answered in ("ok", 200)]

    # -- answering ----------------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        with self._lock:
            behaviour = self.script.pop(0) if self.script else self.default
            self.requests.append(Received(h.command, h.path, dict(h.headers.items()), body, behaviour))
        if behaviour == "hang":
            self._release.wait(HANG_MAX_S)
            h.close_connection = True
            return
        if behaviour == "close":
            h.close_connection = True
            return  # no status line at all: the client sees the connection closed
        status = 200 if behaviour == "ok" else int(behaviour)
        reply = self.reply_body if status == 200 else f"error {status}".encode()
        if self.echo_path and status != 200:
            reply += f" for {h.path}".encode()
        h.send_response(status)
        h.send_header("Content-Type", "text/plain")
        h.send_header("Content-Length", str(len(reply)))
        if status == 429:
            h.send_header("Retry-After", "1")
        h.end_headers()
        h.wfile.write(reply)


@contextmanager
def receiver(
    script: Sequence[Behaviour] = (), default: Behaviour = "ok", echo_path: bool = False
) -> Iterator[Receiver]:
    r = Receiver(script, default, echo_path=echo_path).start()
    try:
        yield r
    finally:
        r.stop()


def free_port() -> int:
    """A port nothing listens on (bound, then released): connection refused, fast."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
