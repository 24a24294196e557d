"""The slice's MCP connections, on a thread of their own with their own event loop.

The runner is synchronous and the SDK is asynchronous (as with the ACP bridge,
orchestration.external.driver): `open` connects to every server at once and lists their tools,
`call` runs one tool call and waits for it from the runner's thread (giving up when the run is
interrupted or the call runs out of time), `close` ends every session and kills every stdio
server's process group. Each session lives in one task from connect to close, since the SDK's
task groups must be left by the task that entered them.

A server that cannot be started, connected or listed within START_SECONDS is reported in
`open`'s answer with the reason (redacted of the secrets it was given) and has no tools; the
others go on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mcp import Client
from mcp_types import Implementation

from ..tools.base import ToolResult
from .http import guarded_http
from .launch import ServerLaunch
from .results import tool_result
from .stdio import ProcessHolder, sandboxed_stdio

logger = logging.getLogger(__name__)

START_SECONDS = 30.0
CALL_SECONDS = 300.0
CLOSE_SECONDS = 10.0
MAX_TOOL_PAGES = 20
CLIENT_INFO = Implementation(name="canvas", version="1")


@dataclass(frozen=True)
class ListedTool:
    server: str
    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class Unavailable:
    server: str
    reason: str


def _reason(exc: BaseException) -> str:
    """The innermost errors of an SDK failure (task groups wrap them), one line each."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(dict.fromkeys(_reason(inner) for inner in exc.exceptions))
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _redactor(launch: ServerLaunch, redact: Callable[[str], str]) -> Callable[[str], str]:
    values = sorted(launch.secrets_used.items(), key=lambda item: -len(item[1]))

    def scrub(text: str) -> str:
        for name, value in values:
            if value:
                text = text.replace(value, f"<secret:{name}>")
        return redact(text)

    return scrub


