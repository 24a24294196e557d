"""Worker presence: each worker process announces its host, and says goodbye when it stops.

Every worker process (the Celery worker's main process, or the embedded worker's server)
upserts its host's `WorkerHost` row every `CANVAS_WORKER_HEARTBEAT_SECONDS` from a daemon
thread: one statement per few seconds per process (a failed one is tried again within a
second, so a host is heard of as soon as the database is back). A warm shutdown first sets `draining`, so
running slices stop at their next step boundary and hand over (runner.SliceRunner.run), then
marks the host stopped once the pool has finished. A host is alive while it announced itself
within three heartbeat periods and has not stopped; runs pinned to a host gone for longer than
`CANVAS_WORKER_GONE_SECONDS` are dealt with by orchestration/chain/stranded.py, which first
asks the broker whether any worker of a silent host still answers (`hosts_answering`).
"""

from __future__ import annotations

import logging
import subprocess
import threading
from datetime import datetime, timedelta
from functools import cache
from importlib import metadata
from pathlib import Path

from celery import current_app
from django.conf import settings
from django.db import connection
from django.utils import timezone

from ..models import WorkerHost
from .dispatch import ACP_QUEUE, host_queue

logger = logging.getLogger(__name__)

draining = threading.Event()
"""Set when this process begins a warm shutdown: slices stop at the next step boundary."""


def alive_after() -> datetime:
    """Hosts last seen before this are not alive (three missed heartbeats)."""
    return timezone.now() - timedelta(seconds=3 * settings.CANVAS_WORKER_HEARTBEAT_SECONDS)


def host_alive(host: str) -> bool:
    return WorkerHost.objects.filter(
        host=host, stopped_at__isnull=True, last_seen__gte=alive_after()
    ).exists()


def host_awaited(*, status: str, worker_host: str) -> str | None:
    """The host a running conversation waits for: pinned to it, and it is not alive."""
    if status != "running" or not worker_host or not settings.CANVAS_PIN_TO_HOST:
        return None
    return None if host_alive(worker_host) else worker_host


PING_TIMEOUT = 1.0
"""Seconds a silent host's workers get to answer the broker's ping."""


def hosts_answering(hosts: set[str], timeout: float = PING_TIMEOUT) -> set[str] | None:
    """Those of `hosts` with a worker that answers a control ping within `timeout`: a worker
    consuming the host's queue (canvas.celery) is a worker of that host, whatever its node
    name. None when the broker could not be asked (then nobody knows)."""
    queues = {host_queue(host): host for host in hosts}
    queues |= {host_queue(host, base=ACP_QUEUE): host for host in hosts}
    try:
        with current_app.connection_for_write() as conn:
            # One bounded try: a broadcast to a broker that is down would retry forever.
            conn.ensure_connection(max_retries=0, timeout=timeout)
            replies = current_app.control.inspect(timeout=timeout, connection=conn)
            answers = replies.active_queues() or {}
    except Exception:  # the broker is unreachable or answered nonsense: no evidence either way
        logger.warning("could not ping the workers of %s", sorted(hosts), exc_info=True)
        return None
    return {
        queues[queue["name"]]
        for consumed in answers.values()
        for queue in consumed or []
        if queue.get("name") in queues
    }


@cache
def code_version() -> str:
    """The package version, with the git commit when the code runs from a checkout."""
    try:
        version = metadata.version("agent-canvas")
    except metadata.PackageNotFoundError:
        version = "unknown"
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], cwd=Path(__file__).resolve().parent,
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return version
    return f"{version}+{sha}" if sha else version


def host_announce(*, host: str, queues: list[str], started_at: datetime | None = None) -> None:
    """Upsert the host's row as seen now; `started_at` when a process has just started."""
    fields = ["queues", "version", "last_seen", "stopped_at"]
    row = WorkerHost(
        host=host, queues=sorted(queues), version=code_version(), last_seen=timezone.now(),
        started_at=started_at, stopped_at=None,
    )  # fmt: skip
    WorkerHost.objects.bulk_create(
        [row], update_conflicts=True, unique_fields=["host"],
        update_fields=fields + (["started_at"] if started_at else []),
    )  # fmt: skip


def host_depart(*, host: str) -> None:
    """The host's last word on a warm shutdown. Another process of the host still running
    clears it again with its next heartbeat."""
    now = timezone.now()
    WorkerHost.objects.filter(host=host).update(stopped_at=now, last_seen=now)


RETRY_SECONDS = 1.0
"""How soon a heartbeat that failed is tried again."""


class Presence:
    """The heartbeat thread of one worker process."""

    def __init__(self, queues: list[str]) -> None:
        self.host = settings.CANVAS_WORKER_HOST
        self.queues = queues
        self._stop = threading.Event()
        self._failing = False
        self._thread = threading.Thread(target=self._run, name="worker-presence", daemon=True)

    def start(self) -> Presence:
        self._beat(started_at=timezone.now())
        self._thread.start()
        return self

    def _run(self) -> None:
        period = settings.CANVAS_WORKER_HEARTBEAT_SECONDS
        wait = min(period, RETRY_SECONDS) if self._failing else period
        try:
            while not self._stop.wait(wait):
                # After a failed beat (the database is away), try again within a second: the
                # host is heard of again as soon as the database is back, not a period later.
                wait = period if self._beat() else min(period, RETRY_SECONDS)
        finally:
            connection.close()

    def _beat(self, started_at: datetime | None = None) -> bool:
        try:
            host_announce(host=self.host, queues=self.queues, started_at=started_at)
            self._failing = False
            return True
        except Exception:  # a database blip must not end the heartbeat
            if not self._failing:  # once per outage, not once a second
                logger.warning("worker heartbeat for %s failed", self.host, exc_info=True)
            self._failing = True
            connection.close()
            return False

    def stop(self) -> None:
        """Stop beating and mark the host gone. Call after the pool has finished its slices."""
        self._stop.set()
        self._thread.join(timeout=10)
        try:
            host_depart(host=self.host)
        except Exception:
            logger.warning("could not mark worker host %s stopped", self.host, exc_info=True)
        finally:
            connection.close()


_presence: Presence | None = None


def presence_start(queues: list[str]) -> None:
    """Announce this process's host now and every heartbeat period after (idempotent)."""
    global _presence
    if _presence is None:
        draining.clear()
        _presence = Presence(queues).start()


def presence_stop() -> None:
    """Mark the host gone; call once the pool has finished (handed over) its slices."""
    global _presence
    if _presence is not None:
        _presence.stop()
        _presence = None
    draining.clear()
