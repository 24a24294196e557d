"""Firing cron schedules: which slot is due, and recording its run exactly once.

A *slot* is an instant an automation's cron expression names, read in the automation's time
zone (croniter on a zone-aware time: "0 9 * * *" in Europe/Paris is 08:00 UTC in winter and
07:00 UTC in summer). `fire_schedules` runs every CANVAS_SCHEDULE_SECONDS (celery beat, and
the embedded mode's sweep thread). For each enabled schedule it takes the slots after its
watermark (`last_slot_at`, else `created_at`: nothing from before the automation existed)
up to now, and looks at the latest of them only, so no downtime ever fires a burst:

- `missed: skip` (the default): the latest slot fires if it is at most `grace()` late, that
  is max(2 * CANVAS_SCHEDULE_SECONDS, 60 s) after its time. Two periods cover one beat tick
  lost or expired in the queue; 60 s keeps a short period from missing slots on a busy
  worker. A latest slot later than that, and every older missed slot, is skipped: no run is
  recorded, only the watermark moves past it (and the skip is logged).
- `missed: once`: the latest slot fires however late, one run standing for all the missed
  ones (keyed, like any firing, by the latest slot).

On time is the common case of both rules: the beat looks well within the grace.

Exactly once: a firing is an AutomationRun whose delivery key is "slot:<UTC ISO time>"; the
unique (automation, delivery_key) constraint lets only the first insert in, so two beat
processes, or two workers running the task at once, start one run (the second insert's
IntegrityError starts nothing). The insert and the watermark's move commit together. The
run then starts through automations.runs.run_start and its concurrency rule; if that
crashes, the committed `accepted` run is started by the sweeper (start_pending_runs).

The payload the prompt template (and the filter, as for webhooks) sees:

    {"slot": "2026-12-02T08:00:00+00:00",            the slot in UTC, as in its key
     "automation": "nightly-report",                   the automation's name
     "scheduled_for": "2026-12-02T09:00:00+01:00"}     the slot in the automation's zone

e.g. "Summarise yesterday's errors (run of {{ payload.scheduled_for }})."

`slot_due` and the helpers above it are pure (no ORM); `fire_schedules` is the one DB entry.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from croniter import croniter
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from .filters import FilterError, filter_passes
from .models import Automation, AutomationRun
from .runs import run_start
from .templating import TemplateError, render
from .vocabulary import Missed, RunStatus, Trigger

logger = logging.getLogger(__name__)

KEY_PREFIX = "slot:"
MIN_GRACE = timedelta(seconds=60)


def grace() -> timedelta:
    """How late a slot may fire under `missed: skip` (see the module's docstring)."""
    return max(timedelta(seconds=2 * float(settings.CANVAS_SCHEDULE_SECONDS)), MIN_GRACE)


def latest_slot(cron: str, zone: str, now: datetime) -> datetime:
    """The last slot at or before `now`, in UTC."""
    # croniter's get_prev is strictly before its start; slots have whole seconds, so start
    # one second past `now` truncated to the second to include a slot at exactly `now`.
    start = now.astimezone(ZoneInfo(zone)).replace(microsecond=0) + timedelta(seconds=1)
    return croniter(cron, start).get_prev(datetime).astimezone(UTC)


@dataclass(frozen=True, slots=True)
class Due:
    slot: datetime
    """The latest slot after the watermark, in UTC: where the watermark moves either way."""
    fire: bool
    """False: too late under `missed: skip`; nothing is recorded for it."""


def slot_due(
    *, cron: str, zone: str, missed: str, after: datetime, now: datetime, grace: timedelta
) -> Due | None:
    """What to do with an automation's slots after `after` up to `now`: None when there are
    none, else its latest slot and whether it fires (the rules in the module's docstring)."""
    slot = latest_slot(cron, zone, now)
    if slot <= after:
        return None
    return Due(slot, fire=missed == Missed.ONCE or now - slot <= grace)


def slot_key(slot: datetime) -> str:
    return f"{KEY_PREFIX}{slot.astimezone(UTC).isoformat()}"


def slot_payload(*, name: str, zone: str, slot: datetime) -> dict[str, Any]:
    return {
        "slot": slot.astimezone(UTC).isoformat(),
        "automation": name,
        "scheduled_for": slot.astimezone(ZoneInfo(zone)).isoformat(),
    }


def _advance(automation_id: int, slot: datetime) -> None:
    """Move the watermark to `slot`, never back (a slower firer may come second)."""
    Automation.objects.filter(pk=automation_id).filter(
        Q(last_slot_at__isnull=True) | Q(last_slot_at__lt=slot)
    ).update(last_slot_at=slot)


def slot_fire(automation: Automation, slot: datetime) -> AutomationRun | None:
    """Record the slot's run and move the watermark (one transaction), then start the run.
    None when the slot was already recorded: another firer won, and nothing starts.

    A filter or template that fails on the payload is a `failed` run, an untrue filter an
    `ignored` one, as for webhooks. The payload is ours (times and a name) and the prompt the
    admin's template, which members can already read: no team secret to redact."""
    payload = slot_payload(name=automation.name, zone=automation.timezone, slot=slot)
    prompt, error, status = "", "", RunStatus.ACCEPTED
    try:
        if filter_passes(automation.filter, payload):
            prompt = render(automation.prompt_template, payload)
        else:
            status = RunStatus.IGNORED
    except (FilterError, TemplateError) as exc:
        status, error = RunStatus.FAILED, str(exc)
    try:
        with transaction.atomic():
            run = AutomationRun.objects.create(
                automation=automation, trigger=Trigger.SCHEDULE, delivery_key=slot_key(slot),
                payload=payload, prompt=prompt, status=status, error=error,
            )  # fmt: skip
            _advance(automation.pk, slot)
    except IntegrityError:
        return None
    if status == RunStatus.ACCEPTED:
        try:
            run = run_start(run_id=run.pk).run
        except Exception:  # committed: the sweeper starts it (start_pending_runs)
            logger.exception("automation run %s: starting its conversation failed", run.pk)
    return run


def fire_schedules(*, now: datetime | None = None) -> int:
    """Fire every enabled schedule's due slot (the module's docstring has the rules).
    Returns how many runs were recorded by this call."""
    now = timezone.now() if now is None else now
    window = grace()
    fired = 0
    schedules = Automation.objects.filter(enabled=True, trigger=Trigger.SCHEDULE).order_by("pk")
    for automation in schedules:
        try:
            due = slot_due(
                cron=automation.cron, zone=automation.timezone, missed=automation.missed,
                after=automation.last_slot_at or automation.created_at, now=now, grace=window,
            )  # fmt: skip
            if due is None:
                continue
            if not due.fire:
                logger.info(
                    "automation %s: slot %s skipped, %.0f s late (missed: skip)",
                    automation.pk, due.slot.isoformat(), (now - due.slot).total_seconds(),
                )  # fmt: skip
                _advance(automation.pk, due.slot)
                continue
            fired += slot_fire(automation, due.slot) is not None
        except Exception:  # one broken schedule must not stop the others
            logger.exception("automation %s: firing its schedule failed", automation.pk)
    return fired
