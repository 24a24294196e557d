"""The sweeper: revives running conversations whose runner died or whose next slice was lost."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from conversations.events import Status
from conversations.models import Conversation

from .dispatch import enqueue_slice_on_commit, new_slice_id


def sweep_runs() -> int:
    """Re-enqueue running conversations whose runner died (lease expired) or whose next
    slice was never picked up. Returns how many were re-enqueued."""
    now = timezone.now()
    stale_queue = now - timedelta(seconds=max(60.0, settings.CANVAS_SWEEP_SECONDS * 4))
    stalled = Q(lease_expires_at__lt=now) | Q(lease_token__isnull=True) & (
        Q(updated_at__lt=stale_queue) | Q(run_slice__isnull=True)
    )
    candidates = Conversation.objects.filter(stalled, status=Status.RUNNING)
    count = 0
    for pk in candidates.values_list("pk", flat=True)[:500]:
        with transaction.atomic():
            row = (
                Conversation.objects.select_for_update()
                .filter(stalled, pk=pk, status=Status.RUNNING)
                .first()
            )
            if row is None:
                continue
            row.run_slice = new_slice_id()
            row.lease_token = None
            row.lease_expires_at = None
            row.save(update_fields=["run_slice", "lease_token", "lease_expires_at", "updated_at"])
            enqueue_slice_on_commit(row.pk, row.run_slice, worker_host=row.worker_host)
            count += 1
    return count
