"""Enqueueing run slices. Cheap to import: the web process uses it without loading LiteLLM."""

from __future__ import annotations

import uuid

from celery import current_app
from django.conf import settings
from django.db import transaction

RUN_SLICE_TASK = "orchestration.run_slice"


def new_slice_id() -> str:
    return uuid.uuid4().hex


def host_queue(host: str) -> str:
    """The queue only the workers of `host` consume (see canvas.celery)."""
    return f"host.{host}"


def slice_queue(worker_host: str) -> str | None:
    """Where a conversation's next slice goes: its host's queue once pinned, else any worker."""
    if worker_host and settings.CANVAS_PIN_TO_HOST:
        return host_queue(worker_host)
    return None


def send_slice(conversation_id: uuid.UUID | str, slice_id: str, *, worker_host: str = "") -> None:
    current_app.send_task(
        RUN_SLICE_TASK, args=[str(conversation_id), slice_id], queue=slice_queue(worker_host)
    )


def enqueue_slice_on_commit(
    conversation_id: uuid.UUID | str, slice_id: str, *, worker_host: str = ""
) -> None:
    """Send the slice task once the transaction that recorded `slice_id` commits."""
    transaction.on_commit(lambda: send_slice(conversation_id, slice_id, worker_host=worker_host))
