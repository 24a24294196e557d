"""canvas/broker.py: kombu's Redis channel survives the way Celery 5.7 closes a connection
that a Redis restart broke, while it holds an unacknowledged message.

Replays the consumer's own sequence (celery/worker/consumer/consumer.py,
on_connection_error_after_connected) on a private redis-server: `collect()` while Redis is
down, then `close()` once it is back, then the late ack of the message the task held."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import pytest
from kombu import Connection, Consumer, Exchange, Queue

import canvas.celery  # noqa: F401 - installs canvas.broker's guards, as in every worker
from tests.faults.services import PrivateRedis

TASKS = Queue("tasks", Exchange("tasks"), "tasks")
BROADCAST = Queue("broadcast", Exchange("broadcast", type="fanout"), auto_delete=True)
"""Like a worker's pidbox queue: a fanout queue its channel deletes when it closes."""


@pytest.fixture
def redis_server() -> Iterator[PrivateRedis]:
    server = PrivateRedis().start()
    yield server
    server.stop()


@pytest.mark.parametrize("back", [True, False], ids=["back-before-close", "down-at-close"])
def test_a_channel_holding_a_message_survives_a_redis_restart(redis_server, back):
    connection = Connection(redis_server.url)
    with connection.Producer() as producer:
        producer.publish({"slice": 1}, exchange=TASKS.exchange, routing_key="tasks",
                         declare=[TASKS])  # fmt: skip
    held = []
    consumer = Consumer(connection.default_channel, [TASKS, BROADCAST], callbacks=[
        lambda _body, message: held.append(message)
    ])  # fmt: skip
    consumer.consume()
    connection.drain_events(timeout=5)
    assert len(held) == 1, "the message was not delivered"
    with contextlib.suppress(socket.timeout):
        connection.drain_events(timeout=0.1)
    assert connection.default_channel._in_poll, "no BRPOP waits for its reply, as in a worker"

    redis_server.stop()
    connection.collect(socket_timeout=1)
    if back:
        redis_server.start()
    connection.close()  # kombu 5.7 alone: AttributeError(...'hostname') from _connparams
    held[0].ack()  # the task's late ack on the closed channel: left to the broker

    if not back:
        redis_server.start()
    with Connection(redis_server.url) as again, again.SimpleQueue("tasks") as queue:
        queue.put({"slice": 2})  # what the worker does next: reconnect and consume
        assert queue.get(timeout=5).payload == {"slice": 2}
