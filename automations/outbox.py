"""The sweeper's pass that hands automation notices to the workers: failure and overdue
alerts, completion callbacks (automations.notices builds and sends them).

The run rows are the outbox. Whatever ended a run (a delivery's template, a refused start,
its conversation's end, the sweeper giving up) only sets its status; this pass finds the
runs with a notice due and claims each with a conditional UPDATE of its marker column, so
every notice is handed over once however many sweepers run, and one lost with its process
before the claim is found by the next pass. A claim whose task cannot be enqueued (the
broker down) is released for the next pass. Delivery is then at least once (the task
retries; X-Canvas-Delivery lets receivers drop a repeat).

Runs that ended more than STALE_AFTER ago with a notice still due (the service was down
for long) are marked without sending: a day-old alert is noise, a burst of them worse.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from teams.notifications import notification_configured

from .models import AutomationRun
from .notices import Notice
from .vocabulary import REPORTED_STATUSES, RunStatus

logger = logging.getLogger(__name__)

STALE_AFTER = timedelta(days=1)
BATCH = 200
MARKERS = {Notice.FAILED: "failure_alerted_at", Notice.OVERDUE: "overdue_alerted_at",
           Notice.COMPLETED: "callback_done_at"}  # fmt: skip


def _enqueue(run_id: int, notice: Notice) -> bool:
    kwargs = {"run_id": run_id, "notice": str(notice), "delivery_id": uuid.uuid4().hex}
    from .tasks import send_notice  # the edge, imported here: it imports this module lazily

    try:
        send_notice.apply_async(kwargs=kwargs)
    except Exception:
        logger.exception("could not enqueue the %s notice of automation run %s", notice, run_id)
        return False
    return True


def _claim_and_send(run_id: int, notice: Notice, now: datetime) -> bool:
    marker = MARKERS[notice]
    claimed = AutomationRun.objects.filter(pk=run_id, **{f"{marker}__isnull": True}).update(
        **{marker: now}
    )
    if not claimed:  # another sweeper has it
        return False
    if _enqueue(run_id, notice):
        return True
    AutomationRun.objects.filter(pk=run_id).update(**{marker: None})
    return False


def _mark(rows, marker: str, now: datetime) -> int:
    return AutomationRun.objects.filter(pk__in=list(rows.values_list("pk", flat=True)[:BATCH])
                                        ).update(**{marker: now})  # fmt: skip


def _failures(now: datetime, stale: datetime) -> int:
    due = AutomationRun.objects.filter(status=RunStatus.FAILED, failure_alerted_at__isnull=True)
    _mark(due.filter(finished_at__lt=stale), "failure_alerted_at", now)
    sent = 0
    configured: dict[int, bool] = {}
    for run_id, team_id in due.values_list("pk", "automation__team_id")[:BATCH]:
        if team_id not in configured:
            configured[team_id] = notification_configured(team_id)
        if not configured[team_id]:  # nothing to send, ever: the webhook is read when sent
            AutomationRun.objects.filter(pk=run_id).update(failure_alerted_at=now)
            continue
        sent += _claim_and_send(run_id, Notice.FAILED, now)
    return sent


def _overdue(now: datetime) -> int:
    going = AutomationRun.objects.filter(
        status=RunStatus.STARTED, overdue_alerted_at__isnull=True, started_at__isnull=False
    ).values_list("pk", "started_at", "automation__deadline_minutes", "automation__team_id")
    sent = 0
    configured: dict[int, bool] = {}  # one lookup per team, however many of its runs are late
    for run_id, started_at, minutes, team_id in going.order_by("started_at")[:BATCH]:
        if started_at + timedelta(minutes=minutes) > now:
            continue
        if team_id not in configured:
            configured[team_id] = notification_configured(team_id)
        if not configured[team_id]:
            AutomationRun.objects.filter(pk=run_id).update(overdue_alerted_at=now)
            continue
        sent += _claim_and_send(run_id, Notice.OVERDUE, now)
    return sent


def _callbacks(now: datetime, stale: datetime) -> int:
    due = AutomationRun.objects.filter(status__in=REPORTED_STATUSES, callback_done_at__isnull=True)
    _mark(due.filter(Q(automation__callback_url="") | Q(finished_at__lt=stale)),
          "callback_done_at", now)  # fmt: skip
    sent = 0
    for run_id in due.values_list("pk", flat=True).order_by("finished_at")[:BATCH]:
        sent += _claim_and_send(run_id, Notice.COMPLETED, now)
    return sent


def notices_send(*, now: datetime | None = None) -> int:
    """Hand every due notice to a worker. Returns how many were handed over."""
    now = timezone.now() if now is None else now
    stale = now - STALE_AFTER
    return _failures(now, stale) + _overdue(now) + _callbacks(now, stale)
