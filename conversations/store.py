"""The one door into the event log.

`append` is the only code that writes `ConversationEvent` rows. It allocates gap-free seqs under
the conversation's row lock, redacts the team's secret values out of the events (redaction.py),
mirrors what the log implies onto the row (status, stats, last_seq) in the same transaction, and
publishes to websockets only after commit, the stored (redacted) records.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q, Subquery
from django.utils.timezone import now

from . import broadcast
from .events import SCHEMA_VERSION, AnyEvent, BaseEvent, event_from_payload, event_to_payload
from .models import Conversation, ConversationEvent
from .projections import RunCounts
from .store_base import AppendedRows, StaleLeaseError, redact, row_delta
from .window import KEPT_MARKS, Window

__all__ = [
    "StaleLeaseError", "StoredEvent", "WindowRead", "aload", "append", "load", "load_many",
    "load_window",
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class StoredEvent:
    seq: int
    created_at: datetime
    event: AnyEvent

    def as_record(self) -> dict[str, Any]:
        """The API's shape: the event's fields plus its seq."""
        return {"seq": self.seq, **event_to_payload(self.event)}


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
    pk = uuid.UUID(str(conversation_id))
    if connection.vendor == "postgresql" and settings.CANVAS_STORE_FAST_PATH:
        from .store_postgres import append_rows  # psycopg: not for the embedded SQLite

        # The Postgres append is one statement, and one statement in autocommit is a
        # transaction of its own: BEGIN and COMMIT would be two more round trips. Inside an
        # outer transaction it still takes a savepoint, so a failure leaves the caller's
        # transaction usable, as the portable path does.
        savepoint = transaction.atomic() if connection.in_atomic_block else nullcontext()
        with savepoint:
            written = append_rows(pk, events, lease_token=lease_token, delta=row_delta(events))
    else:
        with transaction.atomic():
            written = _append_rows_orm(pk, events, lease_token=lease_token)
    stored = [
        StoredEvent(seq=seq, created_at=written.created_at, event=event)
        for seq, event in zip(written.seqs, written.events, strict=True)
    ]
    records = [
        {"seq": seq, **payload} for seq, payload in zip(written.seqs, written.payloads, strict=True)
    ]
    status = written.status
    # Runs at once when the append committed on its own, else after the outer commit.
    transaction.on_commit(lambda: broadcast.publish_events(pk, records, status=status))
    return stored


def _append_rows_orm(
    pk: uuid.UUID, events: Sequence[BaseEvent], *, lease_token: str | None
) -> AppendedRows:
    """The portable path: lock the row, insert, update. Call inside a transaction."""
    # The team's secrets_version rides along on the locking read (the team row itself is
    # not locked), so a secret committed before this append is always redacted.
    conversation = (
        Conversation.objects.select_for_update(of=("self",))
        .select_related("team")
        .only("id", "last_seq", "status", "lease_token", "team", "team__secrets_version")
        .get(pk=pk)
    )
    if lease_token is not None and conversation.lease_token != lease_token:
        raise StaleLeaseError(f"run lease on {pk} is no longer held")
    events = redact(conversation.team_id, conversation.team.secrets_version, events)
    payloads = [event_to_payload(event) for event in events]
    first = conversation.last_seq + 1
    rows = ConversationEvent.objects.bulk_create(
        ConversationEvent(
            conversation_id=pk,
            seq=first + offset,
            type=payload["type"],
            schema_version=SCHEMA_VERSION,
            payload=payload,
        )
        for offset, payload in enumerate(payloads)
    )
    created_at = rows[0].created_at
    delta = row_delta(events)
    updates: dict[str, Any] = {"last_seq": first + len(events) - 1, "updated_at": now()}
    status = delta.status or conversation.status
    if status != conversation.status:
        updates["status"] = status
    if delta.tokens_in or delta.tokens_out or delta.cost_usd:
        updates["tokens_in"] = F("tokens_in") + delta.tokens_in
        updates["tokens_out"] = F("tokens_out") + delta.tokens_out
        updates["cost_usd"] = F("cost_usd") + delta.cost_usd
    if delta.steps:
        updates["steps"] = F("steps") + delta.steps
    if delta.run_started:
        updates["run_steps"] = delta.run_steps
        updates["run_cost"] = delta.run_cost
        updates["run_children"] = delta.run_children
    else:
        if delta.run_steps:
            updates["run_steps"] = F("run_steps") + delta.run_steps
        if delta.run_cost:
            updates["run_cost"] = F("run_cost") + delta.run_cost
        if delta.run_children:
            updates["run_children"] = F("run_children") + delta.run_children
    Conversation.objects.filter(pk=pk).update(**updates)
    seqs = list(range(first, first + len(events)))
    return AppendedRows(events, payloads, seqs, created_at, status)


_COLUMNS = ("seq", "created_at", "type", "payload")
"""What a read takes of each row: tuples, not model instances (half the time of a long read)."""


def _to_stored(rows: Iterable[tuple]) -> list[StoredEvent]:
    return [
        StoredEvent(seq=seq, created_at=created_at, event=event_from_payload(type_, payload))
        for seq, created_at, type_, payload in rows
    ]


def _rows(conversation_id: uuid.UUID | str, after_seq: int, limit: int | None):
    rows = (
        ConversationEvent.objects.filter(conversation_id=conversation_id, seq__gt=after_seq)
        .order_by("seq")
        .values_list(*_COLUMNS)
    )
    return rows if limit is None else rows[:limit]


def load(
    conversation_id: uuid.UUID | str, *, after_seq: int = 0, limit: int | None = None
) -> list[StoredEvent]:
    """Events with seq > after_seq in seq order, at most `limit` of them."""
    return _to_stored(_rows(conversation_id, after_seq, limit))


@dataclass(frozen=True, slots=True)
class WindowRead:
    events: list[StoredEvent]
    """The whole log, or its window (conversations.window) when it has been condensed."""
    counts: RunCounts | None
    """The row's counts at the last event read, with a window (None with the whole log)."""


