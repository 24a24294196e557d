"""Worker hosts: who is there to run the runs pinned to them (see orchestration/chain/workers.py)."""

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
