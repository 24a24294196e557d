"""A worker keeps consuming after its Redis restarts (a known failure mode of Celery on Redis).

Uses a private redis-server on its own port so the shared one is never disturbed."""

import json

import pytest
import redis
from celery import Celery

from conversations.models import Conversation
from orchestration import services
from orchestration.chain.dispatch import RUN_SLICE_TASK
from tests.conftest import wait_for
from tests.faults.services import PrivateRedis

pytestmark = pytest.mark.worker


@pytest.fixture
def private_redis():
    server = PrivateRedis().start()
    yield server
    server.stop()


def run_to_finish(broker: Celery, dispatched: list, text: str) -> None:
    conversation = services.conversation_create(
        owner=None, model="scripted", prompt=json.dumps({"script": [{"say": text}]})
    )
    conversation_id, slice_id = dispatched.pop()
    broker.send_task(RUN_SLICE_TASK, args=[conversation_id, slice_id])
    wait_for(
        lambda: Conversation.objects.get(pk=conversation.pk).status == "finished",
        60, 0.1, f"conversation {text!r} to finish",
    )  # fmt: skip


@pytest.mark.timeout(180)
def test_worker_consumes_again_after_redis_restarts(
    start_worker, private_redis, dispatched, tmp_path
):
    url = private_redis.url
    broker = Celery("restart-test", broker=url, set_as_current=False)
    worker = start_worker(extra_env={"REDIS_URL": url})
    run_to_finish(broker, dispatched, "before the restart")
    # The status turns FINISHED inside the task, a moment before its late ack. This test is
    # about an idle worker reconnecting, so it waits for the ack; a worker that holds an
    # unacked slice through a restart is tests/faults/test_services.py's (canvas/broker.py).
    unacked = redis.Redis.from_url(url)
    wait_for(lambda: unacked.hlen("unacked") == 0, 10, 0.05, "the last task to be acked")
    unacked.close()

    private_redis.stop()
    wait_for(
        lambda: "Connection to broker lost" in worker.log_path.read_text(),
        30, 0.1, "the worker to notice the broken connection",
    )  # fmt: skip
    private_redis.start()
    try:
        run_to_finish(broker, dispatched, "after the restart")
    except AssertionError as exc:
        logs = "\n".join(p.read_text()[-4000:] for p in tmp_path.glob("*.log"))
        raise AssertionError(f"{exc}\nworker log:\n{logs}") from exc
