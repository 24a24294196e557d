"""An external agent's side of a slice: one ACP turn (orchestration.chain.slices plugs it in
for conversations whose `agent` names an ACP profile).

The turn answers every user message the agent has not been sent: the team's UserPromptSubmit
hooks check them first, an AcpPromptEvent records them before they go, and the agent's updates
are appended under the slice's lease as the driver (orchestration.external.driver) translates
them. Permission requests become held actions (orchestration.external.permissions). The
turn ends when the agent answers the prompt: FINISHED, or ERROR with an error event saying
what happened to the agent (crashed, garbage on stdout, past the turn timeout, cancel
ignored); an Interrupt sends session/cancel. An agent in this host's sandbox that ended its
turn well stays up for the next one (orchestration.external.pool: same process, same
session); any other turn starts the agent, which resumes its session with session/load when it
offers that and its private home (orchestration.external.home, kept across turns) still
holds it, and is told the transcript otherwise. Before the first prompt the workspace's
baseline is taken, as for our own runs, so Changes and diff show what the agent did.

A prompt with no AcpTurnEvent after it means the worker died during that turn (the sweeper
gave the run to this one): it ends with an error event saying so, and is never re-sent.
"""

from __future__ import annotations

import logging
import queue
import threading
from pathlib import Path

from acp_bridge.profiles import UnknownAcpProfileError, acp_profile_get
from conversations import store
from conversations.events import (
    POLICY_DECIDER,
    AcpPromptEvent,
    AcpSessionEvent,
    AcpTurnEvent,
    ActionDecisionEvent,
    ActionEvent,
    AgentErrorEvent,
    AgentMessageEvent,
    BaseEvent,
    ObservationEvent,
    Status,
    UserMessageBlockedEvent,
    UserMessageEvent,
)
from conversations.models import Conversation
from conversations.redaction import redactor_for_team
from teams.policies import policy_for_team
from workspaces.base import WorkspaceUnavailable
from workspaces.factory import workspace_fill
from workspaces.sources import SourceError
from workspaces.spec import spec_of

from ..control import hook_points
from ..control.notify import notify_status_on_commit
from ..control.prompt_check import prompt_check
from ..step.history import History, history_refresh
from ..step.loop import interrupted_observation, run_end_events
from ..step.runner import NOTIFY_STATUSES, worker_identity
from ..workspace import workspace_of
from .driver import Outgoing, TurnDriver, TurnRequest
from .environment import AgentEnvironment, agent_environment
from .home import agent_home_prepare
from .permissions import PendingPermissions, closed_calls
from .place import PlaceChoice, agent_place, in_container
from .pool import Kept, agent_keep, agent_take, fingerprint

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.1
"""How often the turn looks at its cancel flag and at decisions while the agent works."""
REPLAY_CHARS = 40_000
"""How much of the conversation a new session is told when the old one cannot be loaded."""
CONTINUE_PROMPT = "Continue where you left off."
LOST = (
    "The worker running this turn of the external agent stopped (it crashed or was killed) "
    "while the agent worked, and the agent's process went with it. What it did last may be "
    "missing here: check the workspace. Send a message to go on."
)


