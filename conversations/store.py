"""The one door into the event log.

`append` is the only code that writes `ConversationEvent` rows. It allocates gap-free seqs under
the conversation's row lock, redacts the team's secret values out of the events (redaction.py),
mirrors what the log implies onto the row (status, stats, last_seq) in the same transaction, and
publishes to websockets only after commit, the stored (redacted) records.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils.timezone import now

from . import broadcast, redaction
from .events import (
    SCHEMA_VERSION,
    ActionEvent,
    AgentMessageEvent,
    AnyEvent,
    BaseEvent,
    RunStartedEvent,
    StatusChangeEvent,
    event_from_payload,
    event_to_payload,
)
from .models import Conversation, ConversationEvent


class StaleLeaseError(RuntimeError):
    """The caller's run lease is gone: another runner owns the conversation now."""


@dataclass(frozen=True, slots=True)
class StoredEvent:
    seq: int
    created_at: datetime
    event: AnyEvent

    def as_record(self) -> dict[str, Any]:
        """The API's shape: the event's fields plus its seq."""
        return {"seq": self.seq, **event_to_payload(self.event)}


def _is_llm_step(event: BaseEvent) -> bool:
    return isinstance(event, AgentMessageEvent) or (
        isinstance(event, ActionEvent) and event.batch_index == 0
    )


def append(
    conversation_id: uuid.UUID | str,
    events: Sequence[BaseEvent],
    *,
    lease_token: str | None = None,
) -> list[StoredEvent]:
    """Append `events` atomically and return them with their seqs.

    With `lease_token`, append only while that run lease is still held (StaleLeaseError
    otherwise), so a runner that lost its lease can never write behind the new one's back.

    Safe under concurrent appenders: seqs are allocated while holding the conversation's row
    lock, and the (conversation, seq) unique constraint backs that up. Joins an outer
    transaction when there is one, so callers can make other row changes atomic with it.
    """
    if not events:
        return []
    with transaction.atomic():
        # The team's secrets_version rides along on the locking read (the team row itself is
        # not locked), so a secret committed before this append is always redacted.
        conversation = (
            Conversation.objects.select_for_update(of=("self",))
            .select_related("team")
            .only("id", "last_seq", "status", "lease_token", "team", "team__secrets_version")
            .get(pk=conversation_id)
        )
        if lease_token is not None and conversation.lease_token != lease_token:
            raise StaleLeaseError(f"run lease on {conversation.pk} is no longer held")
        redactor = redaction.redactor_for_team(
            conversation.team_id, conversation.team.secrets_version
        )
        if redactor is not None:
            events = redactor.redact_events(events)
        first = conversation.last_seq + 1
        rows = [
            ConversationEvent(
                conversation_id=conversation.pk,
                seq=first + offset,
                type=event.type,  # type: ignore[attr-defined]
                schema_version=SCHEMA_VERSION,
                payload=event_to_payload(event),
            )
            for offset, event in enumerate(events)
        ]
        ConversationEvent.objects.bulk_create(rows)

        updates: dict[str, Any] = {"last_seq": first + len(events) - 1, "updated_at": now()}
        status = conversation.status
        tokens_in = tokens_out = steps = 0
        cost = Decimal(0)
        run_started = False
        for event in events:
            if isinstance(event, StatusChangeEvent):
                status = event.status.value
            elif isinstance(event, RunStartedEvent):
                run_started = True
            usage = getattr(event, "usage", None)
            if usage is not None:
                tokens_in += usage.prompt_tokens
                tokens_out += usage.completion_tokens
                cost += Decimal(str(usage.cost_usd))
            if _is_llm_step(event):
                steps += 1
        if status != conversation.status:
            updates["status"] = status
        if tokens_in or tokens_out or cost:
            updates["tokens_in"] = F("tokens_in") + tokens_in
            updates["tokens_out"] = F("tokens_out") + tokens_out
            updates["cost_usd"] = F("cost_usd") + cost
        if steps:
            updates["steps"] = F("steps") + steps
        if run_started:
            updates["run_steps"] = steps
        elif steps:
            updates["run_steps"] = F("run_steps") + steps
        Conversation.objects.filter(pk=conversation.pk).update(**updates)

        stored = [
            StoredEvent(seq=row.seq, created_at=row.created_at, event=event)
            for row, event in zip(rows, events, strict=True)
        ]
        records = [s.as_record() for s in stored]
        transaction.on_commit(
            lambda: broadcast.publish_events(conversation.pk, records, status=status)
        )
    return stored


def _to_stored(rows: Iterable[ConversationEvent]) -> list[StoredEvent]:
    return [
        StoredEvent(
            seq=row.seq, created_at=row.created_at, event=event_from_payload(row.type, row.payload)
        )
        for row in rows
    ]


def load(
    conversation_id: uuid.UUID | str, *, after_seq: int = 0, limit: int | None = None
) -> list[StoredEvent]:
    """Events with seq > after_seq in seq order, at most `limit` of them."""
    rows = ConversationEvent.objects.filter(
        conversation_id=conversation_id, seq__gt=after_seq
    ).order_by("seq")
    if limit is not None:
        rows = rows[:limit]
    return _to_stored(rows)


async def aload(
    conversation_id: uuid.UUID | str, *, after_seq: int = 0, limit: int | None = None
) -> list[StoredEvent]:
    rows = ConversationEvent.objects.filter(
        conversation_id=conversation_id, seq__gt=after_seq
    ).order_by("seq")
    if limit is not None:
        rows = rows[:limit]
    return _to_stored([row async for row in rows])
