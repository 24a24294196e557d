"""The outbound guard for a sandbox with network "outbound": the public internet, through a
proxy that checks every destination, and never the host's loopback or private ranges.

The sandbox gets its own empty network namespace, as with "none". Its command is started by a
small relay (RELAY, stdlib Python run from /usr) that listens on 127.0.0.1 *inside* that
namespace, execs nothing of ours, and carries each connection over a Unix socket to this
process's `EgressProxy`; the command finds the relay through HTTP_PROXY / HTTPS_PROXY (every
agent we run reads them). The proxy takes `CONNECT host:port` (https) and absolute-form http
requests, resolves the host and checks every address with common.netguard against the site's
CANVAS_ALLOWED_PRIVATE_NETWORKS (the same rule as a model's api_base), then connects to an
address it checked, so a name that changes its answer in between gains nothing. A refused
destination is answered 403 with the reason. A program that ignores the proxy variables
reaches nothing: the namespace has no route out.

The proxy lives as long as the sandboxed command: the command inherits the write end of a
pipe (`lifeline`) and the proxy stops when every copy is closed.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable

from common import netguard

SANDBOX_DIR = "/run/canvas-egress"
"""Where the proxy's socket folder is bound inside the sandbox."""
SOCKET_NAME = "proxy.sock"
RELAY_PORT = 3128
MAX_HEAD_BYTES = 64 * 1024
CONNECT_TIMEOUT_SECONDS = 10.0

RELAY = r"""
import os, socket, sys, threading
path, port = sys.argv[1], int(sys.argv[2])
listener = socket.socket()
listener.bind(("127.0.0.1", port))
listener.listen(64)
def pipe(a, b):
    try:
        while data := a.recv(65536):
            b.sendall(data)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
def serve():
    while True:
        conn, _ = listener.accept()
        up = socket.socket(socket.AF_UNIX)
        try:
            up.connect(path)
        except OSError:
            conn.close()
            continue
        for a, b in ((conn, up), (up, conn)):
            threading.Thread(target=pipe, args=(a, b), daemon=True).start()
threading.Thread(target=serve, daemon=True).start()
pid = os.fork()
if pid == 0:
    listener.close()
    try:
        os.execvp(sys.argv[3], sys.argv[3:])
    finally:
        os._exit(127)
code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
os._exit(code if code >= 0 else 128 - code)
"""
"""Inside the sandbox: `python -I -S -c RELAY SOCKET PORT COMMAND...`. Listens before the
command starts, so its first request finds the relay; ends as the command does."""


class EgressUnavailable(OSError):
    """No interpreter in the sandbox's view to run the relay with."""


def relay_python() -> str:
    """An interpreter the sandbox shows (/usr), to run RELAY with."""
    import sys

    for candidate in (os.path.realpath(sys.executable), "/usr/bin/python3"):
        if candidate.startswith("/usr/") and os.access(candidate, os.X_OK):
            return candidate
    raise EgressUnavailable(
        'network "outbound" needs a Python 3 under /usr for its relay (none found)'
    )


def proxy_env() -> dict[str, str]:
    url = f"http://127.0.0.1:{RELAY_PORT}"
    names = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
    # NO_PROXY empty: the model may be on the host's loopback, which only the proxy can reach.
    return {**dict.fromkeys(names, url), "NO_PROXY": "", "no_proxy": "", "NODE_USE_ENV_PROXY": "1"}


