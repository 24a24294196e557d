"""Terminals an external agent opens with `terminal/create`, run through the sandbox launcher.

Every command runs under `workspaces.sandbox` (bubblewrap on a host) with the workspace as its
only writable directory and exactly the environment the agent asked for plus PATH: an agent's
terminal must never see the worker's environment or files. Output is kept in memory, at most
the byte limit the agent asked for, truncated from the front (ACP: the newest output matters).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from workspaces import sandbox

DEFAULT_OUTPUT_BYTES = 1024 * 1024
"""Kept when the agent gives no limit: output is held in the worker's memory."""


def truncate_front(data: bytes, limit: int) -> tuple[str, bool]:
    """The last `limit` bytes of `data` as text, starting on a UTF-8 character boundary (a cut
    through a multi-byte character drops its leftover continuation bytes), and whether anything
    was cut."""
    if len(data) <= limit:
        return data.decode("utf-8", "replace"), False
    cut = data[len(data) - limit :] if limit > 0 else b""
    start = 0
    while start < len(cut) and (cut[start] & 0xC0) == 0x80:
        start += 1
    return cut[start:].decode("utf-8", "replace"), True


@dataclass(frozen=True, slots=True)
class ExitStatus:
    exit_code: int | None
    signal: str | None


class Terminal:
    """One sandboxed command and its bounded output. A reader thread drains the pipe (the
    launcher's Popen is blocking); `wait` and `kill` are safe from the event loop."""

    def __init__(self, proc: subprocess.Popen[bytes], limit: int) -> None:
        self._proc = proc
        self._limit = max(0, limit)
        self._buffer = bytearray()
        self._dropped = False
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, name="acp-terminal", daemon=True)
        self._reader.start()

    @classmethod
    async def start(
        cls,
        *,
        command: str,
        args: Sequence[str],
        env: Mapping[str, str],
        cwd: Path,
        root: Path,
        output_byte_limit: int | None,
    ) -> Terminal:
        """Launch `command args...` (an argv, no shell) in `cwd` inside the sandbox."""
        spec = sandbox.SandboxSpec(
            cwd=cwd, writable=(root,), env={"PATH": sandbox.PATH, **env}, network="none"
        )
        proc = await asyncio.to_thread(
            sandbox.popen,
            spec,
            [command, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        limit = DEFAULT_OUTPUT_BYTES if output_byte_limit is None else output_byte_limit
        return cls(proc, limit)

    def output(self) -> tuple[str, bool, ExitStatus | None]:
        """Text so far, whether it was truncated, and the exit status once it has ended."""
        with self._lock:
            text, cut = truncate_front(bytes(self._buffer), self._limit)
        status = self._status() if not self._reader.is_alive() else None
        return text, cut or self._dropped, status

    async def wait(self) -> ExitStatus:
        await asyncio.to_thread(self._proc.wait)
        await asyncio.to_thread(self._reader.join, 5.0)
        return self._status()

    def kill(self) -> None:
        """SIGKILL its whole group (the launcher leads a new session)."""
        if self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signal.SIGKILL)

    async def release(self) -> None:
        self.kill()
        await self.wait()

    def _status(self) -> ExitStatus:
        code = self._proc.poll()
        if code is None:
            return ExitStatus(None, None)
        if code < 0:
            return ExitStatus(None, signal.Signals(-code).name)
        return ExitStatus(code, None)

    def _read(self) -> None:
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        try:
            while chunk := os.read(fd, 65536):
                with self._lock:
                    self._buffer += chunk
                    # Keep a few spare bytes so the cut can land on a character boundary.
                    excess = len(self._buffer) - self._limit - 4
                    if excess > 0:
                        del self._buffer[:excess]
                        self._dropped = True
        finally:
            self._proc.stdout.close()
