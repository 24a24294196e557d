"""Terminals an agent in a container opens: each command an exec of its own in the
conversation's container (workspaces.docker_process), in a process group of its own there.

Same contract as `terminals.Terminal` (which the client sees through the same methods): an
argv, never a shell string; exactly the environment the agent asked for on top of the
container's own; stdout and stderr merged into one output kept in memory, at most the byte
limit, truncated from the front. Killing or releasing one kills its whole group in the
container, children included.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Mapping, Sequence

from acp_bridge.terminals import DEFAULT_OUTPUT_BYTES, ExitStatus, truncate_front
from workspaces.docker import DockerWorkspace
from workspaces.docker_process import ContainerProcess

_FRAME_HEADER = 8
_SPARE_BYTES = 4
"""Kept past the limit so the cut can land on a character boundary."""
_WAIT_SECONDS = 5.0


class ContainerTerminal:
    """One command in the container and its bounded output; a thread reads the exec's stream
    (blocking socket), `wait` and `kill` are safe from the event loop."""

    def __init__(self, process: ContainerProcess, limit: int) -> None:
        self._process = process
        self._limit = max(0, limit)
        self._buffer = bytearray()
        self._dropped = False
        self._killed = False
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, name="acp-terminal", daemon=True)
        self._reader.start()

    @classmethod
    async def start(
        cls,
        workspace: DockerWorkspace,
        *,
        command: str,
        args: Sequence[str],
        env: Mapping[str, str],
        cwd: str,
        output_byte_limit: int | None,
    ) -> ContainerTerminal:
        """Launch `command args...` in `cwd` (a container path inside the workspace)."""
        process = await asyncio.to_thread(
            ContainerProcess.start, workspace, [command, *args], env=env, cwd=cwd, stdin=False
        )
        limit = DEFAULT_OUTPUT_BYTES if output_byte_limit is None else output_byte_limit
        return cls(process, limit)

    def output(self) -> tuple[str, bool, ExitStatus | None]:
        with self._lock:
            text, cut = truncate_front(bytes(self._buffer), self._limit)
        status = None
        if not self._reader.is_alive() and (code := self._process.exit_code()) is not None:
            status = self._status(code)
        return text, cut or self._dropped, status

    async def wait(self) -> ExitStatus:
        code = await asyncio.to_thread(self._process.wait)
        # The stream ends with the command, or up to 2 s later (the engine's own wait) when
        # something it started still holds it.
        await asyncio.to_thread(self._reader.join, _WAIT_SECONDS)
        return self._status(code)

    def kill(self) -> None:
        """SIGKILL its whole group in the container (blocking: an exec; call via a thread)."""
        self._killed = True
        self._process.kill_group(signal="KILL")

    async def release(self) -> None:
        await asyncio.to_thread(self.kill)
        await self.wait()
        await asyncio.to_thread(self._process.close)

    def _status(self, code: int | None) -> ExitStatus:
        if code is None:
            return ExitStatus(None, None)
        if self._killed and code == 128 + 9:  # the engine reports a signal as 128 + its number
            return ExitStatus(None, "SIGKILL")
        return ExitStatus(code, None)

    def _read(self) -> None:
        sock = self._process.sock
        header = bytearray()
        left = 0
        stream = self._process.pending
        try:
            while True:
                data = stream if stream else sock.recv(65536)
                stream = b""
                if not data:
                    return
                at = 0
                while at < len(data):
                    if left == 0:
                        need = _FRAME_HEADER - len(header)
                        header += data[at : at + need]
                        at += need
                        if len(header) == _FRAME_HEADER:
                            left = int.from_bytes(header[4:], "big")
                            header.clear()
                        continue
                    payload = data[at : at + left]
                    at += len(payload)
                    left -= len(payload)
                    self._keep(payload)  # stdout and stderr alike: one merged output
        except OSError:
            return
        finally:
            with contextlib.suppress(OSError):
                sock.close()

    def _keep(self, payload: bytes) -> None:
        with self._lock:
            self._buffer += payload
            excess = len(self._buffer) - self._limit - _SPARE_BYTES
            if excess > 0:
                del self._buffer[:excess]
                self._dropped = True
