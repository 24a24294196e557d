"""One external agent's process and ACP session on a thread of its own, for as many turns as
it is kept (orchestration.external.pool).

The thread runs an event loop forever; the agent is spawned from it and lives as long as it:
the sandbox's `--die-with-parent` ends the agent with the thread that started it, so a turn's
thread could not keep it. Each turn's driver (orchestration.external.driver) runs its
coroutine on this loop and, while it does, is the `handler` that gets the agent's updates and
permission requests; between turns there is none (a late update is dropped, a permission
request answered `cancelled`). `close` ends the session (the agent's whole process group, its
terminals) and the thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Coroutine, Sequence
from typing import Any, Protocol, TypeVar

from acp.schema import PermissionOption, ToolCallUpdate

from acp_bridge.session import AcpSession

logger = logging.getLogger(__name__)

T = TypeVar("T")
CLOSE_SECONDS = 15.0
"""How long closing may take: the process's grace (2 s), then SIGTERM's (2 s), and a margin."""


class Handler(Protocol):
    def on_update(self, session_id: str, update: Any) -> None: ...

    async def on_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption]
    ) -> str | None: ...


class AgentLoop:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.session: AcpSession | None = None
        self.handler: Handler | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._closed = False
        self.thread = threading.Thread(target=self._main, name="acp-agent", daemon=True)
        self.thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    async def open(self, command: str, args: Sequence[str], **start: Any) -> AcpSession:
        """Spawn and initialize the agent (AcpSession.start's arguments, callbacks aside); on
        this loop. It stays up until `close`."""
        stack = contextlib.AsyncExitStack()
        self._stack = stack
        self.session = await stack.enter_async_context(
            AcpSession.start(
                command, args, on_update=self._update, on_permission=self._permission, **start
            )
        )
        return self.session

    @property
    def pid(self) -> int | None:
        """The agent's process (group) on this host; None before it started."""
        return self.session.process.pgid if self.session is not None else None

    def usable(self) -> bool:
        """Whether another turn can be sent: the session is open and the agent healthy."""
        return (
            not self._closed
            and self.thread.is_alive()
            and self.session is not None
            and self.session.session_id is not None
            and self.session.process.usable()
        )

    def close(self, timeout: float = CLOSE_SECONDS) -> None:
        """End the agent and the thread; safe to call more than once, from any other thread."""
        if self._closed:
            return
        self._closed = True
        if not self.thread.is_alive():
            return
        try:
            self.submit(self._shutdown()).result(timeout)
        except Exception:
            logger.warning("closing an external agent failed", exc_info=True)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout)

    async def _shutdown(self) -> None:
        self.handler = None
        if self._stack is not None:
            await self._stack.aclose()
        self.session = None
        current = asyncio.current_task()
        rest = [task for task in asyncio.all_tasks() if task is not current]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    def _update(self, session_id: str, update: Any) -> None:
        handler = self.handler
        if handler is not None:
            handler.on_update(session_id, update)

    async def _permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption]
    ) -> str | None:
        handler = self.handler
        if handler is None:  # no turn to ask in: the protocol's answer for "not now"
            return None
        return await handler.on_permission(session_id, tool_call, options)
