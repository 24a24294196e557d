"""The embedded worker: a real Celery worker on the in-memory broker, inside this process.

Used when REDIS_URL is unset (`make up`, `run_conversation` on a laptop). Tasks take the same
path as in production, only the transport differs. The periodic jobs that production runs
from celery beat (canvas/periodic.py, one list for both) run here on a plain thread.

The worker announces its host (orchestration/chain/workers.py) when it is up, however long its
start takes on a loaded machine: a worker that ran jobs without ever announcing itself had its
runs judged stranded on a gone host. The sweeper starts only then, so it never judges this
process's own host gone while its worker is still starting.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from celery.worker import WorkController
from django.conf import settings

from .celery import app
from .periodic import PeriodicJob, jobs_enabled

logger = logging.getLogger(__name__)


SLOW_START_SECONDS = 30.0
"""A start slower than this is logged (and logged again each period), never given up on."""
POLL_SECONDS = 0.05


class _ReadyWorkController(WorkController):
    def __init__(self, *args, ready: threading.Event, **kwargs) -> None:
        self.ready = ready
        super().__init__(*args, **kwargs)

    def on_consumer_ready(self, consumer) -> None:
        super().on_consumer_ready(consumer)
        self.ready.set()


class EmbeddedWorker:
    def __init__(self, concurrency: int = 4) -> None:
        if not settings.EMBEDDED:
            raise RuntimeError("the embedded worker is for the embedded mode (REDIS_URL unset)")
        self.concurrency = concurrency
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._worker: _ReadyWorkController | None = None
        self._ready = threading.Event()
        self._announced = threading.Event()

    def start(self, *, wait: bool = True) -> None:
        """Start the worker; with `wait=False` return at once and let it start in the
        background: the server answers meanwhile, and tasks sent before it is ready wait in
        the in-memory broker. It does not load LiteLLM: the first call to a real model does
        (the scripted and demo models never need it)."""
        from orchestration.chain.dispatch import ACP_QUEUE, host_queue

        app.finalize()
        app.set_current()
        # The in-memory broker is polled, once a second by default: every slice handed over
        # (and the worker's own stop) waited for it. Polling a dict this often costs nothing.
        options = app.conf.broker_transport_options or {}
        app.conf.broker_transport_options = {**options, "polling_interval": POLL_SECONDS}
        here = settings.CANVAS_WORKER_HOST
        # One worker for everything here: our own agents' slices and external agents' turns.
        queues = [
            app.conf.task_default_queue, host_queue(here),
            ACP_QUEUE, host_queue(here, base=ACP_QUEUE),
        ]  # fmt: skip
        worker_thread = threading.Thread(
            target=self._run, args=(queues,), name="embedded-celery", daemon=True
        )
        sweeper = threading.Thread(target=self._sweep_once_up, name="embedded-sweeper", daemon=True)
        self._threads = [worker_thread, sweeper]
        for thread in self._threads:
            thread.start()
        if wait:
            self._announce_when_ready(queues)
            return
        threading.Thread(
            target=self._announce_when_ready, args=(queues,), name="embedded-ready", daemon=True
        ).start()

    def _run(self, queues: list[str]) -> None:
        self._worker = _ReadyWorkController(
            app=app,
            pool="threads",
            concurrency=self.concurrency,
            hostname="embedded@localhost",
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
            loglevel="WARNING",
            queues=queues,
            ready=self._ready,
        )
        if not self._stop.is_set():
            self._worker.start()

    def _announce_when_ready(self, queues: list[str]) -> None:
        """Announce the host once the worker is ready, however long that takes; raise only
        if the worker's thread ended without ever being ready (it failed to start)."""
        from orchestration.chain.workers import presence_start

        worker_thread = self._threads[0]
        started = time.monotonic()
        warn_at = started + SLOW_START_SECONDS
        while not self._ready.wait(POLL_SECONDS * 4):
            if self._stop.is_set():
                return
            if not worker_thread.is_alive() and not self._ready.is_set():
                raise RuntimeError("the embedded Celery worker stopped before it was ready")
            if time.monotonic() >= warn_at:
                warn_at += SLOW_START_SECONDS
                logger.warning(
                    "the embedded Celery worker is still starting after %.0f s",
                    time.monotonic() - started,
                )
        if not self._stop.is_set():
            presence_start(queues)
            self._announced.set()

    def _sweep_once_up(self) -> None:
        while not self._announced.wait(POLL_SECONDS * 10):
            if self._stop.is_set():
                return
        self._sweep()

    def _sweep(self) -> None:
        app.loader.import_default_modules()  # the tasks by name, as the worker registers them
        jobs = jobs_enabled(settings)
        if not jobs:
            return
        due = dict.fromkeys(jobs, 0.0)  # every job runs in the first round
        # Beat's jobs at beat's periods (canvas/periodic.py), looked at as often as the
        # shortest one: a job runs at most one look later than its period says.
        while not self._stop.wait(min(jobs.values())):
            self._sweep_due(jobs, due)

    def _sweep_due(
        self, jobs: dict[PeriodicJob, float], due: dict[PeriodicJob, float]
    ) -> list[str]:
        """Run, in this thread, the jobs whose time has come (`due` holds each one's next
        monotonic time and is updated); returns the tasks run, failed ones included."""
        from django.db import connection

        now = time.monotonic()
        ran = []
        for job, period in jobs.items():
            if now < due[job]:
                continue
            due[job] = now + period
            ran.append(job.task)
            try:
                app.tasks[job.task]()
            except Exception:
                logger.exception("embedded sweep %s failed", job.task)
            finally:
                connection.close()
        return ran

    def stop(self) -> None:
        from orchestration.chain.workers import draining, presence_stop

        self._stop.set()
        draining.set()  # running slices hand over at their next step boundary
        if self._worker is not None:
            self._worker.stop(in_sighandler=False)
        for thread in self._threads:
            if thread.name == "embedded-celery" and self._worker is not None:
                # Its stop above waited for the running tasks; the consumer's own thread
                # would notice only when its broker poll times out (2 s): not waited for.
                continue
            thread.join(timeout=10)
        presence_stop()
        pool = sys.modules.get("orchestration.mcp.pool")  # none kept if it was never imported
        if pool is not None:
            pool.close_all()  # the MCP servers runs left for their next slice


@contextmanager
def embedded_worker(concurrency: int = 4, *, wait: bool = True) -> Iterator[EmbeddedWorker]:
    worker = EmbeddedWorker(concurrency)
    worker.start(wait=wait)
    try:
        yield worker
    finally:
        worker.stop()
