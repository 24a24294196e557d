"""Our side of ACP: the `acp.Client` an external agent talks to (`AcpSession` in `session`
drives it).

The client serves the agent's file system and terminal requests from one workspace root and
nothing else: a path is read from its text alone, refused when it leaves the root or contains
`..` (a container agent's `/workspace/...` paths are read as the host folder's), and files are
opened by handle through workspaces.fs, so a symbolic link anywhere in it is refused, never
followed, even if the agent swaps one in while we open it;
terminals run where the agent does (acp_bridge.places: under the sandbox launcher, or in the
container). `session/update` notifications are kept raw (the SDK's typed update models) in
arrival order per session id; updates for a session id not yet returned by `session/new` are
held back and delivered, in order, once it is. Permission requests go to the caller's
callback; without one, or when the turn is cancelled, the answer is `cancelled`. Translation
into our events is not done here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from acp import RequestError
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    CreateTerminalResponse,
    DeniedOutcome,
    EnvVariable,
    FileSystemCapabilities,
    Implementation,
    KillTerminalResponse,
    PermissionOption,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    ToolCallUpdate,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

from acp_bridge.places import AgentPlace, AgentTerminal, SandboxPlace
from workspaces import fs
from workspaces.base import WorkspacePathError, WorkspaceUnavailable
from workspaces.fs import parts_of

logger = logging.getLogger(__name__)

SessionUpdate = Any
"""One of the SDK's typed `session/update` payloads (AgentMessageChunk, ToolCallStart, ...)."""
UpdateCallback = Callable[[str, SessionUpdate], None]
"""Called synchronously in arrival order; an async consumer should put onto its own queue."""
PermissionCallback = Callable[[str, ToolCallUpdate, list[PermissionOption]], Awaitable[str | None]]
"""Returns the chosen option id, or None for cancelled."""

CLIENT_CAPABILITIES = ClientCapabilities(
    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
)
MAX_TERMINALS = 32
"""Open terminals per agent: each holds a sandboxed process and its output in memory."""
CLIENT_INFO = Implementation(name="agent-canvas", title="Agent Canvas", version="0.1.0")
MAX_READ_BYTES = 32 * 1024 * 1024
"""The largest file fs/read_text_file reads (a larger one is refused with its size)."""


def parts_inside(root: Path, path: str, *, agent_root: str | None = None) -> list[str]:
    """`path` (absolute, as ACP sends it, or relative to `root`) as components under `root`,
    from its text alone: WorkspacePathError when it is elsewhere or holds any `..`. Nothing on
    disk is looked at; open the result with workspaces.fs, which refuses links.

    `agent_root` is where the agent sees `root` when that is elsewhere (a container's
    /workspace): its absolute paths are read from there, and refusals name it, never `root`."""
    if "\0" in path:
        raise WorkspacePathError("path contains a NUL byte")
    if not os.path.isabs(path):
        return parts_of(path)
    if ".." in path.split("/"):
        raise WorkspacePathError(f"path {path!r} may not contain '..'")
    base = agent_root if agent_root is not None else str(root)
    if path != base and not path.startswith(base.rstrip("/") + "/"):
        raise WorkspacePathError(f"path {path!r} is outside the workspace ({base})")
    return parts_of(path[len(base) :].lstrip("/"))


def resolve_inside(root: Path, path: str, *, agent_root: str | None = None) -> Path:
    """The host path `parts_inside` names (lexical: it may pass a link), for a terminal's cwd,
    which the sandbox enters; never open a file by it."""
    return root.joinpath(*parts_inside(root, path, agent_root=agent_root))


def _refuse(exc: Exception) -> RequestError:
    return RequestError.invalid_params({"details": str(exc)})


