"""Worker hosts: who is there to run the runs pinned to them (see orchestration/chain/workers.py),
and the sweeper's mark of how long the database has been there to hear them (chain/steady.py)."""

from django.db import models


class WorkerHost(models.Model):
    """One row per worker host, upserted every few seconds by each of its worker processes.

    A host is alive while it has announced itself recently and has not said goodbye;
    `last_seen` is also when the sweeper first noticed a host that never announced itself.
    """

    host = models.CharField(max_length=255, primary_key=True)
    queues = models.JSONField(default=list)
    version = models.CharField(max_length=100, blank=True, default="")
    started_at = models.DateTimeField(null=True, blank=True)
    last_seen = models.DateTimeField()
    stopped_at = models.DateTimeField(null=True, blank=True)
    """Set by a warm shutdown; cleared by the host's next heartbeat (another process of it)."""

    def __str__(self) -> str:
        return self.host


class SweepMark(models.Model):
    """The sweeper's own record, one row: when a sweep last reached the database, and since
    when sweeps have reached it without a gap, both by the database's clock.

    A gap (the database was unreachable, or no sweeper ran) restarts `steady_since`, and no
    host is judged gone until the database has been there long enough for live workers to
    beat again (orchestration/chain/steady.py). Kept in the database so that a restarted
    sweeper, or a sweep run by another worker, knows it too."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    swept_at = models.DateTimeField()
    steady_since = models.DateTimeField()

    def __str__(self) -> str:
        return f"swept at {self.swept_at}, steady since {self.steady_since}"
