"""Recording and enqueueing run slices. Cheap to import: the web process uses it without loading LiteLLM."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone

if TYPE_CHECKING:
    from conversations.models import Conversation

logger = logging.getLogger(__name__)

RUN_SLICE_TASK = "orchestration.run_slice"
ACP_QUEUE = "acp"
"""Where external agents' turns run (acp_bridge): a turn holds its worker for as long as the
agent works, so those workers are apart from the ones that run our own agents' short slices."""


SEND_RETRY_POLICY = {"max_retries": 4, "interval_start": 0.1, "interval_step": 0.4,
                     "interval_max": 1.0}  # fmt: skip
"""kombu's retry of one publish (reconnecting each time): about 2.5 s, enough for a Redis
restart; a request or a hand-over waits no longer than that for a broker that is down."""


def new_slice_id() -> str:
    return uuid.uuid4().hex


def slice_due_at(after: float = 0.0) -> datetime:
    """When a slice recorded now (and sent, or retried in `after` seconds) should have been
    claimed. The sweeper re-sends a slice still unclaimed then: its message was lost."""
    return timezone.now() + timedelta(seconds=after + settings.CANVAS_SWEEP_SECONDS)


def host_queue(host: str, *, base: str | None = None) -> str:
    """The queue only the workers of `host` consume (see canvas.celery); `base` ACP_QUEUE for
    the host's ACP workers."""
    return f"host.{host}" if base is None else f"{base}.host.{host}"


def slice_queue(worker_host: str, *, agent: str = "") -> str | None:
    """Where a conversation's next slice goes: its host's queue once pinned, else any worker;
    the ACP workers' queues for a conversation with an external `agent`."""
    base = ACP_QUEUE if agent else None
    if worker_host and settings.CANVAS_PIN_TO_HOST:
        return host_queue(worker_host, base=base)
    return base


def acp_time_limits() -> tuple[float, float]:
    """(soft, hard) for an ACP turn's task: the longest turn the site allows, plus starting
    the agent and a margin (a turn is bounded by its profile's own timeout well before)."""
    soft = settings.CANVAS_ACP_MAX_TURN_SECONDS + 300.0
    return soft, soft + 60.0


def send_slice(
    conversation_id: uuid.UUID | str, slice_id: str, *, worker_host: str = "", agent: str = ""
) -> None:
    limits: dict[str, float] = {}
    if agent:
        limits["soft_time_limit"], limits["time_limit"] = acp_time_limits()
    current_app.send_task(
        RUN_SLICE_TASK, args=[str(conversation_id), slice_id],
        queue=slice_queue(worker_host, agent=agent), retry=True, retry_policy=SEND_RETRY_POLICY,
        **limits,
    )  # fmt: skip


def enqueue_slice_on_commit(
    conversation_id: uuid.UUID | str, slice_id: str, *, worker_host: str = "", agent: str = ""
) -> None:
    """Send the slice task once the transaction that recorded `slice_id` (and its
    `run_slice_due_at`, see `slice_due_at`) commits.

    Never raises into the committing caller: its writes are saved, and an API request must
    answer from them. A send that fails (the broker is down) is logged; the row keeps
    `slice_id` and status RUNNING, so the sweeper re-sends the slice once the broker is back."""

    def send() -> None:
        try:
            send_slice(conversation_id, slice_id, worker_host=worker_host, agent=agent)
        except Exception:
            logger.warning(
                "could not enqueue slice %s of conversation %s; the sweeper will re-send it",
                slice_id, conversation_id, exc_info=True,
            )  # fmt: skip

    transaction.on_commit(send)


SLICE_FIELDS = ("run_slice", "run_slice_due_at", "updated_at")
"""What `schedule_next` saves of the row, before the caller's `also_save`."""


def schedule_next(
    row: Conversation,
    *,
    new_slice: bool = True,
    send: bool = True,
    save: bool = True,
    also_save: Iterable[str] = (),
) -> str:
    """Record the run's next slice on `row` and send it once the caller's transaction commits;
    returns the slice id. Call inside that transaction, holding the row lock.

    A new slice id (the default) voids the one any earlier runner holds, a dead one's too;
    `new_slice` False sends `row.run_slice` again (its message was lost: should the first copy
    turn up after all, the two still run the slice once), unless the row has none. Either way
    the slice gets a due time, by which the sweeper expects it claimed (see chain/sweep.py).
    `send` False leaves the sending to the caller (a runner that claims the slice itself at
    once). `save` False when the caller saves the row with other fields (they must include
    `SLICE_FIELDS`); else `also_save` names fields it changed on `row` to save with these."""
    if new_slice or row.run_slice is None:
        row.run_slice = new_slice_id()
    row.run_slice_due_at = slice_due_at()
    if save:
        row.save(update_fields=[*SLICE_FIELDS, *also_save])
    if send:
        enqueue_slice_on_commit(row.pk, row.run_slice, worker_host=row.worker_host, agent=row.agent)
    return row.run_slice
