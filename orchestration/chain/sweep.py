"""The sweeper: revives running conversations whose runner died or whose next slice was lost.

Two faults, one indexed query every `CANVAS_SWEEP_SECONDS`:
- the runner died: its lease expired (`lease_expires_at`, renewed while it works; also while
  an external agent's turn waits for a person's answer). The run gets a new slice id, which
  voids the dead runner's.
- the slice's message was lost (a broker restart or FLUSHALL, a send that failed, a task
  dropped past its retries): nobody claimed the slice by `run_slice_due_at`, which is set one
  sweep period after every send (`dispatch.schedule_next`). The same slice id is sent again,
  so if the first message turns up after all, the two copies still run it once.
A slice is noticed within two sweep periods of being lost.

A run whose runner died gets a marker event in its log (an AgentErrorEvent coded REVIVED), so
whoever reads the conversation sees that it was revived, and where; what the dead runner was
running is then marked interrupted by the new runner's recovery (orchestration.step.runner).
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from conversations import store
from conversations.events import AgentErrorEvent, BaseEvent, Status, StatusChangeEvent
from conversations.models import Conversation

from ..external import permissions
from .dispatch import schedule_next
from .lease import lease_drop

BATCH = 500
REVIVED = "run_revived"
REVIVED_MESSAGE = (
    "The worker running this conversation stopped answering; another worker goes on with the "
    "run. Anything the stopped worker was running is marked interrupted."
)


def _stalled(now) -> Q:
    """Each arm matches one index, so Postgres ORs two small index scans (see models.py)."""
    running = {"status": Status.RUNNING}
    unclaimed = {**running, "lease_token__isnull": True}
    # Only an external agent's turn holds its lease while it waits for a person (our own runs
    # release theirs and wait in no task), so a waiting row with an expired lease lost its turn.
    waiting = {"status": Status.WAITING_FOR_CONFIRMATION}
    return (
        Q(**running, lease_expires_at__lt=now)
        | Q(**waiting, lease_expires_at__lt=now)
        | Q(**unclaimed, run_slice_due_at__lt=now)
        | Q(**unclaimed, run_slice_due_at__isnull=True)  # rows from before due times
    )


def sweep_runs() -> int:
    """Re-send the slices of running conversations whose runner died or whose slice was
    never claimed. Returns how many were re-sent."""
    now = timezone.now()
    candidates = Conversation.objects.filter(_stalled(now)).order_by()
    count = 0
    for pk in candidates.values_list("pk", flat=True)[:BATCH]:
        with transaction.atomic():
            row = (
                Conversation.objects.select_for_update()
                .filter(_stalled(now), pk=pk)
                .only("id", "run_slice", "lease_token", "worker_host", "agent", "status")
                .first()
            )
            if row is None:
                continue
            died = row.lease_token is not None or row.run_slice is None
            # A died runner's slice is voided by a new id; a lost message is sent again as is.
            schedule_next(row, new_slice=died, save=False)
            lease_drop(row)
            if died:
                revived: list[BaseEvent] = [AgentErrorEvent(code=REVIVED, message=REVIVED_MESSAGE)]
                if row.status == Status.WAITING_FOR_CONFIRMATION:
                    # Running again, so the new runner's claim may take the run and end the
                    # lost turn (orchestration.external.turn).
                    revived += permissions.orphaned_requests_expire(row.pk)
                    revived.append(
                        StatusChangeEvent(
                            status=Status.RUNNING, previous=row.status, reason="run revived"
                        )
                    )
                store.append(row.pk, revived)
            count += 1
    return count
