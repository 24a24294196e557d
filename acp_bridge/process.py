"""Spawn an external ACP agent inside the sandbox and own its life: one process group, stdio
pipes, a clean environment, and an end that leaves nothing running.

`AgentProcess` drives any `AgentChild`: `LocalChild` here (below), or an agent inside a
conversation's container (acp_bridge.container); the pump, the limits and the errors are the
same for both.

The agent runs as `argv` (never a shell string) under workspaces.sandbox, the launcher every
command on a host goes through: bubblewrap with new user, PID, IPC, UTS and (for network
"none", the default) network namespaces, the system read-only, and read-write only the
workspace and a private home directory (the caller's, which stays: it may hold the agent's
sessions for the next turn; else a new temporary one, removed when the agent ends). Whatever else it needs to run (its interpreter, its code) the caller names as
`readonly` paths. Its environment is exactly the one the caller passes, plus HOME and TMPDIR
naming the private directory when the caller gives none: the worker's own `os.environ` holds
the database URL and every team's secrets, so none of it is inherited (the SDK's
`spawn_agent_process` would merge in HOME, PATH and friends from it, which is why it is not
used).

That is the boundary: in its own PID namespace the agent sees only the sandbox's processes (bwrap,
started with an empty environment, and its own), so no /proc/<pid>/environ shows the worker's;
the project's code and settings, the worker's files and sockets, and with no network the
host's loopback (Postgres, Redis) are not there. Where there is no working sandbox the agent
is refused with SandboxUnavailable, unless the site allows unsandboxed commands
(CANVAS_UNSANDBOXED_COMMANDS): then it runs as a plain process with only the clean
environment, and can see the worker.

bwrap leads its own session, so killing its process group takes the agent and its children;
and with `--die-with-parent` the agent also ends if the thread that started it (the event
loop's) does.

Its stdout is pumped line by line into the StreamReader the SDK reads from. The SDK silently
skips lines that are not JSON; the pump does not: a garbage line, or a message larger than
`MESSAGE_LIMIT_BYTES`, ends the agent with AgentProtocolError. An agent that exits surfaces as
AgentCrashed with its exit code and the last lines of its stderr (passed through `redact`), a
call that runs past its deadline as AgentTimeout. In every case the whole group is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import tempfile
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

from workspaces import sandbox

T = TypeVar("T")

MESSAGE_LIMIT_BYTES = 50 * 1024 * 1024
"""Largest single JSON-RPC line accepted from an agent: the ACP SDK's own default (its
acp.core.DEFAULT_STDIO_BUFFER_LIMIT_BYTES, which tests/test_start_imports.py holds this to), as
asyncio's 64 KiB would break on a file read or a long diff. Not imported from the SDK: an MCP
server's process (orchestration.mcp.stdio) runs here too, and the SDK takes 0.6 s to import."""
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


class AgentChild(Protocol):
    """The agent's process as AgentProcess drives it, wherever it runs: here in the sandbox
    (`LocalChild`), or in a conversation's container (acp_bridge.container)."""

    stdin: asyncio.StreamWriter
    stdout: asyncio.StreamReader
    """Bounded by the message limit: an oversized line makes `readline` raise ValueError."""
    stderr: asyncio.StreamReader
    pgid: int | None
    """Its process group where that means something to the worker (a local one)."""

    @property
    def returncode(self) -> int | None: ...

    async def wait(self) -> int: ...

    def close_stdin(self) -> None: ...

    async def end_group(self, grace: float) -> None:
        """SIGTERM the whole group, SIGKILL what is left after `grace` (children included)."""
        ...

    async def kill_group(self) -> None:
        """SIGKILL the whole group now."""
        ...

    async def release(self) -> None:
        """Remove what was made for it (a private home); after its group is gone."""
        ...


