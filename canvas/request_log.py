"""One log line per HTTP request the server answers: method, path, status, milliseconds.

Written by `manage.py serve` around the ASGI application, instead of uvicorn's access log,
which prints query strings (an API token may travel in one). The path alone is logged, never
the query string or a body; the console handler's secret filter (canvas.logging) still applies.
"""

from __future__ import annotations

import logging
import time
from typing import Any

logger = logging.getLogger("canvas.requests")

Scope = dict[str, Any]


class RequestLog:
    """ASGI middleware; websockets and lifespan pass through untouched."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status: int | None = None

        async def send_and_note(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            elapsed_ms = (time.perf_counter() - started) * 1000
            logger.info(
                "%s %s %s %.0f ms", scope["method"], scope["path"], status or "-", elapsed_ms
            )
