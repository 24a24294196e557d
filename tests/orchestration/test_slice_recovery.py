"""Slices that meet a lost message, a broker that refuses the hand-over, or a dropped database
connection: the run goes on (issue 9 defect 3). Driven by hand, no worker."""

from __future__ import annotations

import time

import psycopg
import pytest
from django.db import connection
from kombu.exceptions import OperationalError as BrokerError

import orchestration.chain.dispatch
from conversations import store
from conversations.models import Conversation
from orchestration import services
from orchestration.chain.slices import run_slice
from orchestration.chain.sweep import sweep_runs
from tests.conftest import _database_url, wait_for
from tests.runs import drive, script

pytestmark = pytest.mark.django_db(transaction=True)

SWEEP = 1.0


@pytest.fixture
def broker(monkeypatch) -> list[tuple[str, str]]:
    """The broker as slices see it: `sent` holds what it took; set `broker.down` to refuse."""

    class Broker(list):
        down = False

    sent = Broker()

    def send_slice(conversation_id, slice_id, **_routing) -> None:
        if sent.down:
            raise BrokerError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
        sent.append((str(conversation_id), slice_id))

    monkeypatch.setattr(orchestration.chain.dispatch, "send_slice", send_slice)
    return sent


def kinds(conversation) -> list[str]:
    return [s.event.type for s in store.load(conversation.pk)]


def resent_within(seconds: float) -> float:
    """Sweep as often as possible; the seconds until the sweeper re-sent something."""
    started = time.monotonic()
    wait_for(lambda: sweep_runs() > 0, seconds, 0.05, f"a re-send within {seconds} s")
    return time.monotonic() - started


def test_a_lost_slice_message_is_resent_within_two_sweep_periods(broker, settings):
    settings.CANVAS_SWEEP_SECONDS = SWEEP
    conversation = services.conversation_create(
        owner=None, model="scripted", prompt=script({"say": "hi"})
    )
    ((conversation_id, slice_id),) = broker
    broker.clear()  # the message is lost (a Redis FLUSHALL, a crashed broker)
    assert sweep_runs() == 0  # a slice just sent is not lost yet: no duplicate
    waited = resent_within(2 * SWEEP)
    assert waited <= 2 * SWEEP
    # The same slice id again: should the first message turn up after all, only one runs.
    assert broker == [(conversation_id, slice_id)]
    drive(broker)
    assert kinds(conversation)[-1] == "run.finished"


def test_a_hand_over_the_broker_refuses_is_left_for_the_sweeper(broker, settings):
    settings.CANVAS_SWEEP_SECONDS = SWEEP
    settings.CANVAS_SLICE_STEPS = 1
    conversation = services.conversation_create(
        owner=None, model="scripted",
        prompt=script({"tool": "think", "args": {"thought": "a"}}, {"say": "done"}),
    )  # fmt: skip
    ((conversation_id, slice_id),) = broker
    broker.clear()
    broker.down = True  # Redis restarts while the slice runs
    assert run_slice(conversation_id, slice_id) is None  # no crash
    row = Conversation.objects.get(pk=conversation_id)
    assert row.status == "running" and row.lease_token is None
    assert row.run_slice not in (None, slice_id)  # the row names the next slice
    assert broker == []
    broker.down = False
    resent_within(2 * SWEEP)
    assert broker == [(conversation_id, row.run_slice)]
    drive(broker)
    assert kinds(conversation)[-1] == "run.finished"
    assert kinds(conversation).count("tool.result") == 1


def test_a_slice_survives_a_dropped_database_connection_at_claim(broker):
    conversation = services.conversation_create(
        owner=None, model="scripted", prompt=script({"say": "hi"})
    )
    ((conversation_id, slice_id),) = broker
    broker.clear()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    # What a Postgres restart or an operator's pg_terminate_backend does to a worker.
    with psycopg.connect(
        _database_url().replace(f"/{connection.settings_dict['NAME']}", "/postgres"),
        autocommit=True,
    ) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
    assert run_slice(conversation_id, slice_id) is None
    assert kinds(conversation)[-1] == "run.finished"


def test_a_busy_run_keeps_its_place_slice_after_slice(broker, settings):
    settings.CANVAS_SLICE_STEPS = 1
    conversation = services.conversation_create(
        owner=None, model="scripted",
        prompt=script(*[{"tool": "think", "args": {"thought": str(i)}} for i in range(3)],
                      {"say": "done"}),
    )  # fmt: skip
    ((conversation_id, slice_id),) = broker
    broker.clear()
    assert run_slice(conversation_id, slice_id, keep_place_for=30) is None
    # Four slices of one step each ran in this call; none went back through the queue.
    assert kinds(conversation)[-1] == "run.finished"
    assert broker == []
    assert run_slice(conversation_id, slice_id) is None  # the first slice's duplicate: no-op
    assert kinds(conversation).count("run.finished") == 1


def test_a_run_past_its_place_budget_goes_to_the_back_of_the_queue(broker, settings):
    settings.CANVAS_SLICE_STEPS = 1
    services.conversation_create(
        owner=None, model="scripted",
        prompt=script({"tool": "think", "args": {"thought": "a"}}, {"say": "done"}),
    )  # fmt: skip
    ((conversation_id, slice_id),) = broker
    broker.clear()
    assert run_slice(conversation_id, slice_id, keep_place_for=0) is None
    ((_, next_slice),) = broker
    assert next_slice != slice_id
    assert Conversation.objects.get(pk=conversation_id).run_slice == next_slice
