"""Fan-out of appended events to websocket consumers through the channel layer.

A message here is a hint, not a delivery guarantee: the channel layer is at-most-once, so a
consumer that sees a gap reads the missing seqs from the database. Publishing goes through one
long-lived background loop so that a worker appending thousands of events keeps one connection
to Redis instead of opening one per append.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from typing import Any

from channels.layers import get_channel_layer

logger = logging.getLogger(__name__)

EVENTS_MESSAGE_TYPE = "conversation.events"
INLINE_PAYLOAD_LIMIT = 64_000
"""Bytes of JSON above which a hint carries seqs only and consumers read the rows."""


def conversation_group(conversation_id: uuid.UUID | str) -> str:
    return f"conversation.{uuid.UUID(str(conversation_id)).hex}"


class _Publisher:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[tuple[str, dict[str, Any]]] | None = None

    def _ensure_started(self) -> tuple[asyncio.AbstractEventLoop, asyncio.Queue]:
        with self._lock:
            if self._loop is None or not self._loop.is_running():
                ready = threading.Event()
                self._loop = asyncio.new_event_loop()
                threading.Thread(
                    target=self._run,
                    args=(self._loop, ready),
                    name="canvas-publisher",
                    daemon=True,
                ).start()
                ready.wait()
            assert self._queue is not None
            return self._loop, self._queue

    def _run(self, loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        self._queue = asyncio.Queue()
        loop.create_task(self._drain(self._queue))
        ready.set()
        loop.run_forever()

    async def _drain(self, queue: asyncio.Queue) -> None:
        layer = get_channel_layer()
        while True:
            group, message = await queue.get()
            try:
                await layer.group_send(group, message)
            except Exception as exc:  # a lost hint is recovered by the consumer's catch-up read
                logger.warning("channel layer publish failed for %s: %r", group, exc)

    def publish(self, group: str, message: dict[str, Any]) -> None:
        loop, queue = self._ensure_started()
        loop.call_soon_threadsafe(queue.put_nowait, (group, message))


_publisher = _Publisher()


def publish_events(
    conversation_id: uuid.UUID | str, records: list[dict[str, Any]], *, status: str
) -> None:
    """Send a hint that `records` (API-shaped dicts with `seq`) were committed."""
    if not records:
        return
    inline = sum(len(str(r)) for r in records) <= INLINE_PAYLOAD_LIMIT
    _publisher.publish(
        conversation_group(conversation_id),
        {
            "type": EVENTS_MESSAGE_TYPE,
            "first_seq": records[0]["seq"],
            "last_seq": records[-1]["seq"],
            "status": status,
            "records": records if inline else None,
        },
    )
