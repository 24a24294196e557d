"""One HTTP POST to a URL a team gave us, connecting only to addresses the SSRF guard checked.

`common.netguard.resolve_url` resolves the host once and checks every address; the socket is
then opened to one of those addresses itself, never to the name, so a name that answers
differently the second time (DNS rebinding) cannot move the request onto a private address.
The name still goes out as the Host header and, for https, as the TLS server name (SNI) the
certificate is verified against. No proxy (a proxy would resolve the name again), no
redirects (a redirect would lead to a place nobody checked).
"""

from __future__ import annotations

import http.client
import socket
import ssl
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from .netguard import IPNetwork, Target, resolve_url

MAX_RESPONSE_BYTES = 64 * 1024


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """HTTPConnection to `host` (Host header) that connects to the checked `addresses`."""

    def __init__(self, target: Target, *, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self._addresses = target.addresses

    def connect(self) -> None:
        error: OSError | None = None
        for address in self._addresses:  # like socket.create_connection, but never by name
            try:
                self.sock = socket.create_connection((address, self.port), self.timeout)
                return
            except OSError as exc:
                error = exc
        raise error or OSError("no address to connect to")


class _PinnedHTTPSConnection(_PinnedHTTPConnection):
    default_port = 443  # so the Host header leaves out ":443", as for a plain https request

    def __init__(self, target: Target, *, timeout: float, context: ssl.SSLContext) -> None:
        super().__init__(target, timeout=timeout)
        self._context = context

    def connect(self) -> None:
        super().connect()
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self.host)


def post(
    url: str, body: bytes, *, headers: Mapping[str, str], allowed_networks: Iterable[IPNetwork],
    timeout: float, ssl_context: ssl.SSLContext | None = None,
) -> int:  # fmt: skip
    """POST `body` to `url`; the response's status code (its body is read, up to a limit,
    and dropped). Raises netguard.BlockedURL when the target is refused,
    netguard.UnresolvableHost when the name does not resolve, OSError or
    http.client.HTTPException when the network or the receiver fails."""
    target = resolve_url(url, allowed_networks=allowed_networks)
    if target.scheme == "https":
        context = ssl_context or ssl.create_default_context()
        connection: _PinnedHTTPConnection = _PinnedHTTPSConnection(
            target, timeout=timeout, context=context
        )
    else:
        connection = _PinnedHTTPConnection(target, timeout=timeout)
    parts = urlsplit(url.strip())
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        connection.request("POST", path, body=body, headers=dict(headers))
        response = connection.getresponse()
        response.read(MAX_RESPONSE_BYTES)
        return response.status
    finally:
        connection.close()
