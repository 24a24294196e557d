"""The asynchronous side of one ACP turn, on the event loop of the agent's own thread
(orchestration.external.agent_loop).

Given an agent kept warm from an earlier turn (orchestration.external.pool), the driver sends
the prompt to its open session. Otherwise it spawns the agent (acp_bridge.session; in the
request's place: the sandbox here, or the conversation's container) on a new `AgentLoop`,
opens its session (session/load of the previous one when the agent offers it, else a new
one, told what happened so far), then sends the prompt; either way it waits for the answer.
The agent stays up after the turn: the caller keeps it in the pool or closes it (`agent`).
It never touches the database: everything for the log goes, in order, onto `outbox` as
`Outgoing` items for the worker's thread (orchestration.external.turn), which appends them
under the run's lease and answers permission requests through `answer`. `cancel()`
(thread-safe) sends session/cancel; an agent that does not answer the prompt within
CANCEL_GRACE_SECONDS after it is killed with its process group.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from acp import RequestError
from acp.schema import PermissionOption, PromptResponse, ToolCallUpdate

from acp_bridge.places import AgentPlace
from acp_bridge.process import AgentError, AgentTimeout
from acp_bridge.session import AcpSession
from acp_bridge.translate import Translator
from conversations.broadcast import publish_delta
from conversations.events import AcpSessionEvent, BaseEvent
from conversations.redaction import Redactor
from workspaces.sandbox import Network

from .agent_loop import AgentLoop

CANCEL_GRACE_SECONDS = 5.0
START_TIMEOUT_SECONDS = 60.0
"""Each call before the prompt (initialize, session/new or load, set mode) must answer by then."""
AUTH_REQUIRED = -32000
SYNC_METHOD = "canvas/sync"
"""An extension request (sent as `_canvas/sync`) no agent knows: what it answers, if only
"method not found", comes after everything it wrote before."""


@dataclass(frozen=True)
class Outgoing:
    kind: Literal["events", "permission", "done"]
    events: list[BaseEvent] = field(default_factory=list)
    """For "events" and "permission" (the held action last); for "done", the turn's last ones."""
    reply: asyncio.Future | None = None
    """For "permission": set to the chosen option id, or None for cancelled."""
    response: PromptResponse | None = None
    error: tuple[str, str] | None = None
    """For "done": (code, message) when the turn failed."""
    cost_usd: float = 0.0


@dataclass(frozen=True)
class TurnRequest:
    command: str
    args: Sequence[str]
    env: Mapping[str, str]
    workspace: Path
    readonly: Sequence[Path]
    network: Network
    prompt: str
    """What to send when the session is new or loaded."""
    replay: str
    """What to send instead when a previous session could not be loaded (history + prompt)."""
    previous_session: str | None
    agent: str
    worker: str
    turn_timeout: float
    default_mode: str | None = None
    missing_secrets: Sequence[str] = ()
    """Secrets the profile names that the team does not have: named if the agent wants auth."""
    place: AgentPlace | None = None
    """Where the agent runs (its conversation's container); None: the sandbox on this host,
    with `readonly`, `network` and `home`."""
    home: Path | None = None
    """The agent's private home in the sandbox (orchestration.external.home), made and kept
    by the caller."""


