"""The approval inbox: held actions and the decisions on them (interrupting a run is run
control: orchestration.run_control).

A held action waits with the conversation in WAITING_FOR_CONFIRMATION. Each decision is an
event naming who decided; a rejection also gives the action its observation, carrying the
reason for the model to read. When the last held action of the batch is decided, the run goes
on: its next slice executes the approved actions before the model is asked anything new.
Decisions take the conversation's row lock, so of two people deciding at once exactly one
wins and the other is told it was already decided.

An external agent's permission request (acp_bridge) is a held action carrying the agent's own
options: a decision names one by id (or, without one, the first of the kind asked for:
allow_once before allow_always to approve, reject_once before reject_always to reject; never
by position), and the option's kind says whether it approves. The agent's turn is still going
on its worker, waiting for the answer, so a decision sends no slice while that turn's lease
lives; one whose worker died gets a slice, which ends the lost turn saying so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from common.errors import Conflict, InvalidInput, NotFound
from conversations import store
from conversations.events import (
    ActionDecisionEvent,
    ActionEvent,
    AnyEvent,
    Decision,
    ObservationEvent,
    PermissionChoice,
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

from ..chain.dispatch import schedule_next
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
    title: str = ""
    kind: str | None = None
    """An external agent's tool kind (read, edit, execute, ...)."""
    locations: tuple[str, ...] = ()
    options: tuple[PermissionChoice, ...] = ()
    """An external agent's own options, answered by id; empty for our own tools."""


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
            # {} is an object too (Gemini asks with no arguments): only non-objects as text.
            arguments=_object_or_text(action),
            risk=action.risk or "MEDIUM",
            rules=[(rule, rule_explanation(rule)) for rule in action.risk_rules],
            thought=action.thought,
            title=action.title,
            kind=action.kind,
            locations=tuple(action.locations),
            options=tuple(action.options),
        )
        for seq, action in pending_in(events)
    ]


def _object_or_text(action: ActionEvent) -> dict[str, Any] | str:
    parsed = action.parsed_arguments.as_object
    return parsed if parsed is not None else action.arguments


def _name(by) -> str:
    return by.get_username() if getattr(by, "is_authenticated", False) else "api"


PREFERRED_KINDS = {
    Decision.APPROVED: ("allow_once", "allow_always"),
    Decision.REJECTED: ("reject_once", "reject_always"),
}


def option_for(
    action: ActionEvent, decision: Decision, option_id: str | None
) -> PermissionChoice | None:
    """The agent's option a decision picks: the one named, or the first of the preferred kind
    (None: the agent offered no such option, and is answered `cancelled`). InvalidInput for an
    id the agent did not offer, or one whose kind contradicts the decision asked for."""
    if option_id is not None:
        chosen = next((o for o in action.options if o.option_id == option_id), None)
        if chosen is None:
            offered = ", ".join(f"{o.option_id} ({o.kind})" for o in action.options) or "none"
            raise InvalidInput(f"the agent offered no option {option_id!r} (offered: {offered}).")
        if decision == Decision.REJECTED and chosen.allows:
            raise InvalidInput(f"option {option_id!r} allows the action; approve with it instead.")
        return chosen
    for kind in PREFERRED_KINDS[decision]:
        for option in action.options:
            if option.kind == kind:
                return option
    return None


def _lease_live(conversation: Conversation) -> bool:
    expires = conversation.lease_expires_at
    return (
        conversation.lease_token is not None and expires is not None and (expires > timezone.now())
    )


def _decide(
    conversation_id, action_ids: list[str] | None, *, decision: Decision, by, reason: str,
    option_id: str | None = None,
) -> list[Decision]:  # fmt: skip
    """Record decisions; `None` means every pending action. Returns what was decided for
    each (an external agent's option may turn an approval into a rejection)."""
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
            raise Conflict(_decided_already(events, action_ids))
        from orchestration.external.permissions import orphaned_request_refusal

        if refusal := orphaned_request_refusal(conversation):
            raise Conflict(refusal)
        chosen = [pending[i] for i in (action_ids or list(pending)) if i in pending]
        appended: list = []
        decided: list[tuple[ActionEvent, ActionDecisionEvent]] = []
        for action in chosen:
            option = option_for(action, decision, option_id) if action.options else None
            effective = decision
            if option is not None:
                effective = Decision.APPROVED if option.allows else Decision.REJECTED
            event = ActionDecisionEvent(
                action_id=action.id, tool_call_id=action.tool_call_id,
                decision=effective, by=name, reason=reason,
                option_id=option.option_id if option is not None else None,
            )  # fmt: skip
            decided.append((action, event))
            appended.append(event)
            if effective == Decision.REJECTED:
                appended.append(rejected_observation(action, source="user", by=name, reason=reason))
        if len(chosen) == len(pending):  # the batch is decided: the run goes on
            if not (conversation.agent and _lease_live(conversation)):
                schedule_next(conversation)
            # What was decided, which an agent's option may have turned around.
            effective_all = {event.decision for _, event in decided}
            said = effective_all.pop() if len(effective_all) == 1 else decision
            appended.append(
                StatusChangeEvent(
                    status=Status.RUNNING, previous=Status.WAITING_FOR_CONFIRMATION,
                    reason=f"{said} by {name}",
                )
            )  # fmt: skip
        store.append(conversation.pk, appended)
        for action, event in decided:
            audit_record(
                actor=by, kind=f"action.{event.decision}", team=conversation.team_id,
                target=str(conversation.pk),
                data={"tool": action.tool, "risk": action.risk, "rules": action.risk_rules,
                      **({"reason": reason} if reason else {}),
                      **({"option": event.option_id} if event.option_id else {})},
            )  # fmt: skip
    return [event.decision for _, event in decided]


def _decided_already(events: list[tuple[int, AnyEvent]], action_ids: list[str] | None) -> str:
    """The Conflict's words: how the action was decided (an expired request says so)."""
    wanted = set(action_ids or ())
    for _, event in reversed(events):
        if isinstance(event, ActionDecisionEvent) and event.action_id in wanted:
            why = f" ({event.reason})" if event.reason else ""
            return f"this action was already decided: {event.decision} by {event.by}{why}."
    return "this action was already decided, or nothing is waiting."


def action_approve(
    *, conversation_id, action_id: str, by, option_id: str | None = None
) -> Decision:
    """Approve a held action (for an external agent: with its option `option_id`, which may
    be a reject option); returns the decision recorded."""
    return _decide(
        conversation_id, [action_id], decision=Decision.APPROVED, by=by, reason="",
        option_id=option_id,
    )[0]  # fmt: skip


def action_reject(
    *, conversation_id, action_id: str, by, reason: str = "", option_id: str | None = None
) -> None:
    _decide(
        conversation_id,
        [action_id],
        decision=Decision.REJECTED,
        by=by,
        reason=reason.strip()[:2000],
        option_id=option_id,
    )


def actions_approve_all(*, conversation_id, by) -> int:
    return len(_decide(conversation_id, None, decision=Decision.APPROVED, by=by, reason=""))


def conversations_waiting(user, team_id: int | None = None) -> QuerySet[Conversation]:
    """Conversations waiting for a decision that the user can see."""
    return (
        conversations_visible_to(user, team_id)
        .filter(status=Status.WAITING_FOR_CONFIRMATION)
        .order_by("-updated_at")
    )