class EgressProxy:
    """One sandbox's proxy: `folder` holds its socket; `lifeline` is the fd the sandbox must
    inherit (the caller closes its own copy once the command started)."""

    def __init__(self, *, check: Callable[[str, int], tuple[str, ...]] | None = None) -> None:
        self._check = check or checked_addresses
        self.folder = tempfile.mkdtemp(prefix="canvas-egress-")
        self._server = socket.socket(socket.AF_UNIX)
        self._server.bind(os.path.join(self.folder, SOCKET_NAME))
        self._server.listen(64)
        self._server.setblocking(False)
        self._watch, self.lifeline = os.pipe()
        threading.Thread(target=self._serve, name="canvas-egress", daemon=True).start()

    def _serve(self) -> None:
        try:
            while True:
                ready, _, _ = select.select([self._server, self._watch], [], [])
                if self._watch in ready:
                    return  # every holder of the lifeline is gone
                with contextlib.suppress(BlockingIOError):
                    conn, _ = self._server.accept()
                    conn.setblocking(True)
                    threading.Thread(target=self._handle, args=(conn,), daemon=True).start()
        finally:
            self._server.close()
            os.close(self._watch)
            shutil.rmtree(self.folder, ignore_errors=True)

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            head = _read_head(conn)
            if head is None:
                return
            head_text, rest = head
            request_line, *headers = head_text.split("\r\n")
            parts = request_line.split(" ")
            if len(parts) != 3:
                return _answer(conn, 400, "a proxy request line is METHOD TARGET VERSION")
            method, target, version = parts
            try:
                host, port, forward = _destination(method, target, version, headers)
                addresses = self._check(host, port)
            except (ValueError, netguard.BlockedURL, netguard.UnresolvableHost) as exc:
                return _answer(conn, 403, f"the outbound guard refused it: {exc}")
            upstream = _connect(addresses, port)
            if upstream is None:
                return _answer(conn, 502, f"{host}:{port} did not accept a connection")
            with upstream:
                if forward is None:
                    conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                else:
                    upstream.sendall(forward)
                if rest:
                    upstream.sendall(rest)
                _splice(conn, upstream)


def checked_addresses(host: str, port: int) -> tuple[str, ...]:
    """Addresses of `host` the site lets a sandbox reach (netguard's rule); BlockedURL or
    UnresolvableHost otherwise."""
    shown = f"[{host}]" if ":" in host else host
    target = netguard.resolve_url(
        f"http://{shown}:{port}/", allowed_networks=netguard.site_allowed_networks()
    )
    return target.addresses


def _read_head(conn: socket.socket) -> tuple[str, bytes] | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk or len(data) > MAX_HEAD_BYTES:
            return None
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head.decode("latin-1"), rest


def _destination(
    method: str, target: str, version: str, headers: list[str]
) -> tuple[str, int, bytes | None]:
    """(host, port, the request to send on, or None for a CONNECT tunnel)."""
    from urllib.parse import urlsplit

    if method.upper() == "CONNECT":
        host, sep, port = target.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError("CONNECT needs host:port")
        return host.strip("[]"), int(port), None
    parts = urlsplit(target)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError("only CONNECT and absolute http:// requests go through the proxy")
    path = parts.path or "/"
    if parts.query:
        path += f"?{parts.query}"
    # One request per connection: the next one may name another host, to be checked again.
    kept = [
        h for h in headers
        if h and h.split(":", 1)[0].strip().lower() not in {"proxy-connection", "connection",
                                                           "keep-alive", "proxy-authorization"}
    ]  # fmt: skip
    head = "\r\n".join([f"{method} {path} {version}", *kept, "Connection: close", "", ""])
    return parts.hostname, parts.port or 80, head.encode("latin-1")


def _connect(addresses: tuple[str, ...], port: int) -> socket.socket | None:
    for address in addresses:
        with contextlib.suppress(OSError):
            return socket.create_connection((address, port), timeout=CONNECT_TIMEOUT_SECONDS)
    return None


def _answer(conn: socket.socket, status: int, reason: str) -> None:
    body = f"{reason}\n".encode()
    words = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    head = (
        f"HTTP/1.1 {status} {words}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    with contextlib.suppress(OSError):
        conn.sendall(head.encode() + body)


def _splice(a: socket.socket, b: socket.socket) -> None:
    a.settimeout(None)
    b.settimeout(None)
    sockets = [a, b]
    while sockets:
        ready, _, _ = select.select(sockets, [], [])
        for source in ready:
            target = b if source is a else a
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            if not data:
                sockets.remove(source)
                with contextlib.suppress(OSError):
                    target.shutdown(socket.SHUT_WR)
                continue
            try:
                target.sendall(data)
            except OSError:
                return