def load_window(conversation_id: uuid.UUID | str) -> WindowRead:
    """What a reader that has seen nothing of the conversation needs of its log: after a
    condensation, only its window, whatever the log's length (three indexed queries)."""
    row = (
        Conversation.objects.filter(pk=conversation_id)
        .values_list("last_seq", "status", "run_steps", "run_cost", "run_children")
        .first()
    )
    if row is None:
        return WindowRead([], None)
    counts = RunCounts(*row)
    events = ConversationEvent.objects.filter(
        conversation_id=conversation_id, seq__lte=counts.last_seq
    )
    latest = events.filter(type="condensation").order_by("-seq").values_list(*_COLUMNS)[:1]
    window = next((Window.of(s.event) for s in _to_stored(latest)), None)
    if window is None:
        return WindowRead(_to_stored(events.order_by("seq").values_list(*_COLUMNS)), None)
    kept = Q(seq__gte=window.from_seq) | Q(seq__in=window.head_seqs)
    for type_ in KEPT_MARKS:
        mark = events.filter(type=type_, seq__lt=window.from_seq).order_by("-seq")
        kept |= Q(seq__in=Subquery(mark.values("seq")[:1]))
    rows = events.filter(kept).order_by("seq").values_list(*_COLUMNS)
    return WindowRead(_to_stored(rows), counts)


def load_many(after_seqs: Mapping[uuid.UUID, int]) -> dict[uuid.UUID, list[StoredEvent]]:
    """`load` of several conversations in one query: conversation id -> its events with
    seq > its after_seq, in seq order (an empty list where there are none)."""
    if not after_seqs:
        return {}
    match = Q()
    for conversation_id, after_seq in after_seqs.items():
        match |= Q(conversation_id=conversation_id, seq__gt=after_seq)
    grouped: dict[uuid.UUID, list[tuple]] = {pk: [] for pk in after_seqs}
    rows = ConversationEvent.objects.filter(match).order_by("conversation_id", "seq")
    for conversation_id, *row in rows.values_list("conversation_id", *_COLUMNS):
        grouped[conversation_id].append(tuple(row))
    return {pk: _to_stored(rows) for pk, rows in grouped.items()}


async def aload(
    conversation_id: uuid.UUID | str, *, after_seq: int = 0, limit: int | None = None
) -> list[StoredEvent]:
    """`load` for async callers: the same query, iterated without blocking the event loop."""
    return _to_stored([row async for row in _rows(conversation_id, after_seq, limit)])
