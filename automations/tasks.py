"""Celery edges of automations."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="automations.start_pending_runs", ignore_result=True)
def start_pending_runs() -> int:
    from .runs import start_pending_runs as start

    return start()


@shared_task(name="automations.fire_schedules", ignore_result=True)
def fire_schedules() -> int:
    from .schedules import fire_schedules as fire

    return fire()
