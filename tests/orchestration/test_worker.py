"""Runs through real Celery worker processes on Redis and Postgres."""

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from celery import current_app

from conversations import store
from conversations.events import ObservationEvent
from conversations.models import Conversation, ConversationEvent
from orchestration import services
from orchestration.chain.dispatch import RUN_SLICE_TASK, host_queue
from tests.conftest import holds_for, wait_for
from tests.runs import script

pytestmark = pytest.mark.worker


def status_of(conversation) -> str:
    return Conversation.objects.get(pk=conversation.pk).status


def seqs(conversation) -> list[int]:
    return list(
        ConversationEvent.objects.filter(conversation=conversation)
        .order_by("seq")
        .values_list("seq", flat=True)
    )


@pytest.fixture
def broker(settings) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(settings.REDIS_URL)
    yield client
    client.close()


def broker_idle(broker: redis.Redis) -> bool:
    """No message waits in any queue and none is delivered but unacked (tasks ack late)."""
    return broker.hlen("unacked") == 0 and not any(broker.scan_iter(_type="LIST"))


def test_scripted_multi_step_run_finishes_on_a_worker(start_worker, settings):
    start_worker()
    conversation = services.conversation_create(
        owner=None,
        model="scripted",
        prompt=script(
            {"tool": "file_editor",
             "args": {"command": "create", "path": "hello.py", "file_text": "print('hi')\n"}},
            {"tools": [{"tool": "terminal", "args": {"command": "python3 hello.py"}},
                       {"tool": "think", "args": {"thought": "it printed"}}]},
            {"tool": "finish", "args": {"message": "hello.py works"}},
        ),
    )  # fmt: skip
    wait_for(lambda: status_of(conversation) == "finished", 60, message="run to finish")
    events = [s.event for s in store.load(conversation.pk)]
    kinds = [e.type for e in events]
    assert kinds.count("tool.call") == 4 and kinds.count("tool.result") == 4
    terminal = next(e for e in events if e.type == "tool.result" and e.tool == "terminal")
    assert terminal.content.startswith("hi") and terminal.exit_code == 0
    batch = [e for e in events if e.type == "tool.call" and e.batch_size == 2]
    assert [e.batch_index for e in batch] == [0, 1]
    assert seqs(conversation) == list(range(1, len(events) + 1))


def test_killed_worker_mid_tool_is_completed_by_a_new_worker(start_worker):
    fast_recovery = {"CANVAS_LEASE_SECONDS": "3", "CANVAS_SWEEP_SECONDS": "1"}
    first = start_worker(beat=True, extra_env=fast_recovery)
    conversation = services.conversation_create(
        owner=None,
        model="scripted",
        prompt=script(
            {"tool": "terminal", "args": {"command": "echo started"}},
            {"tool": "terminal", "args": {"command": "touch sleeping.txt; sleep 6; echo slept"}},
            {"tool": "terminal", "args": {"command": "echo resumed > after-kill.txt"}},
            {"tool": "finish", "args": {"message": "survived"}},
        ),
    )

    sleeping = Path(conversation.workspace_path) / "sleeping.txt"  # all a command may write
    wait_for(sleeping.exists, 60, message="the sleep command to be running")
    first.kill()
    start_worker(beat=True, extra_env=fast_recovery)
    wait_for(lambda: status_of(conversation) == "finished", 90, message="recovery")

    events = [s.event for s in store.load(conversation.pk)]
    sleep_call = next(e for e in events if e.type == "tool.call" and "sleep 6" in e.arguments)
    result = next(
        e for e in events
        if isinstance(e, ObservationEvent) and e.tool_call_id == sleep_call.tool_call_id
    )  # fmt: skip
    assert result.interrupted and "interrupted" in result.content
    assert "slept" not in result.content
    marker = Path(conversation.workspace_path) / "after-kill.txt"  # all a command may write
    assert marker.read_text().strip() == "resumed"
    assert seqs(conversation) == list(range(1, len(events) + 1))
    assert sum(1 for e in events if e.type == "tool.result") == 4


def test_duplicate_task_delivery_runs_each_step_once(start_worker, dispatched, broker):
    conversation = services.conversation_create(
        owner=None,
        model="scripted",
        prompt=script(*[{"tool": "terminal", "args": {"command": "echo x >> count.txt"}}] * 3),
    )
    counter = Path(conversation.workspace_path) / "count.txt"  # all a command may write
    ((conversation_id, slice_id),) = dispatched
    start_worker()
    for _ in range(3):  # the broker delivers the same message several times
        current_app.send_task(RUN_SLICE_TASK, args=[conversation_id, slice_id])
    wait_for(lambda: status_of(conversation) == "finished", 60, message="run to finish")
    wait_for(lambda: broker_idle(broker), 30, message="every delivery to be handled and acked")
    assert counter.read_text().splitlines() == ["x", "x", "x"]
    kinds = [s.event.type for s in store.load(conversation.pk)]
    assert kinds.count("run.finished") == 1


def test_a_conversation_stays_on_the_host_that_holds_its_workspace(start_worker, broker):
    one_step = {"CANVAS_SLICE_STEPS": "1"}
    alpha = start_worker(extra_env={**one_step, "CANVAS_WORKER_HOST": "alpha"})
    conversation = services.conversation_create(
        owner=None,
        model="scripted",
        # Long enough that a second worker (which preloads LiteLLM) is up before it ends.
        prompt=script(
            *[{"tool": "terminal", "args": {"command": f"sleep 0.5; echo {i}"}} for i in range(24)]
        ),
    )
    wait_for(
        lambda: Conversation.objects.get(pk=conversation.pk).worker_host == "alpha",
        30, message="the first slice to pin the conversation",
    )  # fmt: skip
    start_worker(extra_env={**one_step, "CANVAS_WORKER_HOST": "beta"})
    alpha.stop()  # warm shutdown: the slice in flight completes and enqueues to host.alpha
    queue = host_queue("alpha")
    wait_for(lambda: broker.llen(queue), 30, message="the next slice to wait for alpha")
    stalled_at = Conversation.objects.get(pk=conversation.pk).last_seq
    holds_for(
        lambda: broker.llen(queue) == 1
        and Conversation.objects.get(pk=conversation.pk).last_seq == stalled_at,
        1.0, message="beta to leave alpha's slice alone",
    )  # fmt: skip
    assert status_of(conversation) == "running"  # beta never touched alpha's workspace

    start_worker(extra_env={**one_step, "CANVAS_WORKER_HOST": "alpha"})
    wait_for(lambda: status_of(conversation) == "finished", 60, message="alpha to finish it")
    kinds = [s.event.type for s in store.load(conversation.pk)]
    assert kinds.count("tool.result") == 25 and "agent.error" not in kinds
