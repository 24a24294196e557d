"""What every fake model API for the real-agent tests shares: an HTTP server on 127.0.0.1 in
a thread, a record of every request (method, path, parsed body, what the fake made of it) for
assertion messages, and the replies the real APIs send (JSON, or server-sent events).

A fake subclasses FakeHttpServer, naming its handler (a FakeHandler with do_GET / do_POST) in
`handler`; `with Fake(...) as fake:` starts it and `fake.address` is its http://host:port.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Self

logger = logging.getLogger(__name__)


@dataclass
class Recorded:
    method: str
    path: str
    body: Any
    kind: str = ""
    """What the server made of it, in the fake's own words ("tool_use", "final", ...)."""


class FakeHandler(BaseHTTPRequestHandler):
    server_fake: FakeHttpServer
    protocol_version = "HTTP/1.1"
    reply_headers: ClassVar[tuple[tuple[str, str], ...]] = ()
    """Sent with every reply (the request id a real API adds)."""

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug(f"{self.server_fake.name}: " + format, *args)

    def path_only(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/")

    def read_body(self) -> Any:
        """The request's JSON body; its text when it is not JSON, None when empty."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def record(self, body: Any, kind: str) -> None:
        fake = self.server_fake
        with fake.lock:
            fake.requests.append(Recorded(self.command, self.path, body, kind))
        logger.info("%s: %s %s -> %s", fake.name, self.command, self.path, kind)

    def _head(self, status: int, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in self.reply_headers:
            self.send_header(name, value)

    def reply_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self._head(status, "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def reply_stream(self, events: Iterable[tuple[str | None, Any]]) -> None:
        """Server-sent events, one (event name or None, data) each, then the connection
        closes (the stream's end)."""
        self._head(200, "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for event, data in events:
            name = f"event: {event}\n" if event else ""
            self.wfile.write(f"{name}data: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()
        self.close_connection = True


class FakeHttpServer:
    name = "fake-model"
    handler: ClassVar[type[FakeHandler]]

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Self:
        handler = type("Handler", (self.handler,), {"server_fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=self.name, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def address(self) -> str:
        assert self._server is not None, "not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def next_id(self, prefix: str) -> str:
        return f"{prefix}_fake{next(self._ids):06d}"

    def kinds(self) -> list[str]:
        with self.lock:
            return [r.kind for r in self.requests]

    def log(self) -> str:
        """One line per request, for assertion messages."""
        with self.lock:
            return "\n".join(f"{r.method} {r.path} -> {r.kind}" for r in self.requests)
