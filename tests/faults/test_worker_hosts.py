"""Worker hosts: presence, warm hand-over, and runs stranded on a host that never returns."""

import os
import signal
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone

from conversations import store
from conversations.events import AgentErrorEvent, ObservationEvent
from conversations.models import Conversation
from orchestration import services
from orchestration.chain.stranded import HOST_GONE, sweep_stranded_runs
from orchestration.chain.sweep import REVIVED
from orchestration.chain.workers import host_alive, host_announce, host_depart
from orchestration.models import WorkerHost
from tests.conftest import wait_for
from tests.hosts import database_steady_for, pings_answered_by
from tests.runs import script

FAST = {
    "CANVAS_LEASE_SECONDS": "3",
    "CANVAS_SWEEP_SECONDS": "1",
    "CANVAS_WORKER_HEARTBEAT_SECONDS": "0.5",
    "CANVAS_WORKER_GONE_SECONDS": "3",
}


def status_of(conversation) -> str:
    return Conversation.objects.get(pk=conversation.pk).status


def events_of(conversation) -> list:
    return [s.event for s in store.load(conversation.pk)]


def sleepy(steps: int, seconds: float = 0.3) -> str:
    return script(
        *[{"tool": "terminal", "args": {"command": f"sleep {seconds}; echo {i}"}}
          for i in range(steps)],
        {"tool": "finish", "args": {"message": "done"}},
    )  # fmt: skip


def pinned_running(user, host: str) -> Conversation:
    conversation = services.conversation_create(owner=user, model="scripted", prompt=sleepy(3))
    Conversation.objects.filter(pk=conversation.pk).update(
        worker_host=host, lease_token=None, lease_expires_at=None
    )
    return conversation


# --- presence and the stranded-run sweep, in this process -------------------------------------


@pytest.fixture
def judged(db, monkeypatch):
    """The database has been there for an hour, and no worker answers a ping (the judgement
    itself: tests/orchestration/test_stranded.py)."""
    database_steady_for(3600)
    pings_answered_by(monkeypatch)


@pytest.mark.django_db
def test_a_host_is_alive_while_it_beats_and_not_after_it_departs(settings):
    settings.CANVAS_WORKER_HEARTBEAT_SECONDS = 5
    host_announce(host="alpha", queues=["celery", "host.alpha"], started_at=timezone.now())
    row = WorkerHost.objects.get(host="alpha")
    assert row.queues == ["celery", "host.alpha"] and row.version and row.started_at
    assert host_alive("alpha") and not host_alive("beta")
    host_depart(host="alpha")
    assert not host_alive("alpha")
    host_announce(host="alpha", queues=["celery"])  # another process of the host still beats
    assert host_alive("alpha")
    WorkerHost.objects.filter(host="alpha").update(last_seen=timezone.now() - timedelta(seconds=16))
    assert not host_alive("alpha")


@pytest.mark.django_db
def test_a_run_on_a_gone_host_ends_naming_it(user, settings, dispatched, judged):
    settings.CANVAS_WORKER_GONE_SECONDS = 60
    conversation = pinned_running(user, "ghost")
    WorkerHost.objects.create(host="ghost", last_seen=timezone.now() - timedelta(seconds=30))
    assert sweep_stranded_runs() == 0  # gone, but not for long enough
    WorkerHost.objects.filter(host="ghost").update(last_seen=timezone.now() - timedelta(seconds=61))
    assert sweep_stranded_runs() == 1
    row = Conversation.objects.get(pk=conversation.pk)
    assert row.status == "error" and row.run_slice is None and row.lease_token is None
    events = events_of(conversation)
    error = next(e for e in events if isinstance(e, AgentErrorEvent))
    assert error.code == HOST_GONE and "'ghost'" in error.message
    assert [e.type for e in events[-2:]] == ["status.changed", "run.finished"]
    assert "ghost" in events[-1].reason
    assert sweep_stranded_runs() == 0


