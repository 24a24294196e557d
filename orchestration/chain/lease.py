"""The run's lease: which slice may run, and who runs it.

The conversation row names the one slice id allowed to run next (`run_slice`); a slice claims
the run with a compare-and-set that also takes the lease (`lease_token`, `lease_expires_at`).
Duplicate deliveries find a different slice id and return at once. Releasing drops the lease
and, while the run goes on, records the next slice in the same transaction: enqueued after
commit, or handed back to the task to run itself (it keeps its place; see runner.run_slice).
Every recorded slice carries a due time; the sweeper re-sends one nobody claimed by then.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from conversations.events import Status
from conversations.models import Conversation
from teams.policies import policy_for_team

from .admission import QUEUE_RETRY_SECONDS, admitted_runs, lock_team, note_queued
from .dispatch import schedule_next, send_slice, slice_due_at


def lease_ttl() -> timedelta:
    return timedelta(seconds=settings.CANVAS_LEASE_SECONDS)


@dataclass(frozen=True, slots=True)
class Claim:
    """What a slice found when it tried to claim its run: exactly one of three answers."""

    token: str | None = None
    """Claimed: the lease token this slice runs under."""
    retry_after: float | None = None
    """Not yet: seconds to wait before trying this slice again."""

    @property
    def claimed(self) -> bool:
        return self.token is not None


NOTHING_TO_DO = Claim()


def lease_claim(conversation_id: str, slice_id: str) -> Claim:
    """Claim the run for this slice.

    Claimed (a token) when this slice may run; `retry_after` seconds when this slice is
    current but another runner still holds a live lease (a redelivery racing its original),
    or when the team is at its limit of concurrent runs (the run is queued, with one notice in
    its log); NOTHING_TO_DO when the slice is stale, the conversation is not running, or it is
    pinned to another host (the slice is forwarded to that host's queue).
    """
    row = (
        Conversation.objects.filter(pk=conversation_id)
        .values(
            "run_slice", "status", "lease_token", "lease_expires_at", "worker_host", "team_id",
            "run_steps", "agent",
        )
        .first()
    )  # fmt: skip
    if row is None or row["run_slice"] != slice_id or row["status"] != Status.RUNNING:
        return NOTHING_TO_DO
    here = settings.CANVAS_WORKER_HOST
    if settings.CANVAS_PIN_TO_HOST and row["worker_host"] and row["worker_host"] != here:
        send_slice(conversation_id, slice_id, worker_host=row["worker_host"], agent=row["agent"])
        return NOTHING_TO_DO
    if row["run_steps"] > 0:  # this run already holds a place: a hand-over reads no policy
        return _claim(conversation_id, slice_id, row)
    limit = policy_for_team(row["team_id"]).max_concurrent_runs
    if limit is None:
        return _claim(conversation_id, slice_id, row)
    with transaction.atomic():
        team_name = lock_team(row["team_id"])
        if admitted_runs(row["team_id"], excluding=conversation_id) >= limit:
            note_queued(conversation_id, team_name, limit)
            # The task retries later: not lost, so the sweeper must not send a copy meanwhile.
            Conversation.objects.filter(pk=conversation_id, run_slice=slice_id).update(
                run_slice_due_at=slice_due_at(QUEUE_RETRY_SECONDS)
            )
            return Claim(retry_after=QUEUE_RETRY_SECONDS)
        return _claim(conversation_id, slice_id, row)


def _claim(conversation_id: str, slice_id: str, row: dict) -> Claim:
    now = timezone.now()
    here = settings.CANVAS_WORKER_HOST
    token = uuid.uuid4().hex
    claimed = (
        Conversation.objects.filter(pk=conversation_id, run_slice=slice_id, status=Status.RUNNING)
        .filter(Q(lease_token__isnull=True) | Q(lease_expires_at__lt=now))
        .update(
            lease_token=token,
            lease_expires_at=now + lease_ttl(),
            worker_host=row["worker_host"] or (here if settings.CANVAS_PIN_TO_HOST else ""),
        )
    )
    if claimed:
        return Claim(token=token)
    if row["lease_expires_at"] is not None and row["lease_expires_at"] >= now:
        return Claim(retry_after=max(0.5, (row["lease_expires_at"] - now).total_seconds() + 0.1))
    return NOTHING_TO_DO


def release(conversation_id: str, token: str, *, keep: bool = False) -> str | None:
    """Drop the lease; if the run goes on, record the next slice atomically and enqueue it
    after commit, or with `keep` return its id for the caller to claim and run at once.
    Returns None when the run stopped, the lease was lost, or the slice was enqueued."""
    with transaction.atomic():
        row = (
            Conversation.objects.select_for_update()
            .filter(pk=conversation_id, lease_token=token)
            .only("id", "status", "run_slice", "worker_host", "agent")
            .first()
        )
        if row is None:
            return None
        kept = None
        if row.status == Status.RUNNING:
            slice_id = schedule_next(row, send=not keep, save=False)  # lease_drop saves
            kept = slice_id if keep else None
        else:
            row.run_slice = None
            row.run_slice_due_at = None
        lease_drop(row)
    return kept


def lease_drop(row: Conversation) -> None:
    """Clear the row's lease and save it with the slice fields the caller set. Call while
    holding the row lock."""
    row.lease_token = None
    row.lease_expires_at = None
    row.save(
        update_fields=["run_slice", "run_slice_due_at", "lease_token", "lease_expires_at",
                       "updated_at"]
    )  # fmt: skip
