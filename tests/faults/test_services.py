"""Redis and Postgres go away mid-run (restart, FLUSHALL, a terminated backend): the run
continues within the target, nothing lost, duplicated or overlapping."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis as redis_client
from django.db import connection

from conversations.models import Conversation
from orchestration import services
from tests.conftest import holds_for, wait_for
from tests.runs import script

from .checks import (
    Fault,
    assert_log_whole,
    assert_no_overlap,
    assert_nothing_running,
    marked_command,
    status_of,
    wait_started,
)

pytestmark = [pytest.mark.faults, pytest.mark.worker]

RECOVERY_TARGET = 10.0
"""Seconds the run may stand still, with a 2 s lease and a 1 s sweep (stack.FAST_RECOVERY)."""

STEPS = 12

EVERY_SLICE_THROUGH_THE_BROKER = {"CANVAS_SLICE_STEPS": "1", "CANVAS_TASK_SECONDS": "0"}
"""Each step its own slice, each slice its own message: the fault meets a hand-over."""


def steady_run_under_way(stack) -> Conversation:
    """Two workers on a steady run that has reached its fourth command: where the fault hits."""
    stack.start_worker(**EVERY_SLICE_THROUGH_THE_BROKER)
    stack.start_worker(**EVERY_SLICE_THROUGH_THE_BROKER)
    conversation = services.conversation_create(
        owner=None, model="scripted",
        prompt=script(*[
            {"tool": "terminal", "args": {"command": marked_command(stack.marker, f"c{i}", 0.3)}}
            for i in range(STEPS)
        ], {"tool": "finish", "args": {"message": "done"}}),
    )  # fmt: skip
    wait_started(conversation, "c3")
    return conversation


def assert_run_went_on(stack, conversation, fault: Fault) -> float:
    wait_for(lambda: _finished(conversation), 90, message=f"the run to finish\n{stack.logs()}")
    assert_log_whole(conversation.pk)
    lines = assert_no_overlap(Path(conversation.workspace_path))
    assert [line for line in lines if line.startswith("end")] == [f"end c{i}" for i in range(STEPS)]
    assert_nothing_running(stack.marker)
    stall = fault.longest_stall()
    assert stall < RECOVERY_TARGET, f"the run stood still for {stall:.1f}s"
    return stall


def _finished(conversation) -> bool:
    try:
        return status_of(conversation) == "finished"
    except Exception:  # the test's own connection died with the server: take a new one
        connection.close()
        return False


@pytest.mark.parametrize("fault", ["restart", "flushall"])
def test_redis_goes_away_mid_run(stack, fault):
    conversation = steady_run_under_way(stack)
    hit = Fault.now(conversation.pk)
    if fault == "restart":
        stack.redis.restart()  # no persistence: queued and unacked messages are gone
    else:
        redis_client.Redis.from_url(stack.redis.url).flushall()
    assert_run_went_on(stack, conversation, hit)


HELD_SECONDS = 8
"""How long the command runs that the worker holds its slice for while Redis goes away: it
ends after Redis is back, so its late ack meets the closed channel too."""


@pytest.mark.parametrize("outage", [0, 3], ids=["restart", "3s-outage"])
def test_redis_restarts_while_a_worker_holds_an_unacked_slice(stack, outage):
    """Celery 5.7 with kombu 5.7 stopped such a worker ("Unrecoverable error:
    AttributeError(...'hostname')", canvas/broker.py): it stays up and finishes the run."""
    worker = stack.start_worker()
    conversation = services.conversation_create(
        owner=None, model="scripted",
        prompt=script(
            {"tool": "terminal", "args": {"command": marked_command(stack.marker, "c0", HELD_SECONDS)}},
            {"tool": "terminal", "args": {"command": marked_command(stack.marker, "c1", 0.1)}},
            {"tool": "finish", "args": {"message": "done"}},
        ),
    )  # fmt: skip
    wait_started(conversation, "c0")
    held = redis_client.Redis.from_url(stack.redis.url)
    assert held.hlen("unacked") >= 1, "the slice running c0 is not held unacked"
    held.close()
    stack.redis.stop()
    time.sleep(outage)
    stack.redis.start()
    back = time.monotonic()
    wait_for(lambda: _finished(conversation), 90, message=f"the run to finish\n{stack.logs()}")
    assert_log_whole(conversation.pk)
    assert assert_no_overlap(Path(conversation.workspace_path)) == [
        "start c0",
        "end c0",
        "start c1",
        "end c1",
    ]
    try:
        holds_for(lambda: worker.proc.poll() is None, 60 - (time.monotonic() - back), 0.5)
    except AssertionError as exc:
        raise AssertionError(f"the worker stopped:\n{worker.tail(6000)}") from exc
    assert "Unrecoverable error" not in worker.log_path.read_text(), worker.tail()


@pytest.mark.parametrize("fault", ["restart", "terminate"])
def test_postgres_goes_away_mid_run(stack, fault):
    conversation = steady_run_under_way(stack)
    hit = Fault.now(conversation.pk)
    if fault == "restart":
        stack.postgres.restart("immediate")  # a crash: every connection dropped at once
    else:
        stack.postgres.terminate_backends(stack.database)
    connection.close()
    assert_run_went_on(stack, conversation, hit)