class TurnDriver:
    def __init__(
        self, request: TurnRequest, *, redactor: Redactor | None, conversation_id: str,
        agent: AgentLoop | None = None,
    ) -> None:  # fmt: skip
        """`agent`: one kept from an earlier turn of the conversation, its session open."""
        self.request = request
        self.agent = agent if agent is not None else AgentLoop()
        self.warm = agent is not None
        self.outbox: queue.Queue[Outgoing] = queue.Queue()
        self._redactor = redactor
        self._conversation_id = conversation_id
        self._loop: asyncio.AbstractEventLoop | None = None
        self._cancel: asyncio.Event | None = None
        self._abort: asyncio.Event | None = None
        self._ready = threading.Event()
        self._muted = False
        self._session: AcpSession | None = None
        self._asking: set[asyncio.Future] = set()
        """Permission requests the agent is waiting on (answered `cancelled` on cancel)."""
        self.translator = Translator(
            redactor=redactor, live=self._live, terminal_output=self._terminal_text
        )
        self._done: concurrent.futures.Future | None = None

    # -- the worker's thread -------------------------------------------------------------------

    def start(self) -> None:
        self._loop = self.agent.loop
        self.agent.handler = self
        self._done = self.agent.submit(self._run())
        self._ready.wait(5)

    def wait(self, timeout: float) -> None:
        """Until the turn's coroutine has ended (it put "done" last), at most `timeout`."""
        if self._done is not None:
            with contextlib.suppress(Exception):
                self._done.result(timeout)

    def call(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run `fn(*args)` on the driver's loop (e.g. the translator's `answered`)."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(fn, *args)

    def answer(self, reply: asyncio.Future, option_id: str | None) -> None:
        self.call(lambda: reply.done() or reply.set_result(option_id))

    def cancel(self) -> None:
        """session/cancel: the agent should stop and answer the prompt `cancelled`."""
        if self._cancel is not None:
            self.call(self._cancel.set)

    def abort(self) -> None:
        """Kill the agent now, whatever it is doing (the worker's side gave up on the turn)."""
        if self._abort is not None:
            self.call(self._abort.set)

    # -- the agent's thread --------------------------------------------------------------------

    async def _run(self) -> None:
        self._cancel, self._abort = asyncio.Event(), asyncio.Event()
        self._ready.set()
        response: PromptResponse | None = None
        error: tuple[str, str] | None = None
        try:
            work = asyncio.ensure_future(self._turn())
            abort = asyncio.ensure_future(self._abort.wait())
            await asyncio.wait({work, abort}, return_when=asyncio.FIRST_COMPLETED)
            abort.cancel()
            if not work.done():
                work.cancel()
                error = ("acp_aborted", "the turn was abandoned; the agent's processes were killed")
            else:
                response, error = work.result()
        except Exception as exc:  # never leave the worker's thread waiting for "done"
            error = ("acp_internal_error", f"{type(exc).__name__}: {exc}")
        if error is not None:
            reason = f"the turn ended: {error[1]}"
        elif response is not None and response.stop_reason == "cancelled":
            reason = "interrupted: the turn was cancelled"
        else:
            reason = "the agent ended its turn with this tool call still open"
        final = self.translator.finish(reason=reason)
        if self.agent.handler is self:
            self.agent.handler = None
        self.outbox.put(
            Outgoing(
                "done", events=final, response=response, error=error,
                cost_usd=self.translator.cost_usd,
            )
        )  # fmt: skip

    async def _turn(self) -> tuple[PromptResponse | None, tuple[str, str] | None]:
        r = self.request
        try:
            if self.warm and self.agent.session is not None:
                session, text = self.agent.session, r.prompt
                self._session = session
            else:
                session = await self.agent.open(
                    r.command, r.args, env=r.env, cwd=r.workspace, readonly=r.readonly,
                    network=r.network, timeout=START_TIMEOUT_SECONDS, place=r.place,
                    home=r.home,
                    redact=self._redactor.redact if self._redactor is not None else None,
                )  # fmt: skip
                self._session = session
                try:
                    text = await self._open(session)
                except RequestError as exc:
                    return None, self._request_error(exc)
            return await self._prompt(session, text), None
        except AgentTimeout as exc:
            return None, ("acp_turn_timeout", str(exc))
        except AgentError as exc:
            return None, (_code(exc), str(exc))
        except RequestError as exc:
            return None, ("acp_agent_error", f"the agent answered with an error: {exc}")
        except (OSError, ValueError) as exc:
            return None, ("acp_start_failed", f"the agent could not be started: {exc}")
        finally:
            self._session = None

    async def _open(self, session: AcpSession) -> str:
        """Load the previous session or start one; returns what to prompt with."""
        r = self.request
        info = session.initialize_response
        capabilities = info.agent_capabilities if info is not None else None
        can_load = bool(capabilities and capabilities.load_session)
        how: Literal["new", "loaded", "replayed"] = "new"
        if r.previous_session and can_load:
            self._muted = True  # the agent replays the session's history: already in our log
            try:
                await session.process.guard(
                    session.conn.load_session(
                        cwd=str(session.cwd), session_id=r.previous_session, mcp_servers=[]
                    ),
                    timeout=START_TIMEOUT_SECONDS,
                )  # fmt: skip
                # The protocol has the history replayed before the answer; Gemini CLI 0.61.0
                # streams it after. One more round trip, still muted, drops that too.
                with contextlib.suppress(RequestError):
                    await session.process.guard(
                        session.conn.ext_method(SYNC_METHOD, {}), timeout=START_TIMEOUT_SECONDS
                    )
                await asyncio.sleep(0)  # let replayed notifications already read be dropped
                session.session_id = r.previous_session
                session.client.session_known(r.previous_session)
                how = "loaded"
            except RequestError:
                how = "replayed"
            finally:
                self._muted = False
        if how != "loaded":
            await self._new_session(session, info)
            if r.previous_session or r.replay != r.prompt:
                how = "replayed"
        if r.default_mode:
            # An agent without that mode keeps its own; the state event shows which.
            with contextlib.suppress(RequestError):
                await session.process.guard(
                    session.conn.set_session_mode(
                        mode_id=r.default_mode, session_id=session.session_id
                    ),
                    timeout=START_TIMEOUT_SECONDS,
                )  # fmt: skip
        agent_info = info.agent_info if info is not None else None
        self.outbox.put(
            Outgoing(
                "events",
                events=[
                    AcpSessionEvent(
                        agent=r.agent, session_id=session.session_id or "", how=how,
                        agent_name=(agent_info.name if agent_info else "") or "",
                        agent_version=(agent_info.version if agent_info else "") or "",
                        load_supported=can_load, worker=r.worker,
                    )
                ],
            )
        )  # fmt: skip
        return r.prompt if how != "replayed" else r.replay

    async def _new_session(self, session: AcpSession, info: Any) -> None:
        try:
            await session.new_session()
        except RequestError as exc:
            methods = list(getattr(info, "auth_methods", None) or [])
            if exc.code != AUTH_REQUIRED or not methods:
                raise
            # The agent reads its credentials from the environment it was given; asking it to
            # authenticate with each method it offers is all a client without a person can do.
            for method in methods:
                try:
                    await session.process.guard(
                        session.conn.authenticate(method_id=method.id),
                        timeout=START_TIMEOUT_SECONDS,
                    )
                    break
                except RequestError:
                    continue
            await session.new_session()

    async def _prompt(self, session: AcpSession, text: str) -> PromptResponse:
        assert self._cancel is not None
        prompt = asyncio.ensure_future(session.prompt(text, timeout=self.request.turn_timeout))
        cancelled = asyncio.ensure_future(self._cancel.wait())
        await asyncio.wait({prompt, cancelled}, return_when=asyncio.FIRST_COMPLETED)
        if not prompt.done():
            await session.cancel()
            # The protocol asks the client to answer whatever the agent still waits on.
            for reply in self._asking:
                reply.done() or reply.set_result(None)
            done, _ = await asyncio.wait({prompt}, timeout=CANCEL_GRACE_SECONDS)
            if not done:
                prompt.cancel()
                raise CancelIgnored(
                    f"the agent did not stop within {CANCEL_GRACE_SECONDS:.0f} s of "
                    "session/cancel; its processes were killed"
                )
        cancelled.cancel()
        return prompt.result()

    def _request_error(self, exc: RequestError) -> tuple[str, str]:
        if exc.code == AUTH_REQUIRED:
            missing = ", ".join(self.request.missing_secrets)
            hint = (
                f"add the team secret(s) {missing} (the profile names them)"
                if missing
                else "check the credentials the profile gives it"
            )
            return ("acp_auth_required", f"the agent needs authentication: {hint}.")
        return ("acp_agent_error", f"the agent refused to open a session: {exc}")

    # -- callbacks from the client (on this loop) --------------------------------------------

    def on_update(self, session_id: str, update: Any) -> None:
        if self._muted:
            return
        events = self.translator.feed(update)
        if events:
            self.outbox.put(Outgoing("events", events=events))

    async def on_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption]
    ) -> str | None:
        reply: asyncio.Future = asyncio.get_running_loop().create_future()
        events = self.translator.permission(tool_call, options)
        self.outbox.put(Outgoing("permission", events=events, reply=reply))
        self._asking.add(reply)
        try:
            return await reply
        finally:
            self._asking.discard(reply)

    def _live(self, kind: str, key: str, text: str, title: str) -> None:
        publish_delta(self._conversation_id, kind=kind, key=key, text=text, title=title)

    def _terminal_text(self, terminal_id: str) -> str | None:
        session = self._session
        return session.client.terminal_text(terminal_id) if session is not None else None


class CancelIgnored(AgentError):
    """The agent kept working after session/cancel."""


def _code(exc: AgentError) -> str:
    from acp_bridge.process import AgentCrashed, AgentProtocolError

    if isinstance(exc, CancelIgnored):
        return "acp_cancel_ignored"
    if isinstance(exc, AgentCrashed):
        return "acp_agent_crashed"
    if isinstance(exc, AgentProtocolError):
        return "acp_protocol_error"
    return "acp_agent_error"