@pytest.mark.django_db
def test_a_host_never_heard_of_gets_the_whole_gone_period(user, settings, dispatched, judged):
    settings.CANVAS_WORKER_GONE_SECONDS = 60
    conversation = pinned_running(user, "never-seen")
    assert sweep_stranded_runs() == 0
    assert WorkerHost.objects.filter(host="never-seen").exists()  # noticed now
    assert status_of(conversation) == "running"


@pytest.mark.django_db
def test_a_live_host_or_a_held_lease_keeps_its_runs(user, settings, dispatched, judged):
    settings.CANVAS_WORKER_GONE_SECONDS = 60
    alive = pinned_running(user, "alpha")
    host_announce(host="alpha", queues=["host.alpha"])
    held = pinned_running(user, "ghost")
    WorkerHost.objects.create(host="ghost", last_seen=timezone.now() - timedelta(seconds=61))
    Conversation.objects.filter(pk=held.pk).update(
        lease_token="x", lease_expires_at=timezone.now() + timedelta(seconds=30)
    )
    assert sweep_stranded_runs() == 0
    assert status_of(alive) == status_of(held) == "running"


@pytest.mark.django_db
def test_with_shared_workspaces_a_run_on_a_gone_host_moves(user, settings, monkeypatch, judged):
    import orchestration.chain.dispatch

    sent = []
    monkeypatch.setattr(
        orchestration.chain.dispatch, "enqueue_slice_on_commit",
        lambda pk, slice_id, **routing: sent.append((str(pk), slice_id, routing)),
    )  # fmt: skip
    settings.CANVAS_SHARED_WORKSPACES = True
    settings.CANVAS_WORKER_GONE_SECONDS = 60
    conversation = pinned_running(user, "ghost")
    sent.clear()  # its first slice
    long_ago = timezone.now() - timedelta(seconds=61)
    Conversation.objects.filter(pk=conversation.pk).update(run_slice_due_at=long_ago)
    WorkerHost.objects.create(host="ghost", last_seen=long_ago)
    assert sweep_stranded_runs() == 1
    row = Conversation.objects.get(pk=conversation.pk)
    assert row.status == "running" and row.worker_host == ""
    assert sent == [(str(conversation.pk), row.run_slice, {"worker_host": "", "agent": ""})]
    # Due like every sent slice, so the sweeper re-sends it should the message be lost.
    assert row.run_slice_due_at is not None and row.run_slice_due_at > timezone.now()
    assert "agent.error" not in [e.type for e in events_of(conversation)]


@pytest.mark.django_db
def test_the_page_says_which_host_a_running_conversation_waits_for(user, client, dispatched):
    conversation = pinned_running(user, "ghost")
    client.force_login(user)
    url = reverse("conversation-detail", args=[conversation.pk])
    page = client.get(url).content.decode()
    assert "Waiting for worker host <code>ghost</code>" in page
    host_announce(host="ghost", queues=["host.ghost"])
    assert "Waiting for worker host" not in client.get(url).content.decode()


# --- real workers -----------------------------------------------------------------------------


@pytest.mark.worker
def test_a_killed_host_that_never_returns_ends_its_run_naming_it(start_worker, user):
    ghost = start_worker(extra_env={**FAST, "CANVAS_WORKER_HOST": "ghost"})
    wait_for(lambda: WorkerHost.objects.filter(host="ghost").exists(), 10, message="announce")
    conversation = services.conversation_create(owner=user, model="scripted", prompt=sleepy(40))
    wait_for(lambda: len(events_of(conversation)) > 6, 30, message="the run to get going")
    assert Conversation.objects.get(pk=conversation.pk).worker_host == "ghost"
    start_worker(beat=True, extra_env={**FAST, "CANVAS_WORKER_HOST": "alpha"})
    ghost.kill()
    killed_at = time.monotonic()
    wait_for(lambda: status_of(conversation) == "error", 60, message="the run to end")
    took = time.monotonic() - killed_at
    # The sweeper may first mark the run revived (REVIVED, a note, not an error).
    error = next(e for e in events_of(conversation)
                 if isinstance(e, AgentErrorEvent) and e.code != REVIVED)  # fmt: skip
    assert error.code == HOST_GONE and "'ghost'" in error.message
    # Lease + gone period + a sweep is ~7 s; three times that, and far under the 90 s default
    # gone period that would end it without FAST.
    assert took < 3 * (3 + 3 + 1), took
    print(f"killed host -> run ended: {took:.1f} s")


