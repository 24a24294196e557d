"""An external agent's permission requests during its turn, on the worker's side.

Each request arrives as a held action carrying the agent's options. The team policy may
answer it at once by the call's kind (`acp_auto_allow_kinds`: the agent's allow option, by
kind, recorded as decided by the policy); otherwise the conversation waits for confirmation
and the request is in the approval inbox (orchestration.control.approvals, which records a
person's decision), while this turn keeps the agent waiting for the answer. Decisions are read
back from the log every POLL_SECONDS; a request nobody answers within the policy's timeout
is rejected by the policy. Who answered is in the decision event and the audit log.

The timeout lives in the turn, so a worker that dies while a request waits takes it along,
and the agent's process too: nothing could act on an answer any more. The sweeper, reviving
such a run (its lease expired while it waited), closes those requests as expired
(`orphaned_requests_expire`): rejected by the policy, saying why. Until then an approval of
one answers 409 (`orphaned_request_refusal`), as it does after.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db import transaction

from conversations import store
from conversations.events import (
    POLICY_DECIDER,
    ActionDecisionEvent,
    ActionEvent,
    BaseEvent,
    Decision,
    ObservationEvent,
    Status,
    StatusChangeEvent,
)
from conversations.models import Conversation
from conversations.selectors import held_batch_start
from teams.audit import audit_record

from ..control.approvals import option_for, pending_in
from ..control.notify import notify_status_on_commit
from ..step.loop import rejected_observation

if TYPE_CHECKING:
    from .driver import Outgoing, TurnDriver
    from .turn import AcpTurn

EXPIRED = (
    "expired: the worker running the agent's turn stopped while this request waited, and the "
    "agent's process went with it, so no answer could reach it"
)
POLL_SECONDS = 0.1
"""How often a waiting request looks for a decision in the log (one small read): a person's
answer reaches the agent within this."""
POLICY = POLICY_DECIDER


@dataclass
class _Asked:
    action: ActionEvent
    reply: asyncio.Future
    deadline: float


class PendingPermissions:
    def __init__(self, turn: AcpTurn, driver: TurnDriver) -> None:
        self.turn = turn
        self.driver = driver
        self.asked: dict[str, _Asked] = {}
        self._next_poll = 0.0
        self.timeout = turn.policy.acp_permission_timeout()

    def ask(self, item: Outgoing) -> None:
        *before, action = item.events
        assert isinstance(action, ActionEvent) and item.reply is not None
        option = (
            option_for(action, Decision.APPROVED, None)
            if self.turn.policy.acp_auto_allows(action.kind)
            else None
        )
        if option is not None:
            reason = f"the team policy allows {action.kind} calls without asking"
            self.turn.append(
                [
                    *before,
                    action.model_copy(update={"requires_confirmation": False}),
                    ActionDecisionEvent(
                        action_id=action.id, tool_call_id=action.tool_call_id,
                        decision=Decision.APPROVED, by=POLICY, reason=reason,
                        option_id=option.option_id,
                    ),
                ]
            )  # fmt: skip
            self._audit(action, Decision.APPROVED, option.option_id, reason)
            self.driver.answer(item.reply, option.option_id)
            return
        events: list[BaseEvent] = [*before, action]
        if self.turn.status == Status.RUNNING:
            events.append(
                StatusChangeEvent(
                    status=Status.WAITING_FOR_CONFIRMATION, previous=Status.RUNNING,
                    reason=f"the agent asks permission: {action.title or action.tool}",
                )
            )  # fmt: skip
        self.turn.append(events)
        self.asked[action.id] = _Asked(action, item.reply, time.monotonic() + self.timeout)
        notify_status_on_commit(
            conversation_id=self.turn.conversation_id, team_id=self.turn.team_id,
            status=Status.WAITING_FOR_CONFIRMATION.value,
            reason=f"{self.turn.agent} asks permission: {action.title or action.tool}",
            title=self.turn.title,
        )  # fmt: skip

    def poll(self) -> None:
        """Answer the agent for every request decided since; reject those past the timeout."""
        if not self.asked or time.monotonic() < self._next_poll:
            return
        self._next_poll = time.monotonic() + POLL_SECONDS
        self.turn.refresh()
        self._deliver()
        now = time.monotonic()
        for asked in [a for a in self.asked.values() if a.deadline <= now]:
            self._time_out(asked)
        self._deliver()

    def _deliver(self) -> None:
        decisions = {
            e.action_id: e
            for e in self.turn.history.events
            if isinstance(e, ActionDecisionEvent) and e.action_id in self.asked
        }
        for action_id, decision in decisions.items():
            asked = self.asked.pop(action_id)
            if decision.decision == Decision.REJECTED:
                # The decision wrote the call's observation; the agent's own report of the
                # refused call adds nothing.
                self.driver.call(self.driver.translator.answered, asked.action.tool_call_id)
            self.driver.answer(asked.reply, decision.option_id)

    def _time_out(self, asked: _Asked) -> None:
        action = asked.action
        reason = f"no one answered within {self.timeout:.0f} s"
        with transaction.atomic():
            Conversation.objects.select_for_update().only("id").get(pk=self.turn.conversation_id)
            self.turn.refresh()
            if any(
                isinstance(e, ActionDecisionEvent) and e.action_id == action.id
                for e in self.turn.history.events
            ):
                return  # a person answered just now: _deliver passes it on
            option = option_for(action, Decision.REJECTED, None)
            events: list[BaseEvent] = [
                ActionDecisionEvent(
                    action_id=action.id, tool_call_id=action.tool_call_id,
                    decision=Decision.REJECTED, by=POLICY, reason=reason,
                    option_id=option.option_id if option is not None else None,
                ),
                rejected_observation(action, source="policy", by=POLICY, reason=reason),
            ]  # fmt: skip
            others = [a for a in self.asked if a != action.id]
            if not others and self.turn.status == Status.WAITING_FOR_CONFIRMATION:
                events.append(
                    StatusChangeEvent(
                        status=Status.RUNNING, previous=Status.WAITING_FOR_CONFIRMATION,
                        reason=f"rejected by the team policy: {reason}",
                    )
                )  # fmt: skip
            self.turn.append(events)
            self._audit(action, Decision.REJECTED, events[0].option_id, reason)

    def close(self, reason: str, answered: set[str]) -> list[BaseEvent]:
        """Decisions for requests still open when the turn ended (the agent gave up on them
        or was stopped): rejected by the policy, with an observation unless `answered` (the
        tool call ids the turn's last events already close) has one."""
        self.turn.refresh()
        self._deliver()
        events: list[BaseEvent] = []
        for asked in self.asked.values():
            action = asked.action
            events.append(
                ActionDecisionEvent(
                    action_id=action.id, tool_call_id=action.tool_call_id,
                    decision=Decision.REJECTED, by=POLICY, reason=reason,
                )
            )  # fmt: skip
            if action.tool_call_id not in answered:
                events.append(
                    rejected_observation(action, source="policy", by=POLICY, reason=reason)
                )
        self.asked.clear()
        return events

    def _audit(self, action: ActionEvent, decision: Decision, option: str | None, why: str) -> None:
        audit_record(
            actor=None, kind=f"action.{decision}", team=self.turn.team_id,
            target=self.turn.conversation_id,
            data={"tool": action.tool, "kind": action.kind, "by": POLICY, "reason": why,
                  **({"option": option} if option else {})},
        )  # fmt: skip


def closed_calls(events: list[BaseEvent]) -> set[str]:
    return {e.tool_call_id for e in events if isinstance(e, ObservationEvent)}


def orphaned_requests_expire(conversation_id) -> list[BaseEvent]:
    """The events closing every permission request still open in a conversation whose
    agent's turn died while it waited (the sweeper's, holding the row's lock, appends them
    before the run goes on): each rejected by the policy as EXPIRED, its call marked as never
    run and interrupted, and audited. Empty when none is open."""
    start = held_batch_start(conversation_id)
    if start is None:
        return []
    loaded = [(s.seq, s.event) for s in store.load(conversation_id, after_seq=start - 1)]
    events: list[BaseEvent] = []
    team_id = None
    for _, action in pending_in(loaded):
        events.append(
            ActionDecisionEvent(
                action_id=action.id, tool_call_id=action.tool_call_id,
                decision=Decision.REJECTED, by=POLICY, reason=EXPIRED,
            )
        )  # fmt: skip
        closed = rejected_observation(action, source="policy", by=POLICY, reason=EXPIRED)
        events.append(closed.model_copy(update={"interrupted": True}))
        team_id = team_id or Conversation.objects.values_list("team_id", flat=True).get(
            pk=conversation_id
        )
        audit_record(
            actor=None, kind=f"action.{Decision.REJECTED}", team=team_id,
            target=str(conversation_id),
            data={"tool": action.tool, "kind": action.kind, "by": POLICY, "reason": EXPIRED},
        )  # fmt: skip
    return events


def orphaned_request_refusal(conversation: Conversation) -> str | None:
    """Why a person's answer to an external agent's waiting request cannot be taken: the
    turn that asked holds no live lease (its worker died; the sweeper expires the request
    within one sweep period). None while the turn waits for it. Call with the row locked."""
    from django.utils import timezone

    if not conversation.agent or conversation.status != Status.WAITING_FOR_CONFIRMATION:
        return None
    expires = conversation.lease_expires_at
    if conversation.lease_token is not None and expires is not None and expires > timezone.now():
        return None
    return (
        "this request has expired: the worker running the agent's turn stopped while it "
        "waited, so no answer can reach the agent. Send a message to go on."
    )
