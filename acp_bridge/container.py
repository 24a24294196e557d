"""An external agent inside its conversation's container: the `AgentChild` that AgentProcess
drives when the workspace is Docker.

The agent runs as a `workspaces.docker_process.ContainerProcess` with stdin attached: an exec
of its own, so a process group of its own in the container, with exactly the environment the
profile gives it on top of the container's (never the worker's; the container is the boundary,
as for every command there). Its command is looked up inside the container, under that
environment's PATH (the image's when the profile sets none): an agent has to be installed in
the image, not on the worker.

The exec's one socket carries both directions: our writes are its stdin (half-closed for its
end of file), its reads are Docker's frames, demultiplexed here into a stdout and a stderr
StreamReader, so AgentProcess's pump, limits and errors are the same as for a local agent.
The stdout reader is bounded: the demultiplexer stops reading the socket while the pump is
behind (the engine then holds the agent's writes), as a pipe would. Ending the group is a
signal to it inside the container (TERM, KILL after a grace); the leader's end is the engine's
word (the stream may end before it, or up to 2 s after it when a child still holds stdout).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence

import docker.errors

from acp_bridge.process import MESSAGE_LIMIT_BYTES, AgentCrashed
from workspaces.base import WorkspaceUnavailable
from workspaces.docker import DockerWorkspace
from workspaces.docker_process import ContainerProcess, container_which

_FRAME_HEADER = 8
_STDOUT, _STDERR = 1, 2
_READ_BYTES = 65536
_EXIT_POLL_SECONDS = 0.05


class _Gate:
    """The stdout reader's transport as far as flow control goes: asyncio's StreamReader
    pauses it past twice its limit and resumes it once the pump has caught up."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.open.set()

    def pause_reading(self) -> None:
        self.open.clear()

    def resume_reading(self) -> None:
        self.open.set()


class ContainerChild:
    """One agent in the container (see the module docstring). Use `spawn`."""

    pgid: int | None = None

    def __init__(
        self,
        process: ContainerProcess,
        socket_reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        limit: int,
    ) -> None:
        self._process = process
        self._socket = socket_reader
        self.stdin = writer
        self.stdout = asyncio.StreamReader(limit=limit)
        self.stderr = asyncio.StreamReader()
        self._gate = _Gate()
        self.stdout.set_transport(self._gate)  # type: ignore[arg-type]  # flow control only
        self._returncode: int | None = None
        self._header = bytearray()
        self._stream = 0
        self._left = 0
        """Payload bytes of the current frame still to come."""
        self._demux = asyncio.create_task(self._demultiplex())

    @classmethod
    async def spawn(
        cls,
        workspace: DockerWorkspace,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str],
        cwd: str,
        limit: int = MESSAGE_LIMIT_BYTES,
    ) -> ContainerChild:
        """Start `command args...` in the container, in `cwd` (a container path). AgentCrashed
        when the command is not there or the engine cannot start it."""
        try:
            found = await asyncio.to_thread(container_which, workspace, command, env=env, cwd=cwd)
            if not found:
                raise AgentCrashed(
                    f"agent command {command!r} could not start: not found in the container "
                    f"({workspace.image}); the image must provide it"
                )
            process = await asyncio.to_thread(
                ContainerProcess.start, workspace, [command, *args], env=env, cwd=cwd,
                stdin=True,
            )  # fmt: skip
        except (OSError, docker.errors.DockerException, WorkspaceUnavailable) as exc:
            raise AgentCrashed(f"agent command {command!r} could not start: {exc}") from exc
        try:
            process.sock.setblocking(False)
            reader, writer = await asyncio.open_connection(sock=process.sock, limit=_READ_BYTES)
        except BaseException:
            await asyncio.to_thread(process.close)
            raise
        child = cls(process, reader, writer, limit=limit)
        child._feed(process.pending)
        return child

    @property
    def returncode(self) -> int | None:
        return self._returncode

    async def wait(self) -> int:
        while self._returncode is None:
            code = await asyncio.to_thread(self._process.exit_code)
            if code is not None:
                self._returncode = code
                break
            await asyncio.sleep(_EXIT_POLL_SECONDS)
        return self._returncode

    def close_stdin(self) -> None:
        with contextlib.suppress(Exception):
            if self.stdin.can_write_eof():
                self.stdin.write_eof()

    async def end_group(self, grace: float) -> None:
        await asyncio.to_thread(self._process.kill_group, grace=grace, signal="TERM")

    async def kill_group(self) -> None:
        await asyncio.to_thread(self._process.kill_group, signal="KILL")

    async def release(self) -> None:
        self._demux.cancel()
        with contextlib.suppress(BaseException):
            await self._demux
        with contextlib.suppress(Exception):
            self.stdin.close()
        await asyncio.to_thread(self._process.close)

    # -- internals ---------------------------------------------------------------------------

    async def _demultiplex(self) -> None:
        try:
            while True:
                await self._gate.open.wait()
                chunk = await self._socket.read(_READ_BYTES)
                if not chunk:
                    break
                self._feed(chunk)
        except (ConnectionError, OSError):
            pass  # the engine dropped the stream: the same end as a closed one
        finally:
            for reader in (self.stdout, self.stderr):
                if not reader.at_eof():
                    reader.feed_eof()

    def _feed(self, data: bytes) -> None:
        """Route Docker's frames (stream id, three zero bytes, 32-bit big-endian size, then the
        payload) to the two readers as the bytes come: a large message is never copied whole."""
        at = 0
        while at < len(data):
            if self._left == 0:
                need = _FRAME_HEADER - len(self._header)
                self._header += data[at : at + need]
                at += need
                if len(self._header) < _FRAME_HEADER:
                    return
                self._stream = self._header[0]
                self._left = int.from_bytes(self._header[4:_FRAME_HEADER], "big")
                self._header.clear()
                continue
            payload = data[at : at + self._left]
            at += len(payload)
            self._left -= len(payload)
            if self._stream == _STDOUT:
                self.stdout.feed_data(payload)
            elif self._stream == _STDERR:
                self.stderr.feed_data(payload)
