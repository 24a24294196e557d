"""Appends under a held lease that survive one dropped database connection.

A command that ran for minutes must not lose its result because Postgres dropped the worker's
connection meanwhile (a terminated backend, a PgBouncer restart, a failover): the runner's next
write would fail, the slice would hand over, and the next runner would record the command as
interrupted, inviting the model to run it again. So a write under the lease is retried on a
fresh connection, for at most half the lease (`retry_budget`); beyond that, or when the lease is
gone (StaleLeaseError, never retried), the run is given away as before.

Retrying is safe because of two things:
- the lease fences every attempt: store.append refuses a token the row no longer holds, so a
  runner that lost its run writes nothing, however often it tries;
- an attempt may have committed with only its answer lost. Each retry therefore runs in a
  transaction that first locks the conversation row (waiting out an old backend still holding
  it) and looks for the batch's first event id in the log: found, it returns what was stored
  instead of appending it again.
The first attempt is store.append's single statement as before; only retries pay for the lock
and the look-up.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from conversations import broadcast, store
from conversations.events import BaseEvent
from conversations.models import Conversation, ConversationEvent

from .transient import DATABASE_FAULTS, close_broken

logger = logging.getLogger(__name__)

FIRST_PAUSE = 0.05
LONGEST_PAUSE = 1.0
CLOCK_SLACK = timedelta(seconds=5)
"""How far before the first attempt a retry looks for its batch: created_at is this process's
clock, so only a clock step could put it earlier."""


def retry_budget() -> float:
    """Seconds a held write keeps retrying: half the lease, so a runner whose database stays
    away gives the run up while most of its lease is still its own."""
    return settings.CANVAS_LEASE_SECONDS / 2


def lease_append(
    conversation_id: str,
    events: Sequence[BaseEvent],
    *,
    token: str,
    also: Callable[[], None] | None = None,
) -> list[store.StoredEvent]:
    """store.append under `token`, with `also` (another write, e.g. the bill) in the same
    transaction; a dropped connection is retried on a fresh one within `retry_budget`, and a
    batch that turns out to have committed is returned as stored, never appended twice.

    Raises StaleLeaseError at once when the lease is lost, the last database fault when the
    budget is spent (the budget bounds the waiting; each attempt is bounded by the driver's
    connect timeout, or the pool's wait for a connection). Inside a caller's transaction there is one attempt only: a fault aborts
    the whole transaction, which only the caller can redo.
    """
    if not events:
        return []
    if connection.in_atomic_block:
        return _write(conversation_id, events, token, also)
    since = timezone.now() - CLOCK_SLACK
    deadline = time.monotonic() + retry_budget()
    pause = FIRST_PAUSE
    try:
        return _write(conversation_id, events, token, also)
    except DATABASE_FAULTS as exc:
        fault = exc
    while True:
        close_broken()
        left = deadline - time.monotonic()
        if left <= 0:
            raise fault
        logger.warning("appending to %s: %s; retrying on a fresh connection in %.2f s",
                       conversation_id, fault, min(pause, left))  # fmt: skip
        time.sleep(min(pause, left))
        pause = min(pause * 2, LONGEST_PAUSE)
        try:
            return _write_once(conversation_id, events, token, also, since=since)
        except DATABASE_FAULTS as exc:
            fault = exc


def _write(
    conversation_id: str,
    events: Sequence[BaseEvent],
    token: str,
    also: Callable[[], None] | None,
) -> list[store.StoredEvent]:
    if also is None:  # one statement on Postgres, a transaction of its own
        return store.append(conversation_id, events, lease_token=token)
    with transaction.atomic():
        stored = store.append(conversation_id, events, lease_token=token)
        also()
    return stored


def _write_once(
    conversation_id: str,
    events: Sequence[BaseEvent],
    token: str,
    also: Callable[[], None] | None,
    *,
    since: datetime,
) -> list[store.StoredEvent]:
    """A retry: under the row lock, the batch as stored if an earlier attempt committed it,
    else appended now (with `also`) in the same transaction."""
    pk = uuid.UUID(str(conversation_id))
    with transaction.atomic():
        held = (
            Conversation.objects.select_for_update()
            .filter(pk=pk)
            .values_list("lease_token", "status")
            .first()
        )
        if held is None:
            raise Conversation.DoesNotExist(f"conversation {pk} does not exist")
        landed = _landed(pk, events, since)
        if landed:
            records = [s.as_record() for s in landed]
            status = held[1]
            transaction.on_commit(lambda: broadcast.publish_events(pk, records, status=status))
            logger.warning("appending to %s: the lost attempt had committed", pk)
            return landed
        if held[0] != token:
            raise store.StaleLeaseError(f"run lease on {pk} is no longer held")
        stored = store.append(pk, events, lease_token=token)
        if also is not None:
            also()
    return stored


def _landed(pk: uuid.UUID, events: Sequence[BaseEvent], since: datetime) -> list[store.StoredEvent]:
    """The batch as stored, if its first event is in the log (a batch commits whole)."""
    first = (
        ConversationEvent.objects.filter(
            conversation_id=pk, created_at__gte=since, payload__id=events[0].id
        )
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
    )
    if first is None:
        return []
    return store.load(pk, after_seq=first - 1, limit=len(events))
