"""Whether the database has been there long enough to judge a host by its heartbeats.

A host's silence means something only while its workers could write: during a database
outage every host falls silent together, and right after one a live host needs up to a
heartbeat period to write again. So each sweep that has hosts to judge records itself in the
one `SweepMark` row (the database's clock, so sweepers on other machines and a restarted
sweeper agree), and a sweep that finds the previous one further back than `sweep_gap()`
restarts the steady period: the database was unreachable, no sweeper ran, or there was
nothing to judge meanwhile (not knowing which, it waits). Hosts are judged only once the
period has lasted `fresh_grace()` (orchestration/chain/stranded.py).
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Case, F, When
from django.db.models.functions import Now

from ..models import SweepMark


def sweep_gap() -> float:
    """A longer pause between two sweeps is a gap: a missed sweep, and in any case short
    enough that an outage a host's silence could outlast the gone period through is seen."""
    return min(2 * settings.CANVAS_SWEEP_SECONDS, settings.CANVAS_WORKER_GONE_SECONDS / 2)


def fresh_grace() -> float:
    """How long the database must have been there before silence counts: the three
    heartbeat periods a host is allowed anyway before it is shown as not alive
    (orchestration/chain/workers.py alive_after), so a live one has surely written again."""
    return 3 * settings.CANVAS_WORKER_HEARTBEAT_SECONDS


def sweep_mark() -> float:
    """Record this sweep; returns for how many seconds sweeps have reached the database
    without a gap (0 on the first sweep after one)."""
    gap = timedelta(seconds=sweep_gap())
    with transaction.atomic():
        marked = SweepMark.objects.filter(pk=1).update(
            steady_since=Case(
                When(swept_at__lt=Now() - gap, then=Now()), default=F("steady_since")
            ),
            swept_at=Now(),
        )
        if not marked:
            SweepMark.objects.bulk_create(
                [SweepMark(pk=1, swept_at=Now(), steady_since=Now())], ignore_conflicts=True
            )
        now, since = (
            SweepMark.objects.filter(pk=1).annotate(now=Now()).values_list("now", "steady_since")
        ).get()
    return max(0.0, (now - since).total_seconds())


def database_steady() -> bool:
    """Record this sweep; whether heartbeats may now be trusted to tell a gone host."""
    return sweep_mark() >= fresh_grace()
