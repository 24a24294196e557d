"""The periodic jobs, listed once.

Celery beat's schedule (`CELERY_BEAT_SCHEDULE` in canvas/settings.py) and the embedded mode's
sweeper thread (canvas/embedded.py) are both built from `JOBS`, so a job added here runs in
both modes at the same period: two lists drifted apart once, and `make up` never removed the
containers of closed conversations. Jobs are named by their Celery task name, not imported:
settings imports this module before Django is set up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PeriodicJob:
    name: str
    """Beat's entry name."""
    task: str
    """The registered Celery task it runs."""
    period_setting: str
    """The setting that holds its period in seconds."""


JOBS: tuple[PeriodicJob, ...] = (
    # Stalled, stranded and waiting runs; idle agent homes (orchestration/chain/sweep.py).
    PeriodicJob("sweep-stalled-runs", "orchestration.sweep_runs", "CANVAS_SWEEP_SECONDS"),
    # Automation runs recorded but not started (a crash after the 202), queued behind their
    # previous run, or whose conversation ended (automations/runs.py).
    PeriodicJob(
        "automations-start-pending-runs", "automations.start_pending_runs", "CANVAS_SWEEP_SECONDS"
    ),
    # Automation runs' failure and overdue alerts and completion callbacks (automations/outbox.py).
    PeriodicJob("automations-send-notices", "automations.send_notices", "CANVAS_SWEEP_SECONDS"),
    # Cron schedules' due slots, each fired once however many beats run (automations/schedules.py).
    PeriodicJob(
        "automations-fire-schedules", "automations.fire_schedules", "CANVAS_SCHEDULE_SECONDS"
    ),
    # Containers whose conversation is closed or gone (workspaces/docker.py sweep_orphans);
    # one check of the Docker engine where none answers.
    PeriodicJob(
        "sweep-orphan-containers",
        "orchestration.sweep_containers",
        "CANVAS_CONTAINER_SWEEP_SECONDS",
    ),
)


def job_period(job: PeriodicJob, settings: Any) -> float:
    """The job's period in seconds, 0 for off, from a settings object (`django.conf.settings`)
    or a mapping of settings (the settings module's own globals while it loads)."""
    if isinstance(settings, Mapping):
        value = settings[job.period_setting]
    else:
        value = getattr(settings, job.period_setting)
    period = float(value)
    if not period >= 0:  # NaN too
        raise ValueError(f"{job.period_setting} must be 0 (off) or a number of seconds: {value!r}")
    return period


def jobs_enabled(settings: Any) -> dict[PeriodicJob, float]:
    """The jobs that run here and their periods: those whose period is not 0."""
    periods = {job: job_period(job, settings) for job in JOBS}
    return {job: period for job, period in periods.items() if period > 0}


def beat_schedule(settings: Any) -> dict[str, dict[str, Any]]:
    """`CELERY_BEAT_SCHEDULE` for the enabled jobs."""
    return {
        job.name: {
            "task": job.task,
            "schedule": period,
            # A run that waited a whole period in the queue (the broker was down) is superseded.
            "options": {"expires": period},
        }
        for job, period in jobs_enabled(settings).items()
    }
