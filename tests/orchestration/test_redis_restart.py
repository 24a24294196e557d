"""A worker keeps consuming after its Redis restarts (a known failure mode of Celery on Redis).

Uses a private redis-server on its own port so the shared one is never disturbed."""

import json
import shutil
import socket
import subprocess

import pytest
import redis
from celery import Celery

from conversations.models import Conversation
from orchestration import services
from orchestration.dispatch import RUN_SLICE_TASK
from tests.conftest import wait_for

pytestmark = pytest.mark.worker


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivateRedis:
    def __init__(self, port: int) -> None:
        self.port = port
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [shutil.which("redis-server") or "redis-server", "--port", str(self.port),
             "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_for(self.answers, 10, 0.05, "private redis to start")

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


@pytest.fixture
def private_redis():
    redis = PrivateRedis(free_port())
    redis.start()
    yield redis
    redis.stop()


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
    url = f"redis://127.0.0.1:{private_redis.port}/0"
    broker = Celery("restart-test", broker=url, set_as_current=False)
    worker = start_worker(extra_env={"REDIS_URL": url})
    run_to_finish(broker, dispatched, "before the restart")
    # The status turns FINISHED inside the task, a moment before its late ack. Kill Redis in
    # that moment and kombu 5.7 crashes the worker while restoring the unacked message
    # (celery/celery#10205); a supervisor restarts it and the sweeper revives the run. This
    # test is about an idle worker reconnecting, so it waits for the ack.
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
