"""Runs stranded on a worker host that is gone: move them, or end them saying so.

A run pinned to a host (its local workspace is on that host's disk) can only continue there.
A host is gone when it has been silent for `CANVAS_WORKER_GONE_SECONDS`
(orchestration/chain/workers.py), judged on fresh evidence only: not until the database has
been there long enough for live workers to beat again (orchestration/chain/steady.py; a
database outage silences every host at once), and never while a worker of the host answers a
ping. The run then moves to any worker when workspaces are on shared storage
(`CANVAS_SHARED_WORKSPACES`), and otherwise ends in ERROR with an `agent.error`
(`worker_host_gone`) naming the host and when it was last heard of; tool calls it left without
a result get one saying they were interrupted. Called by the sweep task; touches only runs no
live lease holds.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from conversations import store
from conversations.events import AgentErrorEvent, BaseEvent, Status
from conversations.models import Conversation
from conversations.view import unanswered_actions

from ..control.notify import notify_status_on_commit
from ..models import WorkerHost
from ..step.history import history_refresh
from ..step.loop import interrupted_observation, run_end_events
from ..subagents.definitions import SPAWNING_TOOLS
from .dispatch import schedule_next
from .steady import database_steady
from .workers import hosts_answering

HOST_GONE = "worker_host_gone"


def _unleased() -> Q:
    return Q(lease_token__isnull=True) | Q(lease_expires_at__lt=timezone.now())


def gone_hosts(hosts: set[str]) -> dict[str, WorkerHost]:
    """Those of `hosts` gone, with their rows: silent for the gone period while the database
    was there to hear them, and no worker of theirs answers a ping. A host never heard of is
    noted as seen now, so it gets the whole period to announce itself (e.g. right after an
    upgrade)."""
    if not database_steady():
        return {}  # silence during or just after an outage says nothing about a host
    now = timezone.now()
    WorkerHost.objects.bulk_create(
        [WorkerHost(host=host, last_seen=now) for host in hosts], ignore_conflicts=True
    )
    cutoff = now - timedelta(seconds=settings.CANVAS_WORKER_GONE_SECONDS)
    silent = {
        row.host: row for row in WorkerHost.objects.filter(host__in=hosts, last_seen__lt=cutoff)
    }
    if not silent:
        return {}
    answering = hosts_answering(set(silent))
    if answering is None:
        return {}  # the broker could not be asked: wait for evidence rather than end runs
    return {host: row for host, row in silent.items() if host not in answering}


def sweep_stranded_runs() -> int:
    """Move or end every unleased running conversation pinned to a gone host; how many."""
    if not settings.CANVAS_PIN_TO_HOST:
        return 0
    pinned = Conversation.objects.filter(_unleased(), status=Status.RUNNING).exclude(worker_host="")
    hosts = set(pinned.values_list("worker_host", flat=True).distinct())
    gone = gone_hosts(hosts) if hosts else {}
    count = 0
    for pk, host in pinned.filter(worker_host__in=gone).values_list("pk", "worker_host")[:500]:
        count += _strand_handle(str(pk), gone[host])
    return count


def gone_message(host: WorkerHost) -> str:
    """What the conversation says about its gone host: since when it is silent, and what
    brings the run back."""
    seen = f"{host.last_seen:%Y-%m-%d %H:%M:%S} UTC"
    silent_for = int((timezone.now() - host.last_seen).total_seconds())
    if not host.version:  # a row the sweeper made: no worker of the host ever announced itself
        heard = f"has not announced itself since it was first looked for at {seen}"
    elif host.stopped_at is not None:
        heard = f"shut down at {seen} and has not come back"
    else:
        heard = f"stopped sending heartbeats at {seen}"
    if settings.EMBEDDED:
        return _embedded_gone_message(host.host, heard, silent_for)
    return (
        f"The worker host {host.host!r}, which holds this conversation's workspace, {heard} "
        f"({silent_for} s ago), and no worker of it answered a ping, so the run cannot "
        f"continue. Once a worker with CANVAS_WORKER_HOST={host.host} runs again on the "
        "machine with that disk, send a message to go on."
    )


def _embedded_gone_message(host: str, heard: str, silent_for: int) -> str:
    """The embedded mode has no worker to start: the server (or run_conversation) runs its
    own, and runs are pinned to that process's host name."""
    said = f"{heard} ({silent_for} s ago)"
    if host == settings.CANVAS_WORKER_HOST:
        return (
            f"This server's built-in worker (host {host!r}) {said}, so the run stopped. "
            "Send a message to go on; if nothing happens, restart the server."
        )
    return (
        f"The built-in worker of the server that ran this conversation (host {host!r}) {said}, "
        f"so the run stopped. This server's worker is host {settings.CANVAS_WORKER_HOST!r} "
        "and takes only its own runs: serve with the CANVAS_WORKER_HOST or state folder "
        "(CANVAS_VAR_DIR) that run had to go on."
    )


def closing_observations(events) -> list[BaseEvent]:
    """A result for each tool call the gone host left without one (a sub-agent call is
    answered from its children, as the runner's recovery does)."""
    return [
        interrupted_observation(action)
        for action in unanswered_actions(events)
        if action.tool not in SPAWNING_TOOLS
    ]


def _strand_handle(conversation_id: str, gone: WorkerHost) -> int:
    host = gone.host
    with transaction.atomic():
        row = (
            Conversation.objects.select_for_update()
            .filter(_unleased(), pk=conversation_id, status=Status.RUNNING, worker_host=host)
            .only("id", "team_id", "title", "worker_host", "run_slice", "run_slice_due_at", "agent")
            .first()
        )
        if row is None:
            return 0
        if settings.CANVAS_SHARED_WORKSPACES:
            # The workspace is on storage every worker mounts: let any worker take it.
            row.worker_host = ""
            schedule_next(row, save=False)  # saved below, with the host and the lease
        else:
            reason = f"worker host {host} is gone"
            error = AgentErrorEvent(code=HOST_GONE, message=gone_message(gone))
            # Take the (free) lease so the append is fenced against a runner starting now.
            row.lease_token = uuid.uuid4().hex
            row.save(update_fields=["lease_token"])
            history = history_refresh(conversation_id)
            events = [
                *closing_observations(history.events), error,
                *run_end_events(Status.ERROR, reason, history.state.run_id),
            ]  # fmt: skip
            store.append(conversation_id, events, lease_token=row.lease_token)
            notify_status_on_commit(
                conversation_id=conversation_id, team_id=row.team_id,
                status=Status.ERROR.value, reason=reason, title=row.title,
            )  # fmt: skip
            row.run_slice = None
        row.lease_token = None
        row.lease_expires_at = None
        row.save(update_fields=["worker_host", "run_slice", "run_slice_due_at", "lease_token",
                                "lease_expires_at", "updated_at"])  # fmt: skip
    return 1
