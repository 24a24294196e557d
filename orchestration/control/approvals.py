"""The approval inbox: held actions and the decisions on them (interrupting a run is run
control: orchestration.run_control).

A held action waits with the conversation in WAITING_FOR_CONFIRMATION. Each decision is an
event naming who decided; a rejection also gives the action its observation, carrying the
reason for the model to read. When the last held action of the batch is decided, the run goes
on: its next slice executes the approved actions before the model is asked anything new.
Decisions take the conversation's row lock, so of two people deciding at once exactly one
wins and the other is told it was already decided.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from common.errors import Conflict, NotFound
from conversations import store
from conversations.events import (
    ActionDecisionEvent,
    ActionEvent,
    AnyEvent,
    Decision,
    ObservationEvent,
    Status,
    StatusChangeEvent,
)
from conversations.models import Conversation
from conversations.selectors import (
    action_exists,
    conversations_visible_to,
    held_batch_start,
    held_batch_starts,
)
from teams.audit import audit_record

from ..chain.dispatch import enqueue_slice_on_commit, new_slice_id, slice_due_at
from ..step.loop import rejected_observation
from .risk import rule_explanation


@dataclass(frozen=True, slots=True)
class PendingAction:
    action_id: str
    seq: int
    tool_call_id: str
    tool: str
    arguments: dict[str, Any] | str
    risk: str
    rules: list[tuple[str, str]]
    """(rule id, explanation) for every analyzer rule the call tripped."""
    thought: str


def pending_in(events: list[tuple[int, AnyEvent]]) -> list[tuple[int, ActionEvent]]:
    """Held actions with neither a decision nor a result yet, in log order."""
    decided = {e.action_id for _, e in events if isinstance(e, ActionDecisionEvent)}
    answered = {e.tool_call_id for _, e in events if isinstance(e, ObservationEvent)}
    return [
        (seq, e)
        for seq, e in events
        if isinstance(e, ActionEvent)
        and e.requires_confirmation
        and e.id not in decided
        and e.tool_call_id not in answered
    ]


def _events(conversation_id) -> list[tuple[int, AnyEvent]]:
    """The events of the latest held batch onwards: all an approval needs, not the whole log."""
    start = held_batch_start(conversation_id)
    if start is None:
        return []
    return [(s.seq, s.event) for s in store.load(conversation_id, after_seq=start - 1)]


def pending_actions(conversation_id) -> list[PendingAction]:
    conversation = Conversation.objects.filter(pk=conversation_id).only("status").first()
    if conversation is None or conversation.status != Status.WAITING_FOR_CONFIRMATION:
        return []
    return _pending(_events(conversation_id))


def pending_actions_for(conversation_ids) -> dict[Any, list[PendingAction]]:
    """`pending_actions` of many conversations in two queries, however many there are: for
    conversations the caller read as waiting (conversations_waiting); id -> its actions, none
    for one decided since."""
    ids = list(conversation_ids)
    starts = held_batch_starts(ids)
    loaded = store.load_many({pk: start - 1 for pk, start in starts.items()})
    return {pk: _pending([(s.seq, s.event) for s in loaded.get(pk, [])]) for pk in ids}


def _pending(events: list[tuple[int, AnyEvent]]) -> list[PendingAction]:
    return [
        PendingAction(
            action_id=action.id,
            seq=seq,
            tool_call_id=action.tool_call_id,
            tool=action.tool,
            arguments=action.parsed_arguments.as_object or action.arguments,
            risk=action.risk or "MEDIUM",
            rules=[(rule, rule_explanation(rule)) for rule in action.risk_rules],
            thought=action.thought,
        )
        for seq, action in pending_in(events)
    ]


def _name(by) -> str:
    return by.get_username() if getattr(by, "is_authenticated", False) else "api"


def _decide(
    conversation_id, action_ids: list[str] | None, *, decision: Decision, by, reason: str
) -> int:
    """Record decisions; `None` means every pending action. Returns how many were decided."""
    name = _name(by)
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=conversation_id)
        events = _events(conversation.pk)
        pending = {a.id: a for _, a in pending_in(events)}
        if conversation.status != Status.WAITING_FOR_CONFIRMATION or (
            action_ids is not None and not set(action_ids) & set(pending)
        ):
            if action_ids is not None and not any(
                action_exists(conversation.pk, i) for i in action_ids
            ):
                raise NotFound("no such pending action.")
            raise Conflict("this action was already decided, or nothing is waiting.")
        chosen = [pending[i] for i in (action_ids or list(pending)) if i in pending]
        appended: list = []
        for action in chosen:
            appended.append(
                ActionDecisionEvent(
                    action_id=action.id, tool_call_id=action.tool_call_id,
                    decision=decision, by=name, reason=reason,
                )
            )  # fmt: skip
            if decision == Decision.REJECTED:
                appended.append(rejected_observation(action, source="user", by=name, reason=reason))
        if len(chosen) == len(pending):  # the batch is decided: the run goes on
            conversation.run_slice = new_slice_id()
            conversation.run_slice_due_at = slice_due_at()
            conversation.save(update_fields=["run_slice", "run_slice_due_at", "updated_at"])
            enqueue_slice_on_commit(
                conversation.pk, conversation.run_slice, worker_host=conversation.worker_host
            )
            appended.append(
                StatusChangeEvent(
                    status=Status.RUNNING, previous=Status.WAITING_FOR_CONFIRMATION,
                    reason=f"{decision} by {name}",
                )
            )  # fmt: skip
        store.append(conversation.pk, appended)
        for action in chosen:
            audit_record(
                actor=by, kind=f"action.{decision}", team=conversation.team_id,
                target=str(conversation.pk),
                data={"tool": action.tool, "risk": action.risk, "rules": action.risk_rules,
                      **({"reason": reason} if reason else {})},
            )  # fmt: skip
    return len(chosen)


def action_approve(*, conversation_id, action_id: str, by) -> None:
    _decide(conversation_id, [action_id], decision=Decision.APPROVED, by=by, reason="")


def action_reject(*, conversation_id, action_id: str, by, reason: str = "") -> None:
    _decide(
        conversation_id,
        [action_id],
        decision=Decision.REJECTED,
        by=by,
        reason=reason.strip()[:2000],
    )


def actions_approve_all(*, conversation_id, by) -> int:
    return _decide(conversation_id, None, decision=Decision.APPROVED, by=by, reason="")


def conversations_waiting(user, team_id: int | None = None) -> QuerySet[Conversation]:
    """Conversations waiting for a decision that the user can see."""
    return (
        conversations_visible_to(user, team_id)
        .filter(status=Status.WAITING_FOR_CONFIRMATION)
        .order_by("-updated_at")
    )
