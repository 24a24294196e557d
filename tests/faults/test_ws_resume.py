"""A websocket client dropped mid-run and resumed with its cursor sees every event of the run
once and in order. The shared stack (this needs no fault of a service)."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from canvas.asgi import application
from conversations.models import Conversation, ConversationEvent
from orchestration import services
from tests.runs import script

pytestmark = pytest.mark.worker


def headers(token: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {token}".encode())]


async def receive_until(communicator, done) -> list[dict]:
    events: list[dict] = []
    while not events or not done(events[-1]):
        events.append(json.loads(await communicator.receive_from(timeout=30)))
    return events


def last_seq(conversation_id) -> int:
    return ConversationEvent.objects.filter(conversation_id=conversation_id).count()


async def test_a_dropped_client_resumes_with_its_cursor(start_worker, user, api_token):
    start_worker()
    steps = [{"tool": "terminal", "args": {"command": f"sleep 0.2; echo {i}"}} for i in range(12)]
    conversation = await database_sync_to_async(services.conversation_create)(
        owner=user, model="scripted",
        prompt=script(*steps, {"tool": "finish", "args": {"message": "done"}}),
    )  # fmt: skip
    url = f"/ws/conversations/{conversation.pk}/events"

    first = WebsocketCommunicator(
        application, f"{url}?after_seq=0", headers=headers(user_token := api_token)
    )
    assert (await first.connect())[0]
    before = await receive_until(first, lambda e: e["seq"] >= 10)
    await first.disconnect()  # the client's network drops
    cursor = before[-1]["seq"]

    async def moved_on() -> bool:
        return await database_sync_to_async(last_seq)(conversation.pk) > cursor + 3

    while not await moved_on():  # events the client misses while it is away
        await first.receive_nothing(timeout=0.1)

    second = WebsocketCommunicator(
        application, f"{url}?after_seq={cursor}", headers=headers(user_token)
    )
    assert (await second.connect())[0]
    after = await receive_until(second, lambda e: e["type"] == "run.finished")
    assert await second.receive_nothing(timeout=0.5)
    await second.disconnect()

    seen = [e["seq"] for e in before + after]
    stored = await database_sync_to_async(last_seq)(conversation.pk)
    assert seen == list(range(1, stored + 1))
    status = await database_sync_to_async(
        lambda: Conversation.objects.get(pk=conversation.pk).status
    )()
    assert status == "finished"
