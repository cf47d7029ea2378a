"""A real OpenAI-compatible HTTP server on 127.0.0.1 for the LLM contract tests.

It speaks enough of the OpenAI API for litellm's ``openai/`` provider: ``POST /v1/chat/completions``
(also ``/chat/completions``) and ``POST /v1/embeddings`` (also ``/embeddings``). What a chat
request gets back is scripted::

    with LLMStub(default=lambda body: '{"pattern": null}', latency_s=0.1) as stub:
        stub.script('{"pattern": null}', 429, "timeout", "malformed", Reply(content="{}", finish_reason="length"))
        ... litellm.completion(model="openai/stub", api_base=stub.url, ...) ...
        stub.requests  # every chat request body received, in arrival order

Script items are consumed in order, one per chat request; when the queue is empty the
``default`` responder (a callable taking the request body) decides. Items:

- a ``str``: the assistant message's content (normally a JSON answer);
- ``"malformed"``: content that is not valid JSON;
- ``"timeout"``: sleep ``timeout_sleep_s`` (longer than the client's timeout), then hang up;
- an ``int``: that HTTP status with an OpenAI-style error body (429 carries ``Retry-After: 0``);
- a :class:`Reply`: full control (content, status, finish_reason, headers, extra delay).

With no script item and no default responder the stub answers 400 with a message saying so:
a non-retryable error makes a forgotten script item fail the test at once instead of hanging.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

HOST = "127.0.0.1"
MALFORMED_CONTENT = '{"pattern": {"statement": "unterminated'
EMBEDDING_DIMENSION = 8


@dataclass(frozen=True)
class Reply:
    """One scripted answer to a chat request."""

    content: str | None = None
    status: int = 200
    finish_reason: str = "stop"
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # on top of the stub's latency
    hang_up: bool = False  # after the delay, close the connection without answering


ScriptItem = str | int | Reply
Responder = Callable[[dict[str, Any]], ScriptItem]


@dataclass
class StubCall:
    """One chat request: recorded on arrival, completed with what the stub answered.

    ``status`` stays 0 while the request is in flight and when the stub hung up on it.
    """

    path: str
    body: dict[str, Any]
    status: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    authorization: str | None = None  # the request's Authorization header (the key the client sent)


class LLMStub:
    """The server. Nothing starts before ``__enter__``; ``__exit__`` always stops it."""

    def __init__(
        self,
        default: Responder | None = None,
        latency_s: float = 0.0,
        timeout_sleep_s: float = 10.0,
        port: int = 0,
    ) -> None:
        self.default = default
        self.listen_port = port  # 0: any free port (``port`` says which one once started)
        self.latency_s = latency_s
        self.timeout_sleep_s = timeout_sleep_s
        self.calls: list[StubCall] = []
        self.embedding_requests: list[dict[str, Any]] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._queue: deque[ScriptItem] = deque()
        self._lock = threading.Lock()
        # Set on stop: wakes handlers sleeping on latency or a scripted "timeout" so the
        # server never waits for them when the test is over.
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- life cycle -------------------------------------------------------------------------

    def __enter__(self) -> LLMStub:
        stub = self

        class Handler(_Handler):
            owner = stub

        server = ThreadingHTTPServer((HOST, self.listen_port), Handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def stop(self) -> None:
        self._stopping.set()
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None

    # -- what tests use ---------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the stub is not running (use it as a context manager)")
        port: int = self._server.server_address[1]
        return port

    @property
    def url(self) -> str:
        """The ``api_base`` for litellm (``.../v1``)."""
        return f"http://{HOST}:{self.port}/v1"

    def script(self, *items: ScriptItem) -> None:
        with self._lock:
            self._queue.extend(items)

    @property
    def pending(self) -> int:
        """Script items not consumed yet."""
        with self._lock:
            return len(self._queue)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every chat request body received, in arrival order."""
        with self._lock:
            return [c.body for c in self.calls]

    # -- internals used by the handler ------------------------------------------------------

    def _next(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            item: ScriptItem | None = self._queue.popleft() if self._queue else None
        if item is None:
            if self.default is None:
                return Reply(status=400, content="llm stub: the script is empty and there is no default responder")
            item = self.default(body)
        return _as_reply(item, self.timeout_sleep_s)

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _arrived(self, path: str, body: dict[str, Any], authorization: str | None = None) -> StubCall:
        call = StubCall(path, body, authorization=authorization)
        with self._lock:
            self.calls.append(call)
        return call

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless the stub is stopping; True when it is."""
        return seconds > 0 and self._stopping.wait(seconds)


def _as_reply(item: ScriptItem, timeout_sleep_s: float) -> Reply:
    if isinstance(item, Reply):
        return item
    if isinstance(item, int):
        return Reply(status=item, headers={"Retry-After": "0"} if item == 429 else {})
    if item == "timeout":
        return Reply(delay_s=timeout_sleep_s, hang_up=True)
    if item == "malformed":
        return Reply(content=MALFORMED_CONTENT)
    return Reply(content=item)


class _Handler(BaseHTTPRequestHandler):
    owner: LLMStub
    # HTTP/1.0: one request per connection, so a client that gave up never leaves a
    # kept-alive connection for the next request to stumble on.
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep pytest output clean; the tests read ``owner.calls`` instead

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError:
            self._send(400, {"error": {"message": "llm stub: request body is not JSON", "type": "invalid_request"}})
            return
        path = self.path.split("?", 1)[0].rstrip("/")
        if path in ("/v1/chat/completions", "/chat/completions"):
            self._chat(path, body)
        elif path in ("/v1/embeddings", "/embeddings"):
            self._embeddings(body)
        else:
            self._send(404, {"error": {"message": f"llm stub: no route {path}", "type": "not_found"}})

    def _chat(self, path: str, body: dict[str, Any]) -> None:
        owner = self.owner
        owner._enter()
        call = owner._arrived(path, body, self.headers.get("Authorization"))
        try:
            reply = owner._next(body)
            if owner._sleep(owner.latency_s) or owner._sleep(reply.delay_s) or reply.hang_up:
                return  # the client is gone (or the stub is stopping): hang up without answering
            if reply.status != 200:
                call.status = reply.status
                message = reply.content or f"llm stub: scripted HTTP {reply.status}"
                error = {"error": {"message": message, "type": "stub_error", "code": str(reply.status)}}
                self._send(reply.status, error, reply.headers)
                return
            prompt_tokens = _count_tokens(json.dumps(body.get("messages", [])))
            completion_tokens = _count_tokens(reply.content or "")
            call.prompt_tokens, call.completion_tokens, call.status = prompt_tokens, completion_tokens, 200
            self._send(200, _completion(body, reply, prompt_tokens, completion_tokens), reply.headers)
        finally:
            owner._leave()

    def _embeddings(self, body: dict[str, Any]) -> None:
        with self.owner._lock:
            self.owner.embedding_requests.append(body)
        raw = body.get("input", [])
        inputs = [raw] if isinstance(raw, str) else list(raw)
        data = [{"object": "embedding", "index": i, "embedding": _vector(str(text))} for i, text in enumerate(inputs)]
        tokens = sum(_count_tokens(str(text)) for text in inputs)
        self._send(
            200,
            {
                "object": "list",
                "data": data,
                "model": body.get("model", "stub"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )

    def _send(self, status: int, payload: dict[str, Any], headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out and left; nothing to tell it


def _completion(body: dict[str, Any], reply: Reply, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-stub-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "stub"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.content},
                "finish_reason": reply.finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _count_tokens(text: str) -> int:
    # A stand-in tokenizer: deterministic, so tests can compare the usage they see with ours.
    return max(1, len(text) // 4)


def _vector(text: str) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [b / 255.0 + 0.01 for b in digest[:EMBEDDING_DIMENSION]]
