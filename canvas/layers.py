"""The embedded channel layer: in-memory, but safe to publish to from worker threads.

Channels' InMemoryChannelLayer assumes every sender runs on the receiver's event loop. In the
embedded mode the Celery worker is a thread with loops of its own, so a send is handed to the
loop that is waiting on the channel.
"""

import asyncio

from channels.layers import InMemoryChannelLayer


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
