"""An MCP server over Streamable HTTP, reached only through the outbound-address guard.

The URL's host is resolved once and every address checked (common.netguard.resolve_url, the
site's CANVAS_ALLOWED_PRIVATE_NETWORKS apply); the HTTP client then opens its sockets to those
addresses only, never to the name again, so a name that answers differently the second time
(DNS rebinding) cannot move the session onto a private address. The name still goes out as the
Host header and the TLS server name. No proxy from the worker's environment (a proxy would
resolve the name itself) and no connection to any other host: the SDK follows redirects only
within the endpoint's origin, and this client refuses every other host outright.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpcore2
import httpx2
from httpx2._config import create_ssl_context
from mcp.client._transport import TransportStreams
from mcp.client.streamable_http import streamable_http_client

from common.netguard import Target, resolve_url, site_allowed_networks

CONNECT_SECONDS = 30.0
READ_SECONDS = 300.0


class _PinnedBackend(httpcore2.AsyncNetworkBackend):
    """Connects to the checked addresses of the one host it was made for."""

    def __init__(self, target: Target) -> None:
        self._target = target
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self, host: str, port: int, timeout: float | None = None,
        local_address: str | None = None, socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:  # fmt: skip
        if host.rstrip(".").lower() != self._target.host.lower():
            raise httpcore2.ConnectError(f"refused: {host} is not the MCP server's host")
        error: Exception | None = None
        for address in self._target.addresses:
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address,
                    socket_options=socket_options,
                )  # fmt: skip
            except httpcore2.ConnectError as exc:
                error = exc
        raise error or httpcore2.ConnectError("no address to connect to")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _PinnedTransport(httpx2.AsyncHTTPTransport):
    def __init__(self, target: Target) -> None:
        super().__init__(trust_env=False)
        # httpx2 builds its pool without a way to name the network backend: build it again.
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=create_ssl_context(trust_env=False),
            network_backend=_PinnedBackend(target),
        )


@asynccontextmanager
async def guarded_http(url: str, headers: Mapping[str, str]) -> AsyncIterator[TransportStreams]:
    """The session's streams to `url`. Raises netguard.BlockedURL or UnresolvableHost before
    anything is sent when the URL may not be called."""
    target = await asyncio.to_thread(resolve_url, url, allowed_networks=site_allowed_networks())
    client = httpx2.AsyncClient(
        headers=dict(headers),
        timeout=httpx2.Timeout(CONNECT_SECONDS, read=READ_SECONDS),
        transport=_PinnedTransport(target),
        trust_env=False,
    )
    async with client, streamable_http_client(url, http_client=client) as streams:
        yield streams
