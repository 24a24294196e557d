"""Judging a worker host gone on fresh evidence only: not during or right after a database
outage (which silences every host at once), never while a worker of it answers a ping; and a
run ended on a gone host says since when, and leaves no tool call without a result."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from celery import Celery
from django.utils import timezone

from conversations import store
from conversations.events import ActionEvent, AgentErrorEvent, ObservationEvent
from conversations.models import Conversation
from orchestration import services
from orchestration.chain.steady import fresh_grace, sweep_mark
from orchestration.chain.stranded import HOST_GONE, sweep_stranded_runs
from orchestration.chain.workers import host_announce, hosts_answering
from orchestration.models import SweepMark, WorkerHost
from tests.conftest import wait_for
from tests.faults.services import free_port
from tests.hosts import database_steady_for, pings_answered_by
from tests.runs import script

pytestmark = pytest.mark.django_db

GONE = 30.0
HEARTBEAT = 5.0


@pytest.fixture(autouse=True)
def periods(settings):
    settings.CANVAS_WORKER_GONE_SECONDS = GONE
    settings.CANVAS_WORKER_HEARTBEAT_SECONDS = HEARTBEAT
    settings.CANVAS_SWEEP_SECONDS = 5


def pinned_run(user, host: str) -> Conversation:
    """A running conversation pinned to `host` that no lease holds (its runner is between
    slices, or died with the database)."""
    prompt = script({"tool": "finish", "args": {"message": "done"}})
    conversation = services.conversation_create(owner=user, model="scripted", prompt=prompt)
    Conversation.objects.filter(pk=conversation.pk).update(
        worker_host=host, lease_token=None, lease_expires_at=None
    )
    return conversation


def silent_since(host: str, seconds: float) -> WorkerHost:
    """`host` announced itself, then nothing for `seconds`."""
    host_announce(host=host, queues=[f"host.{host}"], started_at=timezone.now())
    WorkerHost.objects.filter(host=host).update(
        last_seen=timezone.now() - timedelta(seconds=seconds)
    )
    return WorkerHost.objects.get(host=host)


def last_sweep(seconds_ago: float, *, steady_for: float = 3600) -> None:
    now = timezone.now()
    SweepMark.objects.update_or_create(
        pk=1,
        defaults={
            "swept_at": now - timedelta(seconds=seconds_ago),
            "steady_since": now - timedelta(seconds=steady_for),
        },
    )


def status_of(conversation) -> str:
    return Conversation.objects.get(pk=conversation.pk).status


# --- the steady period -------------------------------------------------------------------------


def test_sweeps_without_a_gap_count_up_and_a_gap_starts_again():
    assert sweep_mark() < 1  # no record (a new site, or one wiped): nothing known yet
    last_sweep(1, steady_for=100)
    assert 99 <= sweep_mark() <= 101
    last_sweep(35, steady_for=100)  # the database (or every sweeper) was away for 35 s
    assert sweep_mark() < 1
    assert sweep_mark() < 1  # the gap is over: this sweep followed the last one at once


# --- the judgement -----------------------------------------------------------------------------


def test_after_an_outage_longer_than_the_gone_period_a_live_host_keeps_its_runs(
    user, monkeypatch, dispatched
):
    asked = pings_answered_by(monkeypatch)  # not even a ping answers: freshness alone
    conversation = pinned_run(user, "alpha")
    silent_since("alpha", GONE + 5)  # the outage silenced it as long as the sweeper
    last_sweep(GONE + 5)
    assert sweep_stranded_runs() == 0  # the first sweep back: the database was away
    last_sweep(1, steady_for=fresh_grace() - 1)
    assert sweep_stranded_runs() == 0  # alpha has not had its heartbeat periods yet
    host_announce(host="alpha", queues=["host.alpha"])  # ...and within them it beats
    last_sweep(1, steady_for=fresh_grace() + 1)
    assert sweep_stranded_runs() == 0
    assert status_of(conversation) == "running" and asked == []


def test_a_host_still_silent_once_the_database_is_steady_is_gone(user, monkeypatch, dispatched):
    asked = pings_answered_by(monkeypatch)
    conversation = pinned_run(user, "ghost")
    silent_since("ghost", GONE + 5)
    last_sweep(GONE + 5)
    assert sweep_stranded_runs() == 0
    last_sweep(1, steady_for=fresh_grace() + 1)
    assert sweep_stranded_runs() == 1
    assert status_of(conversation) == "error" and asked == [{"ghost"}]


def test_a_host_whose_workers_answer_a_ping_is_never_gone(user, monkeypatch, dispatched):
    asked = pings_answered_by(monkeypatch, "alpha")
    database_steady_for(3600)
    alpha, ghost = pinned_run(user, "alpha"), pinned_run(user, "ghost")
    silent_since("alpha", 10 * GONE)  # its heartbeat cannot reach the database; its workers run
    silent_since("ghost", 10 * GONE)
    assert sweep_stranded_runs() == 1
    assert status_of(alpha) == "running" and status_of(ghost) == "error"
    assert asked == [{"alpha", "ghost"}]


def test_without_a_broker_to_ask_nobody_is_judged(user, monkeypatch, dispatched):
    import orchestration.chain.stranded

    monkeypatch.setattr(orchestration.chain.stranded, "hosts_answering", lambda hosts: None)
    database_steady_for(3600)
    conversation = pinned_run(user, "ghost")
    silent_since("ghost", 10 * GONE)
    assert sweep_stranded_runs() == 0
    assert status_of(conversation) == "running"


# --- the ping ----------------------------------------------------------------------------------


def test_a_ping_through_a_broker_that_is_down_answers_none_at_once(monkeypatch):
    import orchestration.chain.workers

    down = Celery("down", broker=f"redis://127.0.0.1:{free_port()}/0", set_as_current=False)
    monkeypatch.setattr(orchestration.chain.workers, "current_app", down)
    started = time.monotonic()
    assert hosts_answering({"ghost"}) is None
    assert time.monotonic() - started < 1.0


def test_a_ping_nobody_answers_names_no_host(monkeypatch):
    import orchestration.chain.workers

    answers = {"w1@x": [{"name": "celery"}, {"name": "host.alpha"}], "w2@y": None}

    class Inspect:
        def __init__(self, **_):
            pass

        def active_queues(self):
            return answers

    monkeypatch.setattr(orchestration.chain.workers.current_app.control, "inspect", Inspect)
    assert hosts_answering({"alpha", "ghost"}, timeout=0.1) == {"alpha"}
    answers.clear()
    assert hosts_answering({"alpha", "ghost"}, timeout=0.1) == set()


# --- what an ended run says --------------------------------------------------------------------


def test_a_run_ended_on_a_gone_host_says_since_when_and_answers_its_call(
    user, monkeypatch, dispatched
):
    pings_answered_by(monkeypatch)
    database_steady_for(3600)
    conversation = pinned_run(user, "ghost")
    call = ActionEvent(tool_call_id="call_0_0", tool="terminal", arguments='{"command": "ls"}')
    store.append(conversation.pk, [call])  # the host died with the command running
    ghost = silent_since("ghost", GONE + 60)
    assert sweep_stranded_runs() == 1

    events = [s.event for s in store.load(conversation.pk)]
    result = next(e for e in events if isinstance(e, ObservationEvent))
    error = next(e for e in events if isinstance(e, AgentErrorEvent))
    assert result.tool_call_id == "call_0_0" and result.interrupted and result.is_error
    assert events.index(call) < events.index(result) < events.index(error)
    assert error.code == HOST_GONE
    assert f"stopped sending heartbeats at {ghost.last_seen:%Y-%m-%d %H:%M:%S} UTC" in (
        error.message
    )
    assert "no worker of it answered a ping" in error.message
    assert "Start a worker" not in error.message
    assert [e.type for e in events[-2:]] == ["status.changed", "run.finished"]


def test_a_host_that_shut_down_or_never_announced_itself_is_named_so(user, monkeypatch, dispatched):
    pings_answered_by(monkeypatch)
    database_steady_for(3600)
    stopped, never = pinned_run(user, "stopped"), pinned_run(user, "never")
    silent_since("stopped", GONE + 1)
    WorkerHost.objects.filter(host="stopped").update(stopped_at=timezone.now())
    WorkerHost.objects.create(host="never", last_seen=timezone.now() - timedelta(seconds=GONE + 1))
    assert sweep_stranded_runs() == 2
    messages = {
        conversation: next(
            s.event.message for s in store.load(conversation.pk)
            if isinstance(s.event, AgentErrorEvent)
        )
        for conversation in (stopped, never)
    }  # fmt: skip
    assert "'stopped'" in messages[stopped] and "shut down at" in messages[stopped]
    assert "has not announced itself since it was first looked for at" in messages[never]


# --- the heartbeat after an outage -------------------------------------------------------------


def test_a_heartbeat_that_failed_is_tried_again_within_a_second(settings, monkeypatch):
    import orchestration.chain.workers as workers

    settings.CANVAS_WORKER_HEARTBEAT_SECONDS = 3
    beats: list[float] = []

    def announce(**_) -> None:
        beats.append(time.monotonic())
        if len(beats) <= 2:  # the database is away for the first two
            raise workers.connection.Database.OperationalError("the database is away")

    monkeypatch.setattr(workers, "host_announce", announce)
    presence = workers.Presence(["celery"]).start()
    try:
        wait_for(lambda: len(beats) >= 4, 10, message="four heartbeats")
    finally:
        presence.stop()
    gaps = [b - a for a, b in zip(beats, beats[1:], strict=False)]
    assert gaps[0] < 2 and gaps[1] < 2  # retried within a second, not the 3 s period
    assert gaps[2] > 2.5  # back to the period once a beat got through