class LocalChild:
    """An agent in the host's sandbox: bwrap leads its own session, so its pid is the group."""

    def __init__(self, proc: asyncio.subprocess.Process, temporary_home: Path | None) -> None:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self._proc = proc
        self._home = temporary_home
        self.stdin: asyncio.StreamWriter = proc.stdin
        self.stdout: asyncio.StreamReader = proc.stdout
        self.stderr: asyncio.StreamReader = proc.stderr
        self.pgid: int | None = proc.pid

    @classmethod
    async def spawn(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str],
        cwd: Path,
        workspace: Path | None = None,
        readonly: Sequence[Path] = (),
        network: sandbox.Network = "none",
        limit: int = MESSAGE_LIMIT_BYTES,
        home: Path | None = None,
    ) -> LocalChild:
        """See AgentProcess.spawn. `home`: a private directory to be the agent's HOME, the
        caller's to keep or remove; without one a temporary one is made, removed when the agent
        ends."""
        if shutil.which(command, path=env.get("PATH", sandbox.PATH)) is None:
            raise AgentCrashed(f"agent command {command!r} could not start: not found")
        temporary = None if home is not None else Path(tempfile.mkdtemp(prefix="acp-agent-"))
        home = home if home is not None else temporary
        assert home is not None
        spec = sandbox.SandboxSpec(
            cwd=cwd,
            writable=(workspace or cwd, home),
            env={"HOME": str(home), "TMPDIR": str(home), **env},
            network=network,
            readonly=tuple(readonly),
        )
        try:
            # The first call probes bwrap (a subprocess): not on the event loop.
            launch = await asyncio.to_thread(sandbox.prepare, spec, [command, *args])
            with launch:
                proc = await asyncio.create_subprocess_exec(
                    *launch.argv,
                    executable=launch.executable,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    env=launch.env,
                    cwd=launch.cwd,
                    pass_fds=launch.pass_fds,
                    start_new_session=True,
                    limit=limit,
                )
        except OSError as exc:
            if temporary is not None:
                shutil.rmtree(temporary, ignore_errors=True)
            raise AgentCrashed(f"agent command {command!r} could not start: {exc}") from exc
        except BaseException:
            if temporary is not None:
                shutil.rmtree(temporary, ignore_errors=True)
            raise
        return cls(proc, temporary)

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    async def wait(self) -> int:
        return await self._proc.wait()

    def close_stdin(self) -> None:
        with contextlib.suppress(Exception):
            self.stdin.close()

    async def end_group(self, grace: float) -> None:
        if self._proc.returncode is None:
            self._signal(signal.SIGTERM)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._proc.wait(), grace)
        # Children may outlive the leader in its group: kill the group whatever the leader did.
        self._signal(signal.SIGKILL)

    async def kill_group(self) -> None:
        self._signal(signal.SIGKILL)

    async def release(self) -> None:
        # Its pipes' transport closes now, on this loop: the agent's thread (and loop) may end
        # before the last reference goes, and a transport collected then cannot close itself.
        transport = getattr(self._proc, "_transport", None)
        if transport is not None:
            transport.close()
        if self._home is not None:
            await asyncio.to_thread(shutil.rmtree, self._home, True)

    def _signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, sig)


class AgentProcess:
    """One running agent. Create with `spawn` (in the sandbox) or from a started `AgentChild`;
    always end with `close` (idempotent).

    `stdin` and `reader` are the streams to hand to `acp.connect_to_agent`."""

    def __init__(
        self,
        child: AgentChild,
        *,
        redact: Callable[[str], str] | None = None,
        limit: int = MESSAGE_LIMIT_BYTES,
    ) -> None:
        self._child = child
        self._redact = redact or _no_redaction
        self.pgid = child.pgid
        """Its process group on this host (it leads a new session, so pgid == pid); None when
        it runs in a container (its group is the container's business, see `container`)."""
        self.stdin: asyncio.StreamWriter = child.stdin
        self._limit = limit
        self.reader = asyncio.StreamReader(limit=limit)
        self._stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self._failure: asyncio.Future[AgentError] = asyncio.get_running_loop().create_future()
        self._closing = False
        self._stderr_task = asyncio.create_task(self._drain_stderr(child.stderr))
        self._stdout_task = asyncio.create_task(self._pump_stdout(child.stdout))

    @classmethod
    async def spawn(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str],
        cwd: Path,
        workspace: Path | None = None,
        readonly: Sequence[Path] = (),
        network: sandbox.Network = "none",
        redact: Callable[[str], str] | None = None,
        limit: int = MESSAGE_LIMIT_BYTES,
    ) -> AgentProcess:
        """Start `command args...` in the sandbox, in `cwd` (inside `workspace`, which defaults
        to `cwd` and is its one writable directory besides its private home) with `env`.
        `readonly` paths are visible read-only; `network` is the sandbox's ("host" only where
        the site allows it). Raises AgentCrashed when the command cannot be started at all (not
        found, not executable), SandboxUnavailable where no sandbox works and the site does not
        allow unsandboxed commands."""
        child = await LocalChild.spawn(
            command, args, env=env, cwd=cwd, workspace=workspace, readonly=readonly,
            network=network, limit=limit,
        )  # fmt: skip
        return cls(child, redact=redact, limit=limit)

    @property
    def returncode(self) -> int | None:
        return self._child.returncode

    def usable(self) -> bool:
        """Whether the agent can take another call: running, never failed, not closing."""
        return self._child.returncode is None and not self._failure.done() and not self._closing

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
        await self._child.kill_group()
        raise timed_out

    async def close(self) -> None:
        """End the agent: close its stdin, give it a moment, then SIGTERM and SIGKILL the whole
        group; wait until the leader is reaped. Safe to call more than once."""
        self._closing = True
        self._child.close_stdin()
        if self._child.returncode is None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._child.wait(), _GRACE_SECONDS)
        # Whatever the leader did, its children may still be in its group.
        await self._child.end_group(_GRACE_SECONDS)
        await self._child.wait()
        for task in (self._stdout_task, self._stderr_task):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        if not self.reader.at_eof():
            self.reader.feed_eof()
        await self._child.release()

    # -- internals ---------------------------------------------------------------------------

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
                    await self._child.kill_group()
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
                        await self._child.kill_group()
                        shown = self._redact(line[:200].decode("utf-8", "replace").strip())
                        self._fail(
                            AgentProtocolError(
                                f"agent wrote non-JSON to stdout: {shown!r}",
                                stderr_tail=self.stderr_tail(),
                            )
                        )
                        return
                self.reader.feed_data(line)
            code = await self._child.wait()
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