@pytest.mark.worker
def test_with_shared_workspaces_another_worker_finishes_a_gone_hosts_run(start_worker, user):
    shared = {**FAST, "CANVAS_SHARED_WORKSPACES": "true"}
    ghost = start_worker(extra_env={**shared, "CANVAS_WORKER_HOST": "ghost"})
    # The run waits at its third command until the test opens the gate, so ghost is surely
    # mid-run when it dies, however slowly alpha starts on a loaded machine.
    gated = "for t in $(seq 600); do test -e gate && break; sleep 0.1; done; echo gated"
    prompt = script(
        *[{"tool": "terminal", "args": {"command": f"sleep 0.3; echo {i}"}} for i in range(2)],
        {"tool": "terminal", "args": {"command": gated}},
        *[{"tool": "terminal", "args": {"command": f"sleep 0.3; echo {i}"}} for i in range(8)],
        {"tool": "finish", "args": {"message": "done"}},
    )  # fmt: skip
    conversation = services.conversation_create(owner=user, model="scripted", prompt=prompt)
    wait_for(lambda: len(events_of(conversation)) > 6, 30, message="the run to get going")
    start_worker(beat=True, extra_env={**shared, "CANVAS_WORKER_HOST": "alpha"})
    ghost.kill()
    workspace = Path(Conversation.objects.get(pk=conversation.pk).workspace_path)
    (workspace / "gate").touch()
    wait_for(lambda: status_of(conversation) == "finished", 90, message="alpha to finish it")
    assert Conversation.objects.get(pk=conversation.pk).worker_host == "alpha"
    errors = [e.code for e in events_of(conversation) if isinstance(e, AgentErrorEvent)]
    assert set(errors) <= {REVIVED}  # at most the note that another worker took the run over


@pytest.mark.worker
def test_a_warm_shutdown_hands_the_run_over_at_a_step_boundary(start_worker, user, client):
    long_slices = {**FAST, "CANVAS_SLICE_STEPS": "1000", "CANVAS_SLICE_SECONDS": "1000",
                   "CANVAS_WORKER_HOST": "alpha"}  # fmt: skip
    first = start_worker(extra_env=long_slices)
    conversation = services.conversation_create(owner=user, model="scripted", prompt=sleepy(60))
    wait_for(lambda: len(events_of(conversation)) > 6, 30, message="the run to get going")
    os.killpg(first.proc.pid, signal.SIGTERM)
    stopping = time.monotonic()
    first.proc.wait(10)  # not the 60 x 0.3 s the run still has to go
    took = time.monotonic() - stopping
    print(f"warm shutdown took {took:.1f} s")
    row = Conversation.objects.get(pk=conversation.pk)
    assert row.status == "running" and row.lease_token is None and row.run_slice
    assert not host_alive("alpha")  # it said goodbye

    client.force_login(user)
    page = client.get(reverse("conversation-detail", args=[conversation.pk])).content.decode()
    assert "Waiting for worker host <code>alpha</code>" in page

    start_worker(extra_env=long_slices)  # the same host comes back (a restarted container)
    wait_for(lambda: status_of(conversation) == "finished", 60, message="the run to finish")
    events = events_of(conversation)
    results = [e for e in events if isinstance(e, ObservationEvent)]
    assert not any(e.interrupted for e in results)
    assert "agent.error" not in [e.type for e in events]
    assert len(results) == 61
