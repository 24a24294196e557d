"""A real HTTP server on 127.0.0.1 (a free port) in a thread, for tests that need something to
answer a request: the handler class decides what it says."""

from __future__ import annotations

import contextlib
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class QuietHandler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass  # keep test output clean


@contextlib.contextmanager
def serving(
    handler: type[BaseHTTPRequestHandler], *, tls: ssl.SSLContext | None = None
) -> Iterator[int]:
    """Serve `handler` (over TLS with `tls`) for the block; the port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
