"""Open websockets lose access as soon as their credentials or membership do.

Each test opens a socket that is receiving events, takes access away through the real API (or
the real logout view), and expects a close frame with the documented code, told by the access
hint (a second at most; under 0.1 s measured, loaded or not) rather than found by the 60 s
re-check timer, and no event after it. A change that keeps access keeps the socket open and
relaying.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

import canvas.consumers
from canvas.asgi import application
from canvas.ws_close import CloseCode
from conversations import store
from conversations.events import UserMessageEvent
from teams.models import Membership, Role
from teams.tokens import api_token_create
from tests.api import send
from tests.canvas.test_ui_consumer import receive_rows, session_headers
from tests.factories import make_conversation

pytestmark = pytest.mark.django_db(transaction=True)

CLOSE_WITHIN_SECONDS = 10.0
"""The hint's close, not the timer's: a sixth of consumers.ACCESS_RECHECK_SECONDS (60 s), and
many times the hint's own time even on a loaded machine."""


@pytest.fixture
def bob(django_user_model, team):
    """A plain member of alice's team."""
    bob = django_user_model.objects.create_user("bob", password="bob-password-1")
    Membership.objects.create(team=team, user=bob, role=Role.MEMBER)
    return bob


def alice_api(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


async def append(conversation, text: str) -> None:
    await database_sync_to_async(store.append)(conversation.pk, [UserMessageEvent(text=text)])


async def json_socket(conversation, raw_token: str) -> WebsocketCommunicator:
    """A JSON event socket that has relayed the conversation's first event."""
    communicator = WebsocketCommunicator(
        application,
        f"/ws/conversations/{conversation.pk}/events?after_seq=0",
        headers=[(b"authorization", f"Bearer {raw_token}".encode())],
    )
    assert (await communicator.connect())[0]
    await append(conversation, "before")
    assert json.loads(await communicator.receive_from(timeout=5))["text"] == "before"
    return communicator


async def page_socket(conversation, headers: list[tuple[bytes, bytes]]) -> WebsocketCommunicator:
    """The conversation page's socket on the session in `headers`, resumed and relaying."""
    communicator = WebsocketCommunicator(
        application, f"/ws/ui/conversations/{conversation.pk}/", headers=headers
    )
    assert (await communicator.connect())[0]
    await communicator.send_to(text_data=json.dumps({"resume": 0}))
    await append(conversation, "before")
    await receive_rows(communicator, 1)
    return communicator


async def expect_closed(communicator, code: CloseCode, since: float, conversation) -> None:
    """The next output is a close with `code`, well before the re-check timer could have sent
    it; then nothing more, even when events keep coming."""
    assert canvas.consumers.ACCESS_RECHECK_SECONDS >= 3 * CLOSE_WITHIN_SECONDS
    output = await communicator.receive_output(timeout=CLOSE_WITHIN_SECONDS)
    elapsed = time.monotonic() - since
    assert output == {"type": "websocket.close", "code": code}
    assert elapsed < CLOSE_WITHIN_SECONDS, f"closed after {elapsed:.2f}s"
    await append(conversation, "after")
    assert await communicator.receive_nothing(timeout=0.5)
    await communicator.disconnect()  # what the server does after a close frame


def call(client: Client, method: str, url: str, body=None) -> int:
    return send(client, method, url, body).status_code


async def session_of(user) -> list[tuple[bytes, bytes]]:
    """Headers that carry a logged-in session of `user`."""
    return await database_sync_to_async(session_headers)(user)


async def remove_bob(user, team) -> float:
    """Alice removes bob from the team through the API; when the answer came."""
    client = await database_sync_to_async(alice_api)(user)
    url = f"/api/teams/{team.pk}/members/bob"
    assert await database_sync_to_async(call)(client, "delete", url) == 204
    return time.monotonic()


async def test_revoking_the_token_closes_its_json_socket_with_4401(user, api_token):
    conversation = await database_sync_to_async(make_conversation)(user)
    communicator = await json_socket(conversation, api_token)
    other_token = await database_sync_to_async(api_token_create)(user=user, name="other")
    untouched = await json_socket(conversation, other_token[1])
    await receive_from_json(communicator, "before")  # the second socket's event, seen by both
    await receive_from_json(untouched, "before")
    token_id = await database_sync_to_async(lambda: user.api_tokens.get(name="tests").pk)()
    client = await database_sync_to_async(alice_api)(user)

    status = await database_sync_to_async(call)(client, "delete", f"/api/tokens/{token_id}")
    started = time.monotonic()
    assert status == 204
    await expect_closed(communicator, CloseCode.CREDENTIALS_GONE, started, conversation)
    # Another token of the same user is not affected.
    assert [e["text"] for e in await receive_json(untouched, 1)] == ["after"]
    await untouched.disconnect()


async def receive_from_json(communicator, text: str) -> None:
    assert json.loads(await communicator.receive_from(timeout=5))["text"] == text


async def receive_json(communicator, count: int) -> list[dict]:
    return [json.loads(await communicator.receive_from(timeout=5)) for _ in range(count)]


async def test_removing_the_member_closes_their_json_socket_with_4404(user, team, bob):
    conversation = await database_sync_to_async(make_conversation)(user)
    _token, raw = await database_sync_to_async(api_token_create)(user=bob, name="bob's")
    communicator = await json_socket(conversation, raw)
    started = await remove_bob(user, team)
    await expect_closed(communicator, CloseCode.NOT_FOUND, started, conversation)


async def test_removing_the_member_closes_their_page_socket_with_4404(user, team, bob):
    conversation = await database_sync_to_async(make_conversation)(user)
    communicator = await page_socket(conversation, await session_of(bob))
    started = await remove_bob(user, team)
    await expect_closed(communicator, CloseCode.NOT_FOUND, started, conversation)


@pytest.fixture
def rechecks(monkeypatch) -> list[tuple[str, bool]]:
    """(consumer class, can_act) for every re-check that kept a socket open."""
    from canvas.consumers import EventStreamConsumer
    from canvas.ui_consumers import ConversationPageConsumer

    kept: list[tuple[str, bool]] = []
    for cls in (EventStreamConsumer, ConversationPageConsumer):
        original = cls.access_kept

        async def spy(self, original=original) -> None:
            await original(self)
            kept.append((type(self).__name__, getattr(self, "can_act", False)))

        monkeypatch.setattr(cls, "access_kept", spy)
    return kept


async def test_a_role_change_that_keeps_access_keeps_the_socket(user, team, bob, rechecks):
    conversation = await database_sync_to_async(make_conversation)(user)
    _token, raw = await database_sync_to_async(api_token_create)(user=bob, name="bob's")
    json_feed = await json_socket(conversation, raw)
    page = await page_socket(conversation, await session_of(bob))
    await receive_from_json(json_feed, "before")  # the page socket's event
    await receive_rows(page, 1)  # and the page's own
    client = await database_sync_to_async(alice_api)(user)

    url = f"/api/teams/{team.pk}/members/bob"
    assert await database_sync_to_async(call)(client, "patch", url, {"role": "viewer"}) == 200
    started = time.monotonic()
    while len(rechecks) < 2:
        assert time.monotonic() - started < CLOSE_WITHIN_SECONDS, rechecks
        await asyncio.sleep(0.01)
    # Both sockets re-checked and stayed; the page now shows a viewer's controls.
    assert sorted(rechecks) == [("ConversationPageConsumer", False), ("EventStreamConsumer", False)]
    await append(conversation, "still here")
    assert [e["text"] for e in await receive_json(json_feed, 1)] == ["still here"]
    [frame] = await receive_rows(page, 1)
    assert "still here" in frame
    await json_feed.disconnect()
    await page.disconnect()


async def test_logging_out_closes_the_page_socket_with_4401(user):
    conversation = await database_sync_to_async(make_conversation)(user)
    headers = await session_of(user)
    communicator = await page_socket(conversation, headers)
    cookie = dict(headers)[b"cookie"].decode().split("=", 1)[1]

    def log_out() -> int:
        client = Client()
        client.cookies["sessionid"] = cookie
        return client.post("/logout/").status_code

    assert await database_sync_to_async(log_out)() in (200, 302)
    started = time.monotonic()
    await expect_closed(communicator, CloseCode.CREDENTIALS_GONE, started, conversation)


async def test_deactivating_the_user_closes_their_sockets_with_4401(user, team, bob):
    conversation = await database_sync_to_async(make_conversation)(user)
    _token, raw = await database_sync_to_async(api_token_create)(user=bob, name="bob's")
    communicator = await json_socket(conversation, raw)

    def deactivate() -> None:
        bob.is_active = False
        bob.save()

    await database_sync_to_async(deactivate)()
    started = time.monotonic()
    await expect_closed(communicator, CloseCode.CREDENTIALS_GONE, started, conversation)


async def test_a_lost_hint_is_made_up_by_the_timer(user, api_token, monkeypatch):
    import canvas.access_signals
    import canvas.consumers

    monkeypatch.setattr(canvas.consumers, "SAFETY_POLL_SECONDS", 0.1)
    monkeypatch.setattr(canvas.consumers, "ACCESS_RECHECK_SECONDS", 0.3)
    monkeypatch.setattr(canvas.access_signals, "_send", lambda *a: None)  # the hint is lost
    conversation = await database_sync_to_async(make_conversation)(user)
    communicator = await json_socket(conversation, api_token)
    client = await database_sync_to_async(alice_api)(user)
    token_id = await database_sync_to_async(lambda: user.api_tokens.get(name="tests").pk)()

    started = time.monotonic()
    assert await database_sync_to_async(call)(client, "delete", f"/api/tokens/{token_id}") == 204
    output = await communicator.receive_output(timeout=CLOSE_WITHIN_SECONDS)
    assert output == {"type": "websocket.close", "code": CloseCode.CREDENTIALS_GONE}
    assert time.monotonic() - started < CLOSE_WITHIN_SECONDS  # the 0.3 s timer; no hint came
    await communicator.disconnect()