class AcpTurn:
    def __init__(self, conversation: Conversation, token: str, cancel: threading.Event):
        self.conversation_id = str(conversation.pk)
        self.token = token
        self.cancel = cancel
        self.team_id: int = conversation.team_id
        self.agent = conversation.agent
        self.title = conversation.title
        self.parent_id = conversation.parent_id
        self.conversation = conversation
        self.workspace_root = Path(conversation.workspace_path)
        self.policy = policy_for_team(self.team_id)
        self.history: History = history_refresh(self.conversation_id)
        secrets_version = conversation.team.secrets_version
        self.redactor = redactor_for_team(self.team_id, secrets_version)

    # -- the log -------------------------------------------------------------------------------

    def append(self, events: list[BaseEvent]) -> None:
        if events:
            stored = store.append(self.conversation_id, events, lease_token=self.token)
            self.history.extend(stored, self.conversation_id)

    def refresh(self) -> None:
        """Read what others appended (decisions, an Interrupt's status change)."""
        self.history.extend(
            store.load(self.conversation_id, after_seq=self.history.last_seq), self.conversation_id
        )

    @property
    def status(self) -> Status:
        return self.history.state.status

    def end(self, status: Status, reason: str, *first: BaseEvent) -> None:
        events = list(first)
        if self.status in (Status.RUNNING, Status.WAITING_FOR_CONFIRMATION):
            events += run_end_events(
                status, reason, self.history.state.run_id, previous=self.status,
                worker=worker_identity(),
            )  # fmt: skip
        self.append(events)
        if status in NOTIFY_STATUSES and self.parent_id is None:
            notify_status_on_commit(
                conversation_id=self.conversation_id, team_id=self.team_id,
                status=status.value, reason=reason, title=self.title,
            )  # fmt: skip

    def fail(self, code: str, message: str, reason: str, *first: BaseEvent) -> None:
        self.end(
            Status.ERROR, reason, *first, AgentErrorEvent(code=code, message=message),
            AcpTurnEvent(stop_reason="error"),
        )  # fmt: skip

    # -- the slice -----------------------------------------------------------------------------

    def run(self, *, max_steps: int, max_seconds: float) -> None:
        """One whole turn: an external agent's turn is not cut into slices."""
        if self.status != Status.RUNNING:
            return
        if self._lost_turn():
            return
        if not self._check_prompts():
            return
        messages = self._unsent()
        events = self.history.events
        if not messages and not any(isinstance(e, AcpTurnEvent) for e in events[-50:]):
            self.end(Status.FINISHED, "nothing new for the agent")
            return
        try:
            profile = acp_profile_get(self.agent, self.team_id)
        except UnknownAcpProfileError as exc:
            self.fail("acp_unknown_agent", str(exc), "the agent's profile is gone")
            return
        if not self.policy.agent_kind_allowed(f"acp:{profile.name}"):
            self.fail(
                "acp_not_allowed",
                f"The team's policy no longer allows the external agent {profile.name!r}.",
                "not allowed by policy",
            )
            return
        environment = agent_environment(
            profile, self.team_id, only=self.conversation.secret_names,
            in_container=in_container(self.conversation),
        )  # fmt: skip
        if environment.error is not None:
            self.fail(
                "acp_missing_secret", environment.error, "a secret the agent needs is missing"
            )
            return
        if not self._fill():
            return
        where = agent_place(self.conversation, policy=self.policy, profile=profile)
        if where.error is not None:
            self.fail("acp_start_failed", where.error, _reason("acp_start_failed"))
            return
        home = None
        if where.place is None:  # the sandbox here: a private home (a container has its own)
            try:
                home = agent_home_prepare(self.conversation_id, workspace=self.workspace_root)
            except (WorkspaceUnavailable, OSError) as exc:
                message = f"The agent's private home cannot be made: {exc}"
                self.fail("acp_start_failed", message, _reason("acp_start_failed"))
                return
        prompt = "\n\n".join(m.text for m in messages) if messages else CONTINUE_PROMPT
        last_turn = self._last_turn()
        self.append([AcpPromptEvent(message_ids=[m.id for m in messages])])
        self._drive(profile, environment, prompt, where, home, last_turn)

    def _drive(
        self, profile, environment: AgentEnvironment, prompt: str, where: PlaceChoice,
        home: Path | None, last_turn: str | None,
    ) -> None:  # fmt: skip
        previous = self._previous_session()
        request = TurnRequest(
            command=where.command, args=profile.args, env=environment.env,
            workspace=self.workspace_root, readonly=[Path(p) for p in where.readonly],
            network=where.network,
            prompt=prompt, replay=self._replay(prompt) if previous or self._earlier() else prompt,
            previous_session=previous, agent=profile.name, worker=worker_identity(),
            turn_timeout=float(profile.turn_timeout_seconds), default_mode=profile.default_mode,
            missing_secrets=environment.missing, place=where.place, home=home,
        )  # fmt: skip
        keep = where.place is None  # see orchestration.external.pool
        launched_as = fingerprint(request, secrets_version=self.conversation.team.secrets_version)
        warm = (
            agent_take(self.conversation_id, launched_as, session_id=previous, last_turn=last_turn)
            if keep
            else None
        )
        driver = TurnDriver(
            request, redactor=self.redactor, conversation_id=self.conversation_id, agent=warm
        )
        kept = False
        try:
            done, permissions = self._converse(driver)
            self._finish(done, permissions)
            kept = keep and done.error is None and self._keep(driver.agent, profile, launched_as)
        finally:
            if not kept:
                driver.agent.close()

    def _keep(self, agent, profile, launched_as: str) -> bool:
        session_id = agent.session.session_id if agent.session is not None else None
        last_turn = self._last_turn()
        if not agent.usable() or session_id is None or last_turn is None:
            return False
        agent_keep(
            self.conversation_id,
            Kept(agent, launched_as, session_id=session_id, last_turn=last_turn,
                 idle_seconds=float(profile.idle_timeout_seconds)),
        )  # fmt: skip
        return True

    def _converse(self, driver: TurnDriver) -> tuple[Outgoing, PendingPermissions]:
        """Start the turn on the driver and append what comes until the agent answers."""
        permissions = PendingPermissions(self, driver)
        driver.start()
        cancel_sent = False
        done: Outgoing | None = None
        try:
            while done is None:
                try:
                    item = driver.outbox.get(timeout=POLL_SECONDS)
                except queue.Empty:
                    item = None
                # A burst of updates is one append (one transaction, one broadcast).
                batch: list[BaseEvent] = []
                while item is not None:
                    if item.kind == "events":
                        batch.extend(item.events)
                    else:
                        self.append(batch)
                        batch = []
                        if item.kind == "done":
                            done = item
                            break
                        permissions.ask(item)
                    try:
                        item = driver.outbox.get_nowait()
                    except queue.Empty:
                        item = None
                self.append(batch)
                if done is None:
                    permissions.poll()
                    if self.cancel.is_set() and not cancel_sent:
                        driver.cancel()
                        cancel_sent = True
        except BaseException:
            driver.abort()
            raise
        finally:
            driver.wait(timeout=30)
        return done, permissions

    def _finish(self, done: Outgoing, permissions: PendingPermissions) -> None:
        from acp_bridge.translate import turn_usage

        self.refresh()
        leftovers = permissions.close(
            "the agent's turn ended before anyone answered", closed_calls(done.events)
        )
        stop = done.response.stop_reason if done.response is not None else "error"
        turn = AcpTurnEvent(stop_reason=str(stop), usage=turn_usage(done.response, done.cost_usd))
        if done.error is not None:
            code, message = done.error
            self.fail(code, message, _reason(code), *done.events, *leftovers)
            return
        if stop == "cancelled" or self.status not in (
            Status.RUNNING, Status.WAITING_FOR_CONFIRMATION,
        ):  # fmt: skip
            # An Interrupt or Stop ended the run already (run_control wrote its status).
            self.append([*done.events, *leftovers, turn])
            if self.status == Status.RUNNING:
                self.end(Status.PAUSED, "the agent stopped its turn (cancelled)")
            return
        self.end(
            Status.FINISHED, f"the agent ended its turn ({stop})", *done.events, *leftovers, turn
        )

    # -- before the prompt ---------------------------------------------------------------------

    def _lost_turn(self) -> bool:
        """End a turn whose worker died (a prompt without a turn end). True when it did."""
        events = self.history.events
        last_prompt = max(
            (i for i, e in enumerate(events) if isinstance(e, AcpPromptEvent)), default=None
        )
        if last_prompt is None or any(isinstance(e, AcpTurnEvent) for e in events[last_prompt:]):
            return False
        tail = events[last_prompt:]
        answered = {e.tool_call_id for e in tail if isinstance(e, ObservationEvent)}
        decided = {e.action_id for e in tail if isinstance(e, ActionDecisionEvent)}
        closing: list[BaseEvent] = []
        for action in (e for e in tail if isinstance(e, ActionEvent)):
            if action.tool_call_id in answered:
                continue
            if action.requires_confirmation and action.id not in decided:
                closing.append(
                    ActionDecisionEvent(
                        action_id=action.id, tool_call_id=action.tool_call_id,
                        decision="rejected", by=POLICY_DECIDER, reason="the turn was lost",
                    )
                )  # fmt: skip
            closing.append(interrupted_observation(action))
        self.fail("acp_turn_lost", LOST, "the worker running the turn stopped", *closing)
        return True

    def _check_prompts(self) -> bool:
        pending = list(self.history.state.unchecked.values())
        if not pending:
            return True
        hooks = hook_points.TeamHooks.load(self.team_id, network=self.policy.network)
        check = prompt_check(
            team_id=self.team_id, conversation_id=self.conversation_id, messages=pending,
            cwd=str(self.workspace_root), hooks=hooks,
        )  # fmt: skip
        if check.blocked is not None:
            self.end(Status.ERROR, check.end_reason, *check.events)
            return False
        self.append(check.events)
        return True

    def _unsent(self) -> list[UserMessageEvent]:
        """User messages after the last prompt, less those a hook blocked."""
        events = self.history.events
        last_prompt = max(
            (i for i, e in enumerate(events) if isinstance(e, AcpPromptEvent)), default=-1
        )
        blocked = {e.message_id for e in events if isinstance(e, UserMessageBlockedEvent)}
        return [
            e
            for e in events[last_prompt + 1 :]
            if isinstance(e, UserMessageEvent) and e.id not in blocked
        ]

    def _previous_session(self) -> str | None:
        for event in reversed(self.history.events):
            if isinstance(event, AcpSessionEvent) and event.agent == self.agent:
                return event.session_id or None
        return None

    def _last_turn(self) -> str | None:
        """The id of the last turn's end in the log (which agent process wrote the last turn)."""
        for event in reversed(self.history.events):
            if isinstance(event, AcpTurnEvent):
                return event.id
        return None

    def _earlier(self) -> bool:
        return any(isinstance(e, AcpTurnEvent) for e in self.history.events)

    def _replay(self, prompt: str) -> str:
        """The prompt for a new session after the old one was lost: the conversation so far
        (its messages, newest kept when it is long), then the prompt."""
        lines: list[str] = []
        for event in self.history.events:
            if isinstance(event, UserMessageEvent):
                lines.append(f"User: {event.text}")
            elif isinstance(event, AgentMessageEvent):
                lines.append(f"You: {event.text}")
            elif isinstance(event, ActionEvent) and event.title:
                lines.append(f"(you ran: {event.title})")
        transcript = "\n".join(lines)[-REPLAY_CHARS:]
        return (
            "You are continuing a conversation whose earlier session with you could not be "
            "resumed. What happened so far:\n\n"
            f"{transcript}\n\n(end of the earlier conversation)\n\n{prompt}"
        )

    def _fill(self) -> bool:
        """The workspace's git source on the first turn, then its baseline (once: what the
        Changes panel compares with), before the agent touches it; False when the source
        failed (run ended)."""
        workspace = workspace_of(self.conversation, policy=self.policy)
        if not any(isinstance(e, AcpPromptEvent) for e in self.history.events):
            try:
                workspace_fill(workspace, spec_of(self.conversation.workspace_spec))
            except SourceError as exc:
                self.fail(
                    "workspace_source", exc.message,
                    "the workspace's source could not be checked out",
                )  # fmt: skip
                return False
        workspace.baseline_take()
        return True


def _reason(code: str) -> str:
    return {
        "acp_agent_crashed": "the agent crashed",
        "acp_protocol_error": "the agent broke the protocol",
        "acp_turn_timeout": "the agent's turn timed out",
        "acp_cancel_ignored": "the agent ignored cancel",
        "acp_auth_required": "the agent needs authentication",
        "acp_start_failed": "the agent could not be started",
    }.get(code, "the agent failed")
