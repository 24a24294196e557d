"""The publisher's batching: what it merges, what it must keep apart, and that hints arrive."""

import asyncio
import threading

import pytest
import redis
from channels.layers import get_channel_layer

from canvas.layers import RedisPubSubLayer
from conversations import broadcast
from conversations.broadcast import INLINE_PAYLOAD_LIMIT, coalesce
from tests.conftest import wait_for


def hint(first: int, last: int, *, records: bool = True, status: str = "running") -> dict:
    return {
        "type": broadcast.EVENTS_MESSAGE_TYPE,
        "first_seq": first,
        "last_seq": last,
        "status": status,
        "records": [{"seq": s, "type": "x"} for s in range(first, last + 1)] if records else None,
    }


def test_contiguous_hints_of_one_conversation_become_one_message_in_seq_order() -> None:
    merged = coalesce([("a", hint(3, 4, status="running")), ("a", hint(1, 2, status="paused"))])
    assert len(merged) == 1
    group, message = merged[0]
    assert group == "a"
    assert (message["first_seq"], message["last_seq"]) == (1, 4)
    assert [r["seq"] for r in message["records"]] == [1, 2, 3, 4]
    assert message["status"] == "running"  # the status after the last seq


def test_a_gap_keeps_hints_apart_and_groups_never_mix() -> None:
    """Seq 3 came from another process: consumers must read it from the log, so 1-2 and 4
    may not be joined into a run that looks contiguous."""
    merged = coalesce([("a", hint(1, 2)), ("b", hint(7, 7)), ("a", hint(4, 4))])
    assert [(g, m["first_seq"], m["last_seq"]) for g, m in merged] == [
        ("a", 1, 2),
        ("a", 4, 4),
        ("b", 7, 7),
    ]


def test_a_merge_too_big_to_inline_carries_seqs_only() -> None:
    big = {"seq": 1, "type": "x", "content": "y" * (INLINE_PAYLOAD_LIMIT - 20)}
    first = {**hint(1, 1), "records": [big]}
    ((_, message),) = coalesce([("a", first), ("a", hint(2, 2))])
    assert (message["first_seq"], message["last_seq"], message["records"]) == (1, 2, None)
    ((_, message),) = coalesce([("a", hint(1, 1, records=False)), ("a", hint(2, 2))])
    assert message["records"] is None


@pytest.fixture(params=["redis", "in-memory"])
def layer_and_publisher(request, settings, monkeypatch):
    """The Redis layer's batch path (the test settings), and the embedded in-memory layer,
    which the publisher drives through `group_send` on its own loop."""
    if request.param == "in-memory":
        settings.CHANNEL_LAYERS = {
            "default": {"BACKEND": "canvas.layers.ThreadSafeInMemoryChannelLayer"}
        }
        monkeypatch.setattr(broadcast, "_publisher", broadcast._Publisher())  # a fresh thread
    layer = get_channel_layer()
    expected = {"redis": "RedisPubSubLayer", "in-memory": "ThreadSafeInMemoryChannelLayer"}
    assert type(layer).__name__ == expected[request.param]
    return layer


def test_published_hints_reach_a_group_member(layer_and_publisher, settings) -> None:
    layer = layer_and_publisher
    group = f"conversation.{'ab' * 16}"
    received: list[dict] = []

    async def member() -> None:
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
        subscribed.set()
        try:
            while len(received) < 3:
                received.append(await asyncio.wait_for(layer.receive(channel), 10))
        finally:
            await layer.group_discard(group, channel)

    subscribed = threading.Event()
    listener = threading.Thread(target=lambda: asyncio.run(member()))
    listener.start()
    assert subscribed.wait(10)
    if isinstance(layer, RedisPubSubLayer):  # SUBSCRIBE completes asynchronously in Redis
        client = redis.Redis.from_url(settings.REDIS_URL)
        channel = layer.group_channel(group)
        wait_for(lambda: client.pubsub_numsub(channel)[0][1], 10, 0.02, "the subscription")
        client.close()
    for seq in (1, 2, 3):
        broadcast.publish_events(group.split(".")[1], [{"seq": seq, "type": "x"}], status="s")
        # Separate batches, so every hint is its own message.
        wait_for(lambda n=seq: len(received) >= n, 10, 0.01, f"hint {seq}")
    listener.join(15)
    assert [m["first_seq"] for m in received] == [1, 2, 3]
    assert all(m["type"] == broadcast.EVENTS_MESSAGE_TYPE for m in received)


def test_messages_without_seqs_pass_through_unchanged_once_per_group() -> None:
    """The tree hint has no seqs: it is neither sorted nor merged with the event hints, and a
    second one for the same group in one batch adds nothing."""
    tree = {"type": broadcast.TREE_MESSAGE_TYPE}
    merged = coalesce([("a", hint(1, 1)), ("a", tree), ("b", tree), ("a", dict(tree))])
    assert ("a", tree) in merged and ("b", tree) in merged
    assert len([m for g, m in merged if m["type"] == broadcast.TREE_MESSAGE_TYPE]) == 2
    assert [(g, m["first_seq"]) for g, m in merged if "first_seq" in m] == [("a", 1)]
    assert tree == {"type": broadcast.TREE_MESSAGE_TYPE}


def test_a_tree_hint_reaches_each_conversations_group(layer_and_publisher, settings) -> None:
    layer = layer_and_publisher
    ids = ["cd" * 16, "ef" * 16]
    groups = [broadcast.conversation_group(i) for i in ids]
    received: dict[str, dict] = {}

    async def member() -> None:
        channels = {}
        for group in groups:
            channels[group] = await layer.new_channel()
            await layer.group_add(group, channels[group])
        subscribed.set()
        try:
            for group, channel in channels.items():
                received[group] = await asyncio.wait_for(layer.receive(channel), 10)
        finally:
            for group, channel in channels.items():
                await layer.group_discard(group, channel)

    subscribed = threading.Event()
    listener = threading.Thread(target=lambda: asyncio.run(member()))
    listener.start()
    assert subscribed.wait(10)
    if isinstance(layer, RedisPubSubLayer):
        client = redis.Redis.from_url(settings.REDIS_URL)
        for group in groups:
            channel = layer.group_channel(group)
            wait_for(lambda c=channel: client.pubsub_numsub(c)[0][1], 10, 0.02, "subscription")
        client.close()
    broadcast.publish_tree_changed(ids + [ids[0]])
    listener.join(15)
    assert received == {g: {"type": broadcast.TREE_MESSAGE_TYPE} for g in groups}
