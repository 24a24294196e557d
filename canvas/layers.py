"""Channel layers: the embedded in-memory one, and Redis pub/sub with a batched publish.

Channels' InMemoryChannelLayer assumes every sender runs on the receiver's event loop. In the
embedded mode the Celery worker is a thread with loops of its own, so a send is handed to the
loop that is waiting on the channel.

channels_redis publishes one message per `group_send`, on an asyncio connection: a round trip
and an event-loop wake-up per appended event. `RedisPubSubLayer` adds a synchronous
`group_send_batch` for the event publisher's thread (conversations.broadcast) that sends a
whole batch in one pipeline per Redis host, in the wire format the layer's subscribers read.
Everything else, receiving included, is channels_redis unchanged.
"""

import asyncio
from typing import Any

import redis
from channels.layers import InMemoryChannelLayer
from channels_redis.pubsub import RedisPubSubChannelLayer
from channels_redis.utils import _consistent_hash, decode_hosts

PUBLISH_TIMEOUT_SECONDS = 5.0
"""Bounds a publish to a Redis that stopped answering; the hints are lost, not the events."""


class ThreadSafeInMemoryChannelLayer(InMemoryChannelLayer):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._receiver_loops: dict[str, asyncio.AbstractEventLoop] = {}

    async def receive(self, channel: str) -> dict:
        self._receiver_loops[channel] = asyncio.get_running_loop()
        return await super().receive(channel)

    async def send(self, channel: str, message: dict) -> None:
        loop = self._receiver_loops.get(channel)
        if loop is None or loop.is_closed() or loop is asyncio.get_running_loop():
            await super().send(channel, message)
            return
        future = asyncio.run_coroutine_threadsafe(super().send(channel, message), loop)
        await asyncio.wrap_future(future)

    async def group_discard(self, group: str, channel: str) -> None:
        await super().group_discard(group, channel)
        self._receiver_loops.pop(channel, None)


class RedisPubSubLayer(RedisPubSubChannelLayer):
    def __init__(self, hosts: list[Any] | None = None, prefix: str = "asgi", **kwargs) -> None:
        super().__init__(hosts=hosts, prefix=prefix, **kwargs)
        self._prefix = prefix
        self._hosts = decode_hosts(hosts)
        self._clients: list[redis.Redis] | None = None

    def group_channel(self, group: str) -> str:
        """The pub/sub channel channels_redis subscribes a group's members to."""
        return f"{self._prefix}__group__{group}"

    def group_send_batch(self, batch: list[tuple[str, dict[str, Any]]]) -> None:
        """Publish (group, message) pairs, in order, one pipeline per shard.

        Not thread-safe: one caller (the publisher thread) owns the clients.
        """
        clients = self._sync_clients()
        pipelines: dict[int, Any] = {}
        for group, message in batch:
            channel = self.group_channel(group)
            shard = _consistent_hash(channel, len(clients))
            if shard not in pipelines:
                pipelines[shard] = clients[shard].pipeline(transaction=False)
            pipelines[shard].publish(channel, self.serialize(message))
        for pipeline in pipelines.values():
            pipeline.execute()

    def _sync_clients(self) -> list[redis.Redis]:
        if self._clients is None:
            self._clients = [_sync_client(host) for host in self._hosts]
        return self._clients


def _sync_client(host: dict[str, Any]) -> redis.Redis:
    options = {
        "socket_timeout": PUBLISH_TIMEOUT_SECONDS,
        "socket_connect_timeout": PUBLISH_TIMEOUT_SECONDS,
    }
    host = dict(host)
    if "address" in host:
        return redis.Redis.from_url(host.pop("address"), **options, **host)
    if "master_name" in host:
        raise ValueError("RedisPubSubLayer takes Redis URLs or host/port pairs, not sentinels")
    return redis.Redis(**options, **host)
