"""Enqueueing run slices. Cheap to import: the web process uses it without loading LiteLLM."""

from __future__ import annotations

import uuid

from celery import current_app
from django.db import transaction

RUN_SLICE_TASK = "orchestration.run_slice"


def new_slice_id() -> str:
    return uuid.uuid4().hex


def enqueue_slice_on_commit(conversation_id: uuid.UUID | str, slice_id: str) -> None:
    """Send the slice task once the transaction that recorded `slice_id` commits."""
    args = [str(conversation_id), slice_id]
    transaction.on_commit(lambda: current_app.send_task(RUN_SLICE_TASK, args=args))