class McpToolbox:
    def __init__(self, *, redact: Callable[[str], str] = lambda text: text) -> None:
        self._redact = redact
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp", daemon=True)
        self._thread.start()
        self._clients: dict[str, Client] = {}
        self._scrubs: dict[str, Callable[[str], str]] = {}
        self._stop: asyncio.Event | None = None
        self._sessions: list[asyncio.Task] = []
        self._ready: list[asyncio.Future] = []
        self._closed = False

    # -- the runner's thread ---------------------------------------------------------------

    def open(
        self, launches: Sequence[ServerLaunch], *, timeout: float = START_SECONDS,
        cancel: threading.Event | None = None,
    ) -> tuple[list[ListedTool], list[Unavailable]]:  # fmt: skip
        """Connect to every server; what each offers, and which could not be reached. An
        interrupt (`cancel`) stops waiting: nothing is offered, and `close` ends the rest."""
        future = asyncio.run_coroutine_threadsafe(self._open(launches, timeout), self._loop)
        while not future.done():
            if cancel is not None and cancel.is_set():
                return [], []
            concurrent.futures.wait([future], timeout=0.1)
        return future.result()

    def call(
        self, server: str, tool: str, arguments: dict[str, Any], *,
        cancel: threading.Event | None, timeout: float = CALL_SECONDS,
    ) -> ToolResult:  # fmt: skip
        client = self._clients.get(server)
        if client is None:
            return ToolResult(f"The MCP server {server!r} is not connected.", is_error=True)
        future = asyncio.run_coroutine_threadsafe(client.call_tool(tool, arguments), self._loop)
        deadline = time.monotonic() + timeout
        while not future.done() and time.monotonic() < deadline:
            if cancel is not None and cancel.is_set():
                break
            concurrent.futures.wait([future], timeout=0.1)
        if not future.done():
            future.cancel()
            if cancel is not None and cancel.is_set():
                return ToolResult("The call was interrupted before it answered.", is_error=True)
            return ToolResult(
                f"The MCP server {server!r} did not answer within {timeout:g}s.", is_error=True
            )
        try:
            return tool_result(future.result())
        except Exception as exc:  # the server's failure is the model's to read, not a crash
            scrub = self._scrubs.get(server, self._redact)
            return ToolResult(
                scrub(f"The MCP server {server!r} failed the call: {_reason(exc)}"), is_error=True
            )

    def connected(self, servers: set[str]) -> bool:
        """Whether every one of `servers` still has its session (a kept toolbox's check)."""
        return not self._closed and self._thread.is_alive() and servers <= set(self._clients)

    def close(self) -> None:
        """End every session (stdio servers' groups killed); safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        ending = asyncio.run_coroutine_threadsafe(self._close(), self._loop)
        try:
            ending.result(2 * CLOSE_SECONDS + 1)
        except Exception:
            logger.warning("MCP sessions did not close cleanly", exc_info=True)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(CLOSE_SECONDS)
        if not self._thread.is_alive():
            self._loop.close()

    # -- the loop's thread -----------------------------------------------------------------

    async def _open(
        self, launches: Sequence[ServerLaunch], timeout: float
    ) -> tuple[list[ListedTool], list[Unavailable]]:
        self._stop = asyncio.Event()
        ready = self._ready
        for launch in launches:
            listed: asyncio.Future = self._loop.create_future()
            ready.append(listed)
            self._sessions.append(self._loop.create_task(self._session(launch, listed)))
        if ready:
            await asyncio.wait(ready, timeout=timeout)
        tools: list[ListedTool] = []
        failed: list[Unavailable] = []
        for launch, listed, task in zip(launches, ready, self._sessions, strict=True):
            name = launch.config.name
            if not listed.done():
                listed.cancel()
                task.cancel()
                failed.append(Unavailable(name, f"it did not answer within {timeout:g}s"))
            elif listed.exception() is not None:
                failed.append(Unavailable(name, str(listed.exception())))
            else:
                tools.extend(listed.result())
        return tools, failed

    async def _close(self) -> None:
        if self._stop is not None:
            self._stop.set()
        if not self._sessions:
            return
        for task, listed in zip(self._sessions, self._ready, strict=True):
            if not listed.done():  # still connecting (an interrupted open): nothing to wait for
                task.cancel()
        _, late = await asyncio.wait(self._sessions, timeout=CLOSE_SECONDS)
        for task in late:  # cancelling leaves the session, whose shielded exit kills the group
            task.cancel()
        if late:
            await asyncio.wait(late, timeout=CLOSE_SECONDS)

    async def _session(self, launch: ServerLaunch, listed: asyncio.Future) -> None:
        """Connect, list, keep the session open until close, then leave it (killing a stdio
        server's group). Its failure goes to `listed`, redacted."""
        name = launch.config.name
        scrub = self._scrubs[name] = _redactor(launch, self._redact)
        holder = ProcessHolder()
        try:
            if launch.stdio is not None:
                transport = sandboxed_stdio(launch.stdio, holder, redact=scrub)
            else:
                transport = guarded_http(launch.config.url, launch.headers)
            async with Client(transport, cache=None, client_info=CLIENT_INFO) as client:
                tools = await _list_tools(client, name)
                if listed.cancelled():
                    return
                self._clients[name] = client
                listed.set_result(tools)
                assert self._stop is not None
                await self._stop.wait()
        except BaseException as exc:
            if not listed.done():
                detail = _reason(exc)
                extra = holder.describe()
                listed.set_exception(RuntimeError(scrub(f"{detail}; {extra}" if extra else detail)))
            elif not isinstance(exc, asyncio.CancelledError):
                logger.warning("MCP server %s ended: %s", name, scrub(_reason(exc)))
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
                raise
        finally:
            self._clients.pop(name, None)


async def _list_tools(client: Client, server: str) -> list[ListedTool]:
    tools: list[ListedTool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(
            ListedTool(server, tool.name, tool.description or tool.title or "",
                       dict(tool.input_schema or {}))
            for tool in page.tools
        )  # fmt: skip
        cursor = page.next_cursor
        if not cursor:
            break
    return tools
