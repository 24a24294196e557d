"""A fake OpenAI-compatible chat completions server, for driving LiteLLM as a real provider.

Tests and benchmarks point a model profile at `FakeOpenAI().base_url` ("openai/<anything>",
any api key) so LiteLLM's whole HTTP path runs: request building, the OpenAI SDK, error
mapping, retries and timeouts. Only the model's answers are scripted.

What the server answers, in order of precedence:
1. the next outcome pushed with `push(...)` (a queue consumed one per request), then
2. the `responder` callable (request JSON -> Outcome), then
3. a plain "ok" message.

    with FakeOpenAI(responder=think_until(3)) as fake:
        fake.push(status=429)            # first request: rate limited
        ...                              # later requests: think ×3, then finish
        assert fake.count == 5

Binds to 127.0.0.1 on a free port. Stdlib only, so benchmarks can import it too.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


@dataclass(frozen=True)
class Outcome:
    """One scripted answer. Exactly one kind applies: an error status, raw `body`, tool
    calls (`tool`/`args` or several `tools`), or a plain message (`say`)."""

    status: int = 200
    delay: float = 0.0
    """Seconds to wait before answering; longer than the client's timeout makes it time out."""
    say: str | None = None
    tool: str | None = None
    args: Any = None
    """Tool arguments: a dict (sent as JSON) or a string (sent verbatim, so it may be broken)."""
    tools: list[tuple[str, Any]] | None = None
    """Parallel tool calls as (name, args) pairs."""
    error: str | None = None
    """Error message for a non-200 status; a default naming the status otherwise."""
    body: dict[str, Any] | None = None
    """A raw JSON body, sent as is with `status`."""
    headers: dict[str, str] = field(default_factory=dict)


Responder = Callable[[dict[str, Any]], "Outcome | Mapping[str, Any]"]


def assistant_turns(request: Mapping[str, Any]) -> int:
    """How many assistant messages the request carries: the model's turns played so far.

    Deriving the next answer from the request (not from a server-side counter) keeps a
    responder right when the client retries a request."""
    return sum(1 for m in request.get("messages") or [] if m.get("role") == "assistant")


def think_until(n: int, *, thought: str = "x") -> Responder:
    """A responder that calls `think` for the first `n` turns, then `finish`."""

    def respond(request: dict[str, Any]) -> Outcome:
        turn = assistant_turns(request)
        if turn < n:  # numbered: identical calls would trip the stuck detector
            return Outcome(tool="think", args={"thought": f"{thought} {turn}"})
        return Outcome(tool="finish", args={"message": "done"})

    return respond


def tool_until(n: int, tool: str, args: Any) -> Responder:
    """A responder that calls `tool` with `args` for the first `n` turns, then `finish`."""

    def respond(request: dict[str, Any]) -> Outcome:
        turn = assistant_turns(request)
        if turn < n:  # numbered: identical calls would trip the stuck detector
            varied = dict(args)
            if "command" in varied:
                varied["command"] = f"{varied['command']} # {turn}"
            if "thought" in varied:
                varied["thought"] = f"{varied['thought']} {turn}"
            return Outcome(tool=tool, args=varied)
        return Outcome(tool="finish", args={"message": "done"})

    return respond


class SlowOnce:
    """One turn's answer whose first request takes a minute (a worker dies waiting in it) and
    whose retry comes at once. `arrived` is set once the slow request is in: the worker is
    then inside the model call."""

    def __init__(self) -> None:
        self.arrived = threading.Event()

    def __call__(self) -> Outcome:
        if not self.arrived.is_set():
            self.arrived.set()
            return Outcome(delay=60, tool="think", args={"thought": "slow"})
        return Outcome(tool="think", args={"thought": "again"})


def _as_outcome(value: Outcome | Mapping[str, Any]) -> Outcome:
    return value if isinstance(value, Outcome) else Outcome(**value)


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 keep-alive, as real providers speak: benchmarks then measure the framework,
    # not a TCP handshake per request.
    protocol_version = "HTTP/1.1"
    # Headers and body leave in two writes; with Nagle on, the second waits for the client's
    # delayed ACK (~40 ms), which would dwarf everything a benchmark wants to see.
    disable_nagle_algorithm = True
    server: _Server
    timeout = 60  # an idle keep-alive connection ends on its own

    def setup(self) -> None:
        super().setup()
        self.server.fake._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.fake._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib's signature
        pass  # keep test and bench output clean

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path.split("?", 1)[0] not in CHAT_PATHS:
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        try:
            request = json.loads(raw or b"{}")
        except ValueError:
            self._send(400, {"error": {"message": "body is not JSON", "type": "invalid_json"}})
            return
        fake = self.server.fake
        headers = {name.lower(): value for name, value in self.headers.items()}
        outcome = fake._next_outcome(request, headers, self.path)
        if outcome.delay and fake._closing.wait(outcome.delay):
            return  # shutting down: drop the request instead of holding the server open
        status, body = fake._render(outcome, request, len(raw))
        headers = dict(outcome.headers)
        if status >= 400 and fake.retry_after_ms is not None:
            headers.setdefault("retry-after-ms", str(fake.retry_after_ms))
        self._send(status, body, headers)

    def _send(self, status: int, body: dict[str, Any], headers: Mapping[str, str] = {}) -> None:  # noqa: B006 - never mutated
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (its timeout fired): nothing left to answer.
            self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Handler threads may sit in a keep-alive read; close() shuts their sockets instead of
    # joining them blindly.
    block_on_close = False
    fake: FakeOpenAI