class WorkspaceClient:
    """Implements `acp.Client` for one agent process over one workspace root."""

    def __init__(
        self,
        *,
        root: Path | None = None,
        place: AgentPlace | None = None,
        on_update: UpdateCallback | None = None,
        on_permission: PermissionCallback | None = None,
    ) -> None:
        """Serve `place` (where the agent runs); `root` alone means a sandbox on this host."""
        if place is None:
            assert root is not None, "give root or place"
            place = SandboxPlace(root)
        self.place = place
        self.root = place.root
        self.agent_root = place.agent_root
        self._on_update = on_update
        self._on_permission = on_permission
        self.updates: dict[str, list[SessionUpdate]] = defaultdict(list)
        """Every update received, per session id, in arrival order (buffered ones included)."""
        self._known: set[str] = set()
        self._held: dict[str, list[SessionUpdate]] = defaultdict(list)
        self._terminals: dict[str, AgentTerminal] = {}
        self._released: dict[str, str] = {}
        self._cancelled: dict[str, asyncio.Event] = defaultdict(asyncio.Event)

    # -- sessions ----------------------------------------------------------------------------

    def session_known(self, session_id: str) -> None:
        """Mark `session_id` as ours and deliver what arrived for it before we knew it."""
        self._known.add(session_id)
        for update in self._held.pop(session_id, []):
            self._deliver(session_id, update)

    def turn_started(self, session_id: str) -> None:
        self._cancelled[session_id].clear()

    def turn_cancelled(self, session_id: str) -> None:
        """Answer every open permission request of the session with `cancelled`."""
        self._cancelled[session_id].set()

    async def session_update(self, session_id: str, update: SessionUpdate, **kwargs: Any) -> None:
        # No await before recording: the SDK starts one task per notification, in order, and
        # each runs up to its first suspension, so this keeps arrival order.
        self.updates[session_id].append(update)
        if session_id in self._known:
            self._deliver(session_id, update)
        else:
            self._held[session_id].append(update)

    def _deliver(self, session_id: str, update: SessionUpdate) -> None:
        if self._on_update is not None:
            try:
                self._on_update(session_id, update)
            except Exception:
                logger.exception("session update callback failed")

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        cancelled = RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        if self._on_permission is None:
            return cancelled
        asked = asyncio.ensure_future(self._on_permission(session_id, tool_call, options))
        stop = asyncio.ensure_future(self._cancelled[session_id].wait())
        try:
            await asyncio.wait({asked, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if not asked.done():
            asked.cancel()
            return cancelled
        try:
            chosen = asked.result()
        except Exception:
            logger.exception("permission callback failed; answering cancelled")
            return cancelled
        if chosen is None or chosen not in {option.option_id for option in options}:
            return cancelled
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=chosen)
        )

    # -- files -------------------------------------------------------------------------------

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> ReadTextFileResponse:
        try:
            parts = parts_inside(self.root, path, agent_root=self.agent_root)
            data = await asyncio.to_thread(fs.read_bytes, self.root, parts, limit=MAX_READ_BYTES)
        except (WorkspacePathError, fs.FileTooLarge) as exc:
            raise _refuse(exc) from None
        except FileNotFoundError:
            raise RequestError.resource_not_found(path) from None
        except OSError as exc:
            raise RequestError.internal_error({"details": f"{path}: {exc.strerror}"}) from None
        text = data.decode("utf-8", errors="replace")
        if line is None and limit is None:
            return ReadTextFileResponse(content=text)
        lines = text.splitlines(keepends=True)
        start = max((line or 1) - 1, 0)
        end = None if limit is None else start + max(limit, 0)
        return ReadTextFileResponse(content="".join(lines[start:end]))

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse:
        try:
            parts = parts_inside(self.root, path, agent_root=self.agent_root)
            data = content.encode("utf-8")
            await asyncio.to_thread(
                fs.write_owned, self.root, parts, data, owner=self.place.file_owner(),
                make_parents=True,
            )  # fmt: skip
        except (WorkspacePathError, UnicodeEncodeError) as exc:
            raise _refuse(exc) from None
        except OSError as exc:
            raise RequestError.internal_error({"details": f"{path}: {exc.strerror}"}) from None
        return WriteTextFileResponse()

    # -- terminals ---------------------------------------------------------------------------

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[EnvVariable] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> CreateTerminalResponse:
        try:
            start_dir = (
                resolve_inside(self.root, cwd, agent_root=self.agent_root) if cwd else self.root
            )
        except WorkspacePathError as exc:
            raise _refuse(exc) from None
        if len(self._terminals) >= MAX_TERMINALS:
            raise RequestError.invalid_params(
                {"details": f"at most {MAX_TERMINALS} open terminals; release one first"}
            )
        try:
            terminal = await self.place.start_terminal(
                command=command,
                args=args or [],
                env={variable.name: variable.value for variable in env or []},
                cwd=start_dir,
                output_byte_limit=output_byte_limit,
            )
        except (WorkspaceUnavailable, OSError) as exc:
            raise RequestError.internal_error({"details": str(exc)}) from None
        terminal_id = f"term-{uuid.uuid4().hex[:12]}"
        self._terminals[terminal_id] = terminal
        return CreateTerminalResponse(terminal_id=terminal_id)

    def _terminal(self, terminal_id: str) -> AgentTerminal:
        try:
            return self._terminals[terminal_id]
        except KeyError:
            raise RequestError.invalid_params({"details": f"no terminal {terminal_id}"}) from None

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> TerminalOutputResponse:
        text, truncated, status = self._terminal(terminal_id).output()
        exit_status = (
            None
            if status is None
            else TerminalExitStatus(exit_code=status.exit_code, signal=status.signal)
        )
        return TerminalOutputResponse(output=text, truncated=truncated, exit_status=exit_status)

    def terminal_text(self, terminal_id: str) -> str | None:
        """A terminal's output so far, for what we record of the tool call showing it."""
        terminal = self._terminals.get(terminal_id)
        if terminal is None:
            return self._released.get(terminal_id)
        return terminal.output()[0]

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        status = await self._terminal(terminal_id).wait()
        return WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> KillTerminalResponse:
        await asyncio.to_thread(self._terminal(terminal_id).kill)
        return KillTerminalResponse()

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> ReleaseTerminalResponse:
        terminal = self._terminals.pop(terminal_id, None)
        if terminal is not None:
            # An agent may report the call (naming this terminal) after releasing it.
            self._released[terminal_id] = terminal.output()[0]
            while len(self._released) > MAX_TERMINALS:
                self._released.pop(next(iter(self._released)))
            await terminal.release()
        return ReleaseTerminalResponse()

    async def aclose(self) -> None:
        """Kill every terminal the agent left open."""
        terminals, self._terminals = list(self._terminals.values()), {}
        for terminal in terminals:
            with contextlib.suppress(Exception):
                await terminal.release()

    def on_connect(self, conn: Any) -> None:
        """The SDK hands us the agent proxy; AcpSession keeps it instead."""
