"""The JSON event websocket: resume after N, then live events, each once and in order."""

import asyncio
import json

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from canvas.asgi import application
from conversations import store
from conversations.events import UserMessageEvent
from conversations.models import Conversation
from tests.factories import make_conversation as new_conversation

pytestmark = pytest.mark.django_db(transaction=True)


def make_conversation(owner, n: int) -> Conversation:
    conversation = new_conversation(owner)
    store.append(conversation.pk, [UserMessageEvent(text=f"m{i}") for i in range(1, n + 1)])
    return conversation


async def receive_all(communicator, count: int) -> list[dict]:
    return [json.loads(await communicator.receive_from(timeout=5)) for _ in range(count)]


def token_headers(token: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {token}".encode())]


async def test_resume_after_n_then_live_events_exactly_once(user, api_token):
    conversation = await database_sync_to_async(make_conversation)(user, 5)
    url = f"/ws/conversations/{conversation.pk}/events?after_seq=2"
    communicator = WebsocketCommunicator(application, url, headers=token_headers(api_token))
    connected, _ = await communicator.connect()
    assert connected
    history = await receive_all(communicator, 3)
    assert [e["seq"] for e in history] == [3, 4, 5]
    assert history[0]["type"] == "message.user" and history[0]["text"] == "m3"

    for i in (6, 7, 8):
        await database_sync_to_async(store.append)(
            conversation.pk, [UserMessageEvent(text=f"m{i}")]
        )
    live = await receive_all(communicator, 3)
    assert [e["seq"] for e in live] == [6, 7, 8]
    assert await communicator.receive_nothing(timeout=0.5)
    await communicator.disconnect()


async def test_events_appended_during_replay_are_not_missed(user, api_token):
    conversation = await database_sync_to_async(make_conversation)(user, 600)
    url = f"/ws/conversations/{conversation.pk}/events?after_seq=0"
    communicator = WebsocketCommunicator(application, url, headers=token_headers(api_token))

    async def writer():
        for i in range(20):
            await database_sync_to_async(store.append)(
                conversation.pk, [UserMessageEvent(text=f"late{i}")]
            )
            await asyncio.sleep(0.005)

    connected, _ = await communicator.connect()
    assert connected
    writing = asyncio.create_task(writer())
    received = await receive_all(communicator, 620)
    await writing
    assert [e["seq"] for e in received] == list(range(1, 621))
    assert await communicator.receive_nothing(timeout=0.5)
    await communicator.disconnect()


async def refused(url: str, headers) -> int:
    communicator = WebsocketCommunicator(application, url, headers=headers)
    connected, code = await communicator.connect()
    assert not connected
    return code


async def test_refuses_anonymous_foreign_origin_and_other_users(user, other_user, api_token):
    conversation = await database_sync_to_async(make_conversation)(other_user, 1)
    url = f"/ws/conversations/{conversation.pk}/events"
    assert await refused(url, token_headers(api_token)) == 4404  # not alice's
    assert await refused(url, []) == 4403  # anonymous, no origin
    same_origin = [(b"host", b"testserver"), (b"origin", b"http://testserver")]
    assert await refused(url, same_origin) == 4404  # anonymous

    def session_cookie() -> str:
        client = Client()
        client.force_login(other_user)
        return client.cookies["sessionid"].value

    cookie = await database_sync_to_async(session_cookie)()
    as_owner = [(b"cookie", f"sessionid={cookie}".encode()), (b"host", b"testserver")]
    assert await refused(url, as_owner + [(b"origin", b"http://evil.example")]) == 4403
    assert await refused(url, as_owner) == 4403  # a browser session needs a matching Origin
    communicator = WebsocketCommunicator(
        application, url, headers=as_owner + [(b"origin", b"http://testserver")]
    )
    connected, _ = await communicator.connect()
    assert connected
    assert (await receive_all(communicator, 1))[0]["text"] == "m1"
    await communicator.disconnect()


async def test_a_lost_hint_is_recovered_by_the_safety_poll(user, api_token, monkeypatch):
    import canvas.consumers
    from conversations import broadcast

    monkeypatch.setattr(canvas.consumers, "SAFETY_POLL_SECONDS", 0.2)
    conversation = await database_sync_to_async(make_conversation)(user, 1)
    url = f"/ws/conversations/{conversation.pk}/events?after_seq=1"
    communicator = WebsocketCommunicator(application, url, headers=token_headers(api_token))
    assert (await communicator.connect())[0]
    monkeypatch.setattr(broadcast, "publish_events", lambda *a, **k: None)  # the hint is lost
    await database_sync_to_async(store.append)(conversation.pk, [UserMessageEvent(text="late")])
    (event,) = await receive_all(communicator, 1)
    assert (event["seq"], event["text"]) == (2, "late")
    await communicator.disconnect()