class FakeOpenAI:
    """The fake server. Start with `start()` or `with FakeOpenAI() as fake:`."""

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        model: str = "fake-model",
        retry_after_ms: int | None = None,
    ) -> None:
        self.responder = responder
        self.model = model
        self.retry_after_ms = retry_after_ms
        """Sent as `retry-after-ms` on errors: the OpenAI SDK then waits that long before a
        retry instead of its exponential backoff (0.5 s, 1 s, ...), which keeps tests fast."""
        self.requests: list[dict[str, Any]] = []
        """Request bodies in arrival order."""
        self.request_headers: list[dict[str, str]] = []
        """Request headers, names lower-cased, plus ":path"."""
        self._queue: deque[Outcome] = deque()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._closing = threading.Event()
        self._connections: set[socket.socket] = set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        if self._server is not None:
            return self
        server = _Server(("127.0.0.1", 0), _Handler)
        server.fake = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.name = f"fake-openai-{self.port}"
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, wake delayed handlers and close client connections."""
        server, self._server = self._server, None
        if server is None:
            return
        self._closing.set()
        server.shutdown()
        server.server_close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):  # already closed by the client
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        assert self._server is not None, "the fake server is not running"
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """What a profile's api_base should be: LiteLLM's OpenAI client appends the path."""
        return f"http://127.0.0.1:{self.port}/v1"

    # --- programming and inspection ----------------------------------------------------------

    def push(self, outcome: Outcome | None = None, /, **kwargs: Any) -> FakeOpenAI:
        """Queue one outcome for the next unanswered request: `push(status=429)`,
        `push(delay=5.0)`, `push(tool="think", args={...})`, `push(say="hi")`."""
        with self._lock:
            self._queue.append(outcome if outcome is not None else Outcome(**kwargs))
        return self

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.request_headers.clear()

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    @property
    def pending(self) -> int:
        """Pushed outcomes not yet served."""
        with self._lock:
            return len(self._queue)

    def wait_for(self, count: int, timeout: float = 5.0) -> bool:
        """Wait until `count` requests have arrived; False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.count >= count:
                return True
            time.sleep(0.01)
        return self.count >= count

    # --- internals -----------------------------------------------------------------------------

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _next_outcome(self, request: dict[str, Any], headers: dict[str, str], path: str) -> Outcome:
        with self._lock:
            self.requests.append(request)
            self.request_headers.append({**headers, ":path": path})
            queued = self._queue.popleft() if self._queue else None
        if queued is not None:
            return queued
        if self.responder is not None:
            return _as_outcome(self.responder(request))
        return Outcome(say="ok")

    def _render(
        self, outcome: Outcome, request: dict[str, Any], request_bytes: int
    ) -> tuple[int, dict[str, Any]]:
        if outcome.body is not None:
            return outcome.status, outcome.body
        if outcome.status >= 400:
            message = outcome.error or f"fake provider error (status {outcome.status})"
            kind = _ERROR_TYPES.get(outcome.status, "server_error")
            return outcome.status, {"error": {"message": message, "type": kind, "code": None}}
        n = next(self._ids)
        calls = list(outcome.tools or [])
        if outcome.tool is not None:
            calls.insert(0, (outcome.tool, outcome.args if outcome.args is not None else {}))
        message: dict[str, Any] = {"role": "assistant", "content": outcome.say}
        if calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{n}_{index}",
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
                for index, (name, args) in enumerate(calls)
            ]
        elif message["content"] is None:
            message["content"] = ""
        prompt_tokens = (
            request_bytes // 4
        )  # roughly; re-encoding a long history per request would cost more
        completion_tokens = max(1, len(json.dumps(message)) // 4)
        return 200, {
            "id": f"chatcmpl-fake-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model") or self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
