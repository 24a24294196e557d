"""Runs stranded on a worker host that is gone: move them, or end them saying so.

A run pinned to a host (its local workspace is on that host's disk) can only continue there.
Once the host has been silent for `CANVAS_WORKER_GONE_SECONDS` (orchestration/chain/workers.py), the
run moves to any worker when workspaces are on shared storage (`CANVAS_SHARED_WORKSPACES`),
and otherwise ends in ERROR with an `agent.error` (`worker_host_gone`) naming the host. Called
by the sweep task; touches only runs no live lease holds.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from conversations import store
from conversations.events import AgentErrorEvent, Status
from conversations.models import Conversation

from ..control.notify import notify_status_on_commit
from ..models import WorkerHost
from ..step.history import history_refresh
from ..step.loop import run_end_events
from .dispatch import enqueue_slice_on_commit, new_slice_id

HOST_GONE = "worker_host_gone"


def _unleased() -> Q:
    return Q(lease_token__isnull=True) | Q(lease_expires_at__lt=timezone.now())


def gone_hosts(hosts: set[str]) -> set[str]:
    """Those of `hosts` silent for the gone period. A host never heard of is noted as seen
    now, so it gets the whole period to announce itself (e.g. right after an upgrade)."""
    now = timezone.now()
    WorkerHost.objects.bulk_create(
        [WorkerHost(host=host, last_seen=now) for host in hosts], ignore_conflicts=True
    )
    cutoff = now - timedelta(seconds=settings.CANVAS_WORKER_GONE_SECONDS)
    return set(
        WorkerHost.objects.filter(host__in=hosts, last_seen__lt=cutoff).values_list(
            "host", flat=True
        )
    )


def sweep_stranded_runs() -> int:
    """Move or end every unleased running conversation pinned to a gone host; how many."""
    if not settings.CANVAS_PIN_TO_HOST:
        return 0
    pinned = Conversation.objects.filter(_unleased(), status=Status.RUNNING).exclude(worker_host="")
    hosts = set(pinned.values_list("worker_host", flat=True).distinct())
    gone = gone_hosts(hosts) if hosts else set()
    count = 0
    for pk, host in pinned.filter(worker_host__in=gone).values_list("pk", "worker_host")[:500]:
        count += _strand_handle(str(pk), host)
    return count


def _strand_handle(conversation_id: str, host: str) -> int:
    with transaction.atomic():
        row = (
            Conversation.objects.select_for_update()
            .filter(_unleased(), pk=conversation_id, status=Status.RUNNING, worker_host=host)
            .only("id", "team_id", "title", "worker_host", "run_slice", "agent")
            .first()
        )
        if row is None:
            return 0
        if settings.CANVAS_SHARED_WORKSPACES:
            # The workspace is on storage every worker mounts: let any worker take it.
            row.worker_host = ""
            row.run_slice = new_slice_id()
            enqueue_slice_on_commit(row.pk, row.run_slice, agent=row.agent)
        else:
            reason = f"worker host {host} is gone"
            gone_for = int(settings.CANVAS_WORKER_GONE_SECONDS)
            error = AgentErrorEvent(
                code=HOST_GONE,
                message=(
                    f"The worker host {host!r}, which holds this conversation's workspace, has "
                    f"not been seen for over {gone_for} s, so the run cannot continue. Start a "
                    f"worker with CANVAS_WORKER_HOST={host} on the machine with that disk and "
                    "send a message to go on."
                ),
            )
            # Take the (free) lease so the append is fenced against a runner starting now.
            row.lease_token = uuid.uuid4().hex
            row.save(update_fields=["lease_token"])
            run_id = history_refresh(conversation_id).state.run_id
            events = [error, *run_end_events(Status.ERROR, reason, run_id)]
            store.append(conversation_id, events, lease_token=row.lease_token)
            notify_status_on_commit(
                conversation_id=conversation_id, team_id=row.team_id,
                status=Status.ERROR.value, reason=reason, title=row.title,
            )  # fmt: skip
            row.run_slice = None
        row.lease_token = None
        row.lease_expires_at = None
        row.save(update_fields=["worker_host", "run_slice", "lease_token", "lease_expires_at",
                                "updated_at"])  # fmt: skip
    return 1
