"""Celery edges: take ids, check the world, call one function. The runner (and with it
LiteLLM) is imported inside the task body so the web process never loads it."""

from __future__ import annotations

from celery import shared_task

from .notify_tasks import notify_webhook  # noqa: F401


@shared_task(name="orchestration.run_slice", bind=True, acks_late=True, max_retries=None)
def run_slice(self, conversation_id: str, slice_id: str) -> None:
    from .runner import run_slice as run

    wait = run(conversation_id, slice_id)
    if wait is not None:
        raise self.retry(countdown=wait)


@shared_task(name="orchestration.sweep_runs", ignore_result=True)
def sweep_runs() -> int:
    from .stranded import sweep_stranded_runs
    from .sweep import sweep_runs as sweep

    return sweep_stranded_runs() + sweep()
