"""An MCP server over stdio, spawned the way external agents are (acp_bridge.process): inside
the command sandbox, with exactly the environment given (never the worker's `os.environ`, which
holds the database URL and every team's secrets), in a process group of its own that is killed
whole when the transport closes.

The SDK's own `stdio_client` merges HOME, PATH and friends from the worker's environment and
runs the command unsandboxed, so it is not used; this is the same two-pipe bridge between the
process and the session's memory streams, over `AgentProcess`, whose pump refuses non-JSON and
oversized lines and keeps the last stderr lines for the error a failure reports.

A server started for a conversation (`StdioLaunch.home_for`) gets its private home (HOME and
TMPDIR) in that conversation's state folder, made fresh when it starts and removed when it
stops, and swept after a worker's crash (orchestration.external.home); one started for no
conversation gets a temporary one, removed when it stops.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import anyio
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage
from mcp_types import jsonrpc_message_adapter

from acp_bridge.process import AgentProcess, LocalChild
from orchestration.external.home import PrivateHome, mcp_home_prepare
from workspaces.sandbox import Network


@dataclass(frozen=True)
class StdioLaunch:
    command: str
    args: Sequence[str]
    env: Mapping[str, str] = field(repr=False)
    cwd: Path
    readonly: Sequence[Path] = ()
    """Host paths to show read-only: the site's choice only (server_launch names none)."""
    network: Network = "none"
    home_for: tuple[str, str] | None = None
    """(conversation id, server name): its private home is that conversation's (see above)."""


class _ServerChild(LocalChild):
    """A server's process on this host; at its end, its conversation's home for it is removed
    only while it is still the one made for it (PrivateHome.remove)."""

    home: PrivateHome | None = None

    async def release(self) -> None:
        if self.home is None:
            await super().release()
        else:
            await anyio.to_thread.run_sync(self.home.remove)


async def _spawn(launch: StdioLaunch, redact) -> AgentProcess:
    """Start the server in the sandbox with its private home."""
    home = None
    if launch.home_for is not None:
        conversation_id, server = launch.home_for
        home = await anyio.to_thread.run_sync(
            partial(mcp_home_prepare, conversation_id, server, workspace=launch.cwd)
        )
    try:
        child = await _ServerChild.spawn(
            launch.command, launch.args, env=launch.env, cwd=launch.cwd,
            readonly=launch.readonly, network=launch.network,
            home=home.path if home is not None else None,
        )  # fmt: skip
    except BaseException:
        if home is not None:  # not every failure to start removes it
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(home.remove)
        raise
    child.home = home
    return AgentProcess(child, redact=redact)


class ProcessHolder:
    """Where the transport leaves its process, so a failure can name its exit and stderr."""

    process: AgentProcess | None = None

    def describe(self) -> str:
        """The exit code and last stderr lines, when the process has ended or said something."""
        process = self.process
        if process is None:
            return ""
        parts = []
        if process.returncode is not None:
            parts.append(f"exited with code {process.returncode}")
        tail = process.stderr_tail()[-5:]
        if tail:
            parts.append("stderr: " + " | ".join(line.strip() for line in tail if line.strip()))
        return "; ".join(parts)


@asynccontextmanager
async def sandboxed_stdio(
    launch: StdioLaunch, holder: ProcessHolder, *, redact
) -> AsyncIterator[TransportStreams]:
    """The session's streams to `launch`'s process; leaving kills its group (shielded, so a
    cancelled slice cannot leak it)."""
    process = await _spawn(launch, redact)
    holder.process = process
    to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](0)

    async def server_to_session() -> None:
        async with to_session:
            while line := await process.reader.readline():
                if not line.strip():
                    continue
                try:
                    item: SessionMessage | Exception = SessionMessage(
                        jsonrpc_message_adapter.validate_json(line, by_name=False)
                    )
                except ValueError as exc:  # JSON, but not JSON-RPC: the session reports it
                    item = exc
                try:
                    await to_session.send(item)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return

    async def session_to_server() -> None:
        async with from_session:
            async for message in from_session:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    process.stdin.write(data.encode() + b"\n")
                    await process.stdin.drain()
                except (ConnectionError, OSError):
                    await to_session.aclose()  # the session sees the end, not a hung request
                    return

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(server_to_session)
        tasks.start_soon(session_to_server)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                await process.close()
                for stream in (read_stream, write_stream):
                    with contextlib.suppress(Exception):
                        await stream.aclose()
            tasks.cancel_scope.cancel()
