"""Fan-out of appended events to websocket consumers through the channel layer.

A message here is a hint, not a delivery guarantee: the channel layer is at-most-once, so a
consumer that sees a gap reads the missing seqs from the database. Publishing goes through one
background thread per process, so an append never waits on Redis and a worker appending
thousands of events sends them in a few batches over one connection.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import uuid
from collections.abc import Iterable
from typing import Any

from channels.layers import get_channel_layer

logger = logging.getLogger(__name__)

EVENTS_MESSAGE_TYPE = "conversation.events"
TREE_MESSAGE_TYPE = "conversation.tree"
"""A hint that a conversation's agent tree changed (a descendant's status or steps): pages
re-read the tree. It carries no seqs: it says nothing about the conversation's own log."""
DELTA_MESSAGE_TYPE = "conversation.delta"
"""Live text of an external agent's message, thought or tool call while it streams: shown at
once, never stored (the log gets the aggregated event when it is complete). Lost deltas are
harmless: the stored event replaces whatever a page showed of them."""
INLINE_PAYLOAD_LIMIT = 64_000
"""Bytes of JSON above which a hint carries seqs only and consumers read the rows."""


def conversation_group(conversation_id: uuid.UUID | str) -> str:
    return f"conversation.{uuid.UUID(str(conversation_id)).hex}"


class _Publisher:
    """One background thread per process that sends hints in batches.

    Appenders only add to a list and wake the thread when it sleeps; the thread takes
    everything pending, merges each conversation's contiguous hints into one message and
    sends the lot. A layer that offers `group_send_batch` (canvas.layers' Redis layer) gets
    the batch in one call, one round trip per Redis host; any other layer gets `group_send`
    per message on the thread's own event loop.
    """

    def __init__(self) -> None:
        self._wakeup = threading.Condition()
        self._pending: list[tuple[str, dict[str, Any]]] = []
        self._pid = 0

    def publish(self, group: str, message: dict[str, Any]) -> None:
        with self._wakeup:
            if self._pid != os.getpid():  # first use, or a forked child (a Celery worker)
                self._pid, self._pending = os.getpid(), []
                threading.Thread(target=self._run, name="canvas-publisher", daemon=True).start()
            self._pending.append((group, message))
            if len(self._pending) == 1:
                self._wakeup.notify()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        while True:
            with self._wakeup:
                while not self._pending:
                    self._wakeup.wait()
                batch, self._pending = self._pending, []
            try:
                # Asked per batch, never kept: the layer is the one the registry holds now,
                # the one consumers subscribe through (an in-memory layer kept from a lost
                # creation race would publish to nobody for the life of the process).
                self._send(get_channel_layer(), loop, coalesce(batch))
            except Exception as exc:  # a lost hint is recovered by the consumer's catch-up
                logger.warning("channel layer publish failed: %r", exc)

    @staticmethod
    def _send(layer: Any, loop: asyncio.AbstractEventLoop, batch: list[tuple[str, dict]]) -> None:
        # Looked up on the class: channels_redis layers answer unknown attributes through
        # __getattr__, which needs a running event loop.
        if hasattr(type(layer), "group_send_batch"):
            layer.group_send_batch(batch)
            return
        for group, message in batch:
            loop.run_until_complete(layer.group_send(group, message))


def coalesce(batch: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """Merge each conversation's hints whose seqs run on without a gap, in seq order.

    Hints of one conversation can arrive out of order (threads commit in one order and
    publish in another) or with holes (another process appended in between); consumers
    forward inline records only when they continue their last seq, so a merged message must
    hold one contiguous run. Messages without seqs (TREE_MESSAGE_TYPE) pass through as
    they are, one per group per batch: a second "the tree changed" adds nothing.
    """
    by_group: dict[str, list[dict[str, Any]]] = {}
    merged: list[tuple[str, dict[str, Any]]] = []
    unsequenced: set[tuple[str, str]] = set()
    for group, message in batch:
        if message.get("type") == DELTA_MESSAGE_TYPE:  # each one carries new text
            merged.append((group, message))
            continue
        if "first_seq" not in message:
            key = (group, message.get("type", ""))
            if key not in unsequenced:
                unsequenced.add(key)
                merged.append((group, message))
            continue
        by_group.setdefault(group, []).append(message)
    for group, messages in by_group.items():
        messages.sort(key=lambda m: m["first_seq"])
        run = _Run(messages[0])
        for message in messages[1:]:
            if not run.extend(message):
                merged.append((group, run.message))
                run = _Run(message)
        merged.append((group, run.message))
    return merged


class _Run:
    """One merged message and the size of its inline records, kept as it grows."""

    def __init__(self, message: dict[str, Any]) -> None:
        self.message = message
        records = message["records"]
        self.size = _size(records) if records is not None else 0

    def extend(self, message: dict[str, Any]) -> bool:
        """Append a hint that continues this run; False (and no change) when it doesn't."""
        if message["first_seq"] != self.message["last_seq"] + 1:
            return False
        records, ours = message["records"], self.message["records"]
        if ours is not None and records is not None:
            self.size += _size(records)
            merged = ours + records if self.size <= INLINE_PAYLOAD_LIMIT else None
        else:
            merged = None  # seqs only: consumers read the rows
        self.message = {**message, "first_seq": self.message["first_seq"], "records": merged}
        return True


def _size(records: list[dict[str, Any]]) -> int:
    return sum(len(str(r)) for r in records)


_publisher = _Publisher()


def publish_events(
    conversation_id: uuid.UUID | str, records: list[dict[str, Any]], *, status: str
) -> None:
    """Send a hint that `records` (API-shaped dicts with `seq`) were committed."""
    if not records:
        return
    inline = _size(records) <= INLINE_PAYLOAD_LIMIT
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


def publish_tree_changed(conversation_ids: Iterable[uuid.UUID | str]) -> None:
    """Hint to the pages of these conversations (a changed child's ancestors) that their
    agent tree changed. Call after commit: the pages read the tree from the database."""
    for conversation_id in dict.fromkeys(str(c) for c in conversation_ids):
        _publisher.publish(conversation_group(conversation_id), {"type": TREE_MESSAGE_TYPE})


def publish_delta(
    conversation_id: uuid.UUID | str, *, kind: str, key: str, text: str, title: str = ""
) -> None:
    """Send live text: `kind` "message", "thought" or "tool" (a tool call's progress), `key`
    the message or tool call id it belongs to, `text` what arrived (already redacted)."""
    _publisher.publish(
        conversation_group(conversation_id),
        {"type": DELTA_MESSAGE_TYPE, "kind": kind, "key": key, "text": text, "title": title},
    )
