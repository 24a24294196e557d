"""`AcpSession`: the small API a runner uses to drive one external agent over ACP.

`AcpSession.start` spawns the agent in its place (the sandbox, see `process`, or the
conversation's container, see `places`), connects our
`WorkspaceClient` to it with the SDK, and initializes with protocol version 1 and the fs and
terminal capabilities. Each call is guarded: an agent that dies, writes garbage or runs past
the timeout raises
AgentCrashed / AgentProtocolError / AgentTimeout, and leaving the context always ends the
agent's whole process group and every terminal it opened.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import acp
from acp.client.connection import ClientSideConnection
from acp.schema import InitializeResponse, PromptResponse

from acp_bridge.client import (
    CLIENT_CAPABILITIES,
    CLIENT_INFO,
    PermissionCallback,
    SessionUpdate,
    UpdateCallback,
    WorkspaceClient,
)
from acp_bridge.places import AgentPlace, SandboxPlace
from acp_bridge.process import MESSAGE_LIMIT_BYTES, AgentProcess
from workspaces.sandbox import Network


class AcpSession:
    """One agent process, initialized, with the calls a turn needs. Use `start`."""

    def __init__(
        self,
        process: AgentProcess,
        client: WorkspaceClient,
        conn: ClientSideConnection,
        *,
        cwd: str,
        timeout: float | None,
    ) -> None:
        self.process = process
        self.client = client
        self.conn = conn
        self.cwd = cwd
        """The working directory as the agent sees it (what session/new and load are sent)."""
        self.timeout = timeout
        self.initialize_response: InitializeResponse | None = None
        self.session_id: str | None = None

    @classmethod
    @asynccontextmanager
    async def start(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str],
        cwd: Path,
        workspace: Path | None = None,
        readonly: Sequence[Path] = (),
        network: Network = "none",
        on_update: UpdateCallback | None = None,
        on_permission: PermissionCallback | None = None,
        timeout: float | None = 600.0,
        redact: Callable[[str], str] | None = None,
        message_limit: int = MESSAGE_LIMIT_BYTES,
        place: AgentPlace | None = None,
        home: Path | None = None,
    ) -> AsyncIterator[AcpSession]:
        """Spawn and initialize the agent; on leaving, close the connection, kill open
        terminals and the agent's whole process group. `workspace` (the root the agent's fs and
        terminal requests are confined to) defaults to `cwd`; `timeout` bounds each call;
        `message_limit` is the largest line accepted from the agent. By default the agent runs
        in the sandbox with `workspace` writable, `readonly` visible and `network` (see
        `process`), with `home` as its private home (a temporary one when None); a `place`
        (a container's, see `places`) runs it there instead, with its own root, network and
        home."""
        if place is None:
            place = SandboxPlace(workspace or cwd, readonly=readonly, network=network, home=home)
        client = WorkspaceClient(place=place, on_update=on_update, on_permission=on_permission)
        child = await place.spawn(command, args, env=env, cwd=cwd, limit=message_limit)
        process = AgentProcess(child, redact=redact, limit=message_limit)
        conn: ClientSideConnection | None = None
        try:
            conn = acp.connect_to_agent(client, process.stdin, process.reader)
            session = cls(process, client, conn, cwd=_agent_path(place, cwd), timeout=timeout)
            await session.initialize()
            yield session
        finally:
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.close()
            await client.aclose()
            await process.close()

    async def initialize(self) -> InitializeResponse:
        self.initialize_response = await self.process.guard(
            self.conn.initialize(
                protocol_version=acp.PROTOCOL_VERSION,
                client_capabilities=CLIENT_CAPABILITIES,
                client_info=CLIENT_INFO,
            ),
            timeout=self.timeout,
        )
        return self.initialize_response

    async def new_session(self) -> str:
        """`session/new` with the working directory as cwd; returns (and remembers) its id."""
        response = await self.process.guard(
            self.conn.new_session(cwd=self.cwd, mcp_servers=[]), timeout=self.timeout
        )
        self.session_id = response.session_id
        self.client.session_known(response.session_id)
        return response.session_id

    async def prompt(self, text: str, *, timeout: float | None = None) -> PromptResponse:
        """One turn; returns when the agent answers (all updates sent before the answer have
        been recorded by then). AgentCrashed / AgentProtocolError / AgentTimeout otherwise."""
        session_id = self._session()
        self.client.turn_started(session_id)
        return await self.process.guard(
            self.conn.prompt(session_id=session_id, prompt=[acp.text_block(text)]),
            timeout=timeout if timeout is not None else self.timeout,
        )

    async def cancel(self) -> None:
        """`session/cancel`, and `cancelled` for every open permission request."""
        session_id = self._session()
        self.client.turn_cancelled(session_id)
        await self.process.guard(self.conn.cancel(session_id=session_id), timeout=self.timeout)

    def updates(self, session_id: str | None = None) -> list[SessionUpdate]:
        return list(self.client.updates.get(session_id or self._session(), []))

    def _session(self) -> str:
        if self.session_id is None:
            raise RuntimeError("call new_session() first")
        return self.session_id


def _agent_path(place: AgentPlace, cwd: Path) -> str:
    """`cwd` (a host path inside the place's root) as the agent sees it."""
    real = Path(os.path.realpath(cwd))
    if place.agent_root == str(place.root) or not real.is_relative_to(place.root):
        return str(cwd)
    relative = real.relative_to(place.root)
    return place.agent_root if relative == Path(".") else f"{place.agent_root}/{relative}"
