"""Duplicate deliveries of one slice, and 20 run requests at once on one conversation."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from conversations.models import Conversation
from orchestration import run_control, services
from orchestration.chain.dispatch import RUN_SLICE_TASK
from tests.conftest import wait_for
from tests.runs import script

from .checks import assert_log_whole, assert_no_overlap, assert_nothing_running, marked_command

pytestmark = [pytest.mark.faults, pytest.mark.worker]


def status_of(conversation) -> str:
    return Conversation.objects.get(pk=conversation.pk).status


def test_duplicate_deliveries_of_a_slice_run_each_step_once(stack, fault_broker):
    steps = [
        {"tool": "terminal", "args": {"command": marked_command(stack.marker, f"c{i}", 0.3)}}
        for i in range(4)
    ]
    conversation = services.conversation_create(owner=None, model="scripted", prompt=script(*steps))
    slice_id = Conversation.objects.get(pk=conversation.pk).run_slice
    for _ in range(4):  # the broker hands the same message out again
        fault_broker.send_task(RUN_SLICE_TASK, args=[str(conversation.pk), slice_id])
    stack.start_worker()
    stack.start_worker()
    wait_for(lambda: status_of(conversation) == "finished", 60, message="the run to finish")

    events = assert_log_whole(conversation.pk)
    assert [e.type for e in events].count("run.finished") == 1
    lines = assert_no_overlap(Path(conversation.workspace_path))
    assert lines == [f"{kind} c{i}" for i in range(4) for kind in ("start", "end")]
    assert_nothing_running(stack.marker)


def test_twenty_concurrent_run_requests_start_exactly_one_run(stack):
    conversation = services.conversation_create(
        owner=None, model="scripted",
        prompt=script({"tool": "terminal", "args": {"command": marked_command(stack.marker, "a", 0.2)}},
                      {"say": "first run done"}),
    )  # fmt: skip
    first = stack.start_worker()
    wait_for(lambda: status_of(conversation) != "running", 60, message="the first run to end")
    first.stop()  # else a second run could end between two requests and a third start legally

    barrier = threading.Barrier(20)
    outcomes: list[str] = []

    def request() -> None:
        from django.db import connection

        barrier.wait()
        try:
            run_control.conversation_run(conversation_id=conversation.pk, by=None)
            outcomes.append("started")
        except run_control.Conflict:
            outcomes.append("conflict")
        finally:
            connection.close()

    threads = [threading.Thread(target=request) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(outcomes) == ["conflict"] * 19 + ["started"]
    stack.start_worker()
    wait_for(lambda: status_of(conversation) != "running", 60, message="the second run to end")

    events = assert_log_whole(conversation.pk)
    assert [e.type for e in events].count("run.started") == 2
    assert_no_overlap(Path(conversation.workspace_path))
    assert_nothing_running(stack.marker)
