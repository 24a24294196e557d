"""Read queries over conversations and their logs."""

from __future__ import annotations

from django.db.models import F, IntegerField, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce

from .events import (
    ActionEvent,
    AgentErrorEvent,
    AgentMessageEvent,
    AnyEvent,
    ObservationEvent,
    RunFinishedEvent,
    RunStartedEvent,
    SubagentsSettledEvent,
    SubagentsSpawnedEvent,
    event_from_payload,
    event_tag,
)
from .models import Conversation, ConversationEvent

RUN_STARTED = event_tag(RunStartedEvent)
TOOL_CALL = event_tag(ActionEvent)


def conversations_visible_to(user, team_id: int | None = None) -> QuerySet[Conversation]:
    """Conversations of the teams the user belongs to (all of them for site admins)."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return Conversation.objects.none()
    rows = Conversation.objects.all()
    if not user.is_superuser:
        rows = rows.filter(team__memberships__user=user)
    if team_id is not None:
        rows = rows.filter(team_id=team_id)
    return rows


def latest_run_id(conversation_id) -> str | None:
    row = (
        ConversationEvent.objects.filter(conversation_id=conversation_id, type=RUN_STARTED)
        .order_by("-seq")
        .values_list("payload", flat=True)
        .first()
    )
    return row.get("run_id") if row else None


def held_batch_start(conversation_id) -> int | None:
    """Seq of the first action of the latest batch that held an action for approval, or None.

    A batch's actions are appended together, in order, so everything about the approval in
    progress (the held actions, their decisions and results) lies at or after this seq. Walks
    the (conversation, seq) index backwards and stops at the first match: cheap however long
    the log is.
    """
    row = (
        ConversationEvent.objects.filter(
            conversation_id=conversation_id, type=TOOL_CALL, payload__requires_confirmation=True
        )
        .order_by("-seq")
        .values_list("seq", "payload__batch_index")
        .first()
    )
    return None if row is None else row[0] - int(row[1] or 0)


def held_batch_starts(conversation_ids) -> dict:
    """`held_batch_start` of many conversations in one query, whatever their number:
    conversation id -> seq, leaving out those that never held an action.

    One correlated subquery per conversation walks its (conversation, seq) index backwards, as
    `held_batch_start` does; plain SQL, so it runs on SQLite (the embedded mode) as well as on
    Postgres, which DISTINCT ON would not.
    """
    index = Coalesce(Cast(KeyTextTransform("batch_index", "payload"), IntegerField()), Value(0))
    latest = (
        ConversationEvent.objects.filter(
            conversation_id=OuterRef("pk"), type=TOOL_CALL, payload__requires_confirmation=True
        )
        .order_by("-seq")
        .annotate(start=F("seq") - index)
        .values("start")[:1]
    )
    rows = (
        Conversation.objects.filter(pk__in=list(conversation_ids))
        .annotate(start=Subquery(latest, output_field=IntegerField()))
        .filter(start__isnull=False)
        .values_list("pk", "start")
    )
    return dict(rows)


def action_exists(conversation_id, action_id: str) -> bool:
    return ConversationEvent.objects.filter(
        conversation_id=conversation_id, type=TOOL_CALL, payload__id=action_id
    ).exists()


def run_start_seq(conversation_id, *, before_seq: int) -> int:
    """Seq of the latest run.started before `before_seq` (0 when there is none): where the run
    that an event at `before_seq` belongs to began."""
    seq = (
        ConversationEvent.objects.filter(
            conversation_id=conversation_id, type=RUN_STARTED, seq__lt=before_seq
        )
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
    )
    return seq or 0


def events_where(conversation_id, match: Q) -> list[AnyEvent]:
    """The events of a conversation that `match` selects (on `type` and `payload`), in log
    order, without loading the rest of its log."""
    rows = (
        ConversationEvent.objects.filter(match, conversation_id=conversation_id)
        .order_by("seq")
        .values_list("type", "payload")
    )
    return [event_from_payload(type_, payload) for type_, payload in rows]


SUBAGENT_TYPES = (event_tag(SubagentsSpawnedEvent), event_tag(SubagentsSettledEvent))


def subagent_events(conversation_id) -> list[AnyEvent]:
    """A parent's spawn and settle events: all that settling its children reads."""
    return events_where(conversation_id, Q(type__in=SUBAGENT_TYPES))


ANSWER_MATCH = Q(
    type__in=(event_tag(AgentMessageEvent), event_tag(AgentErrorEvent),
              event_tag(RunFinishedEvent))
) | Q(type=event_tag(ObservationEvent), payload__tool="finish")  # fmt: skip
"""What a child's answer is read from: its messages, finish results, errors and run ends."""


def answer_events(conversation_ids) -> dict[str, list[AnyEvent]]:
    """ANSWER_MATCH's events of several conversations in one query: id -> events in log
    order (an empty list for one that has none)."""
    ids = [str(pk) for pk in conversation_ids]
    found: dict[str, list[AnyEvent]] = {pk: [] for pk in ids}
    rows = (
        ConversationEvent.objects.filter(ANSWER_MATCH, conversation_id__in=ids)
        .order_by("conversation_id", "seq")
        .values_list("conversation_id", "type", "payload")
    )
    for conversation_id, type_, payload in rows:
        found[str(conversation_id)].append(event_from_payload(type_, payload))
    return found
