"""Spawn an external ACP agent and own its life: one process group, stdio pipes, a clean
environment, and an end that leaves nothing running.

The agent runs as `argv` (never a shell string) in the workspace directory with exactly the
environment the caller passes: the worker's own `os.environ` holds the database URL and every
team's secrets, so none of it is inherited (the SDK's `spawn_agent_process` would merge in
HOME, PATH and friends from it, which is why it is not used). The agent leads its own session,
so killing its process group takes its children too.

Its stdout is pumped line by line into the StreamReader the SDK reads from. The SDK silently
skips lines that are not JSON; the pump does not: a garbage line, or a message larger than
`MESSAGE_LIMIT_BYTES`, ends the agent with AgentProtocolError. An agent that exits surfaces as
AgentCrashed with its exit code and the last lines of its stderr (passed through `redact`), a
call that runs past its deadline as AgentTimeout. In every case the whole group is killed.

Not yet a boundary: the process starts as the worker's own user in the worker's PID
namespace, where it could read /proc/<worker>/environ whatever environment it was given.
Nothing runs it for a conversation yet; before anything does, it must start through
workspaces.sandbox (bubblewrap) or inside the conversation's container, as terminals do.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from acp.core import DEFAULT_STDIO_BUFFER_LIMIT_BYTES

T = TypeVar("T")

MESSAGE_LIMIT_BYTES = DEFAULT_STDIO_BUFFER_LIMIT_BYTES
"""Largest single JSON-RPC line accepted from an agent (the SDK's own default, 50 MB): asyncio's
64 KiB default would break on a file read or a long diff."""
STDERR_TAIL_LINES = 40
_STDERR_LINE_CHARS = 2000
_GRACE_SECONDS = 2.0


def _no_redaction(text: str) -> str:
    return text


class AgentError(RuntimeError):
    """The agent process failed; `stderr_tail` holds its last stderr lines, already redacted."""

    def __init__(
        self, message: str, *, exit_code: int | None = None, stderr_tail: Sequence[str] = ()
    ) -> None:
        self.exit_code = exit_code
        self.stderr_tail = list(stderr_tail)
        detail = f"{message}"
        if self.stderr_tail:
            detail += "; last stderr lines:\n" + "\n".join(self.stderr_tail)
        super().__init__(detail)
        self.summary = message
        """The message without the stderr lines (for a one-line error event)."""


class AgentCrashed(AgentError):
    """The agent exited (or closed its stdout) while we still needed it."""


class AgentProtocolError(AgentError):
    """The agent wrote something on stdout that is not a JSON-RPC line."""


class AgentTimeout(AgentError):
    """The agent did not answer within the deadline; its group has been killed."""


class AgentProcess:
    """One running agent. Create with `spawn`; always end with `close` (idempotent).

    `stdin` and `reader` are the streams to hand to `acp.connect_to_agent`."""

    def __init__(
        self,
        proc: asyncio.subprocess.Process,
        *,
        redact: Callable[[str], str],
        limit: int,
    ) -> None:
        self._proc = proc
        self._redact = redact
        self.pgid = proc.pid
        """Its process group (it leads a new session, so pgid == pid)."""
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self.stdin: asyncio.StreamWriter = proc.stdin
        self._limit = limit
        self.reader = asyncio.StreamReader(limit=limit)
        self._stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self._failure: asyncio.Future[AgentError] = asyncio.get_running_loop().create_future()
        self._closing = False
        self._stderr_task = asyncio.create_task(self._drain_stderr(proc.stderr))
        self._stdout_task = asyncio.create_task(self._pump_stdout(proc.stdout))

    @classmethod
    async def spawn(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str],
        cwd: Path,
        redact: Callable[[str], str] | None = None,
        limit: int = MESSAGE_LIMIT_BYTES,
    ) -> AgentProcess:
        """Start `command args...` in `cwd` with exactly `env`. Raises AgentCrashed when the
        command cannot be started at all (not found, not executable)."""
        try:
            proc = await asyncio.create_subprocess_exec(
                command,
                *args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=dict(env),
                cwd=str(cwd),
                start_new_session=True,
                limit=limit,
            )
        except OSError as exc:
            raise AgentCrashed(f"agent command {command!r} could not start: {exc}") from exc
        return cls(proc, redact=redact or _no_redaction, limit=limit)

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    def stderr_tail(self) -> list[str]:
        """The last stderr lines, redacted."""
        return [self._redact(line) for line in self._stderr_tail]

    async def guard(self, awaitable: Awaitable[T], *, timeout: float | None) -> T:
        """Await `awaitable` (an SDK call) unless the agent dies, misbehaves or runs out of
        time first; then the group is killed and AgentCrashed / AgentProtocolError /
        AgentTimeout is raised instead of the SDK's bare ConnectionError."""
        task = asyncio.ensure_future(awaitable)
        try:
            done, _ = await asyncio.wait(
                {task, self._failure}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        except asyncio.CancelledError:
            task.cancel()
            raise
        if task in done:
            try:
                return task.result()
            except ConnectionError:
                # The SDK saw the stream end; the pump says why (exit code, garbage).
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(self._failure), _GRACE_SECONDS)
                if self._failure.done():
                    raise self._failure.result() from None
                raise
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        if self._failure.done():
            raise self._failure.result()
        timed_out = AgentTimeout(
            f"agent did not answer within {timeout:g}s; its process group was killed",
            stderr_tail=self.stderr_tail(),
        )
        self._fail(timed_out)  # later calls on this agent fail the same way, at once
        self._kill_group()
        raise timed_out

    async def close(self) -> None:
        """End the agent: close its stdin, give it a moment, then SIGTERM and SIGKILL the whole
        group; wait until the leader is reaped. Safe to call more than once."""
        self._closing = True
        with contextlib.suppress(Exception):
            self.stdin.close()
        if self._proc.returncode is None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._proc.wait(), _GRACE_SECONDS)
        if self._proc.returncode is None:
            self._signal_group(signal.SIGTERM)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._proc.wait(), _GRACE_SECONDS)
        # Children may outlive the leader in its group: kill the group whatever the leader did.
        self._kill_group()
        await self._proc.wait()
        for task in (self._stdout_task, self._stderr_task):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        if not self.reader.at_eof():
            self.reader.feed_eof()

    # -- internals ---------------------------------------------------------------------------

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, sig)

    def _kill_group(self) -> None:
        self._signal_group(signal.SIGKILL)

    def _fail(self, error: AgentError) -> None:
        if not self._failure.done():
            self._failure.set_result(error)

    async def _pump_stdout(self, stdout: asyncio.StreamReader) -> None:
        """Hand each stdout line to the SDK's reader after checking it is JSON."""
        try:
            while True:
                try:
                    line = await stdout.readline()
                except ValueError:  # asyncio's LimitOverrunError, re-raised by readline
                    self._kill_group()
                    self._fail(
                        AgentProtocolError(
                            f"agent sent a message larger than the {self._limit} byte limit",
                            stderr_tail=self.stderr_tail(),
                        )
                    )
                    return
                if not line:
                    break
                if line.strip():
                    try:
                        json.loads(line)
                    except ValueError:
                        self._kill_group()
                        shown = self._redact(line[:200].decode("utf-8", "replace").strip())
                        self._fail(
                            AgentProtocolError(
                                f"agent wrote non-JSON to stdout: {shown!r}",
                                stderr_tail=self.stderr_tail(),
                            )
                        )
                        return
                self.reader.feed_data(line)
            code = await self._proc.wait()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._stderr_task), _GRACE_SECONDS)
            if not self._closing:
                self._fail(
                    AgentCrashed(
                        f"agent exited with code {code}",
                        exit_code=code,
                        stderr_tail=self.stderr_tail(),
                    )
                )
        finally:
            self.reader.feed_eof()

    async def _drain_stderr(self, stderr: asyncio.StreamReader) -> None:
        """Keep the last lines (an undrained pipe would block the agent once it fills)."""
        pending = b""
        while chunk := await stderr.read(65536):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                self._stderr_tail.append(raw[:_STDERR_LINE_CHARS].decode("utf-8", "replace"))
            pending = pending[-_STDERR_LINE_CHARS:]
        if pending:
            self._stderr_tail.append(pending.decode("utf-8", "replace"))
