"""The conversation page's websocket: rendered fragments, resumed from the page's last seq."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connections
from django.test import Client
from django.utils import timezone

from canvas import consumers
from canvas.asgi import application
from conversations import store
from conversations.events import (
    AgentMessageEvent,
    Status,
    StatusChangeEvent,
    Usage,
    UserMessageEvent,
)
from conversations.models import Conversation
from tests.factories import make_conversation as new_conversation

pytestmark = pytest.mark.django_db(transaction=True)

HOST = (b"host", b"testserver")
ORIGIN = (b"origin", b"http://testserver")
SEQ = re.compile(r'<article id="event-(\d+)" data-seq="(\d+)"')


def make_conversation(owner, n: int) -> Conversation:
    conversation = new_conversation(owner)
    store.append(conversation.pk, [UserMessageEvent(text=f"m{i}") for i in range(1, n + 1)])
    return conversation


def session_headers(user, origin: tuple[bytes, bytes] | None = ORIGIN) -> list:
    client = Client()
    client.force_login(user)
    headers = [(b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()), HOST]
    return headers + ([origin] if origin else [])


def url_for(conversation: Conversation) -> str:
    return f"/ws/ui/conversations/{conversation.pk}/"


async def connect(conversation, headers) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(application, url_for(conversation), headers=headers)
    connected, _ = await communicator.connect()
    assert connected
    return communicator


def seq_of(frame: str) -> int:
    match = SEQ.search(frame)
    assert match, frame
    assert match.group(1) == match.group(2)
    return int(match.group(1))


async def receive_rows(communicator, count: int) -> list[str]:
    """The next `count` event-row frames, skipping header-only frames (stats)."""
    rows = []
    while len(rows) < count:
        frame = await communicator.receive_from(timeout=5)
        if "data-seq=" in frame:
            rows.append(frame)
    return rows


async def test_nothing_is_sent_before_resume(user):
    conversation = await database_sync_to_async(make_conversation)(user, 3)
    communicator = await connect(conversation, await database_sync_to_async(session_headers)(user))
    assert await communicator.receive_nothing(timeout=0.5)
    await database_sync_to_async(store.append)(conversation.pk, [UserMessageEvent(text="m4")])
    assert await communicator.receive_nothing(timeout=0.5)
    await communicator.send_to(text_data=json.dumps({"resume": 3}))
    [frame] = await receive_rows(communicator, 1)
    assert seq_of(frame) == 4
    await communicator.disconnect()


async def test_resume_from_n_then_live_events_exactly_once(user):
    conversation = await database_sync_to_async(make_conversation)(user, 5)
    communicator = await connect(conversation, await database_sync_to_async(session_headers)(user))
    await communicator.send_to(text_data=json.dumps({"resume": 2}))
    history = await receive_rows(communicator, 3)
    assert [seq_of(f) for f in history] == [3, 4, 5]
    assert history[0].lstrip().startswith('<div hx-swap-oob="beforeend:#events">')
    assert "m3" in history[0]

    for i in (6, 7, 8):
        await database_sync_to_async(store.append)(
            conversation.pk, [UserMessageEvent(text=f"<b>m{i}</b>")]
        )
    live = await receive_rows(communicator, 3)
    assert [seq_of(f) for f in live] == [6, 7, 8]
    assert "&lt;b&gt;m6&lt;/b&gt;" in live[0] and "<b>" not in live[0]
    assert await communicator.receive_nothing(timeout=0.5)
    await communicator.disconnect()


async def test_events_appended_during_replay_are_not_missed(user):
    conversation = await database_sync_to_async(make_conversation)(user, 600)
    communicator = await connect(conversation, await database_sync_to_async(session_headers)(user))

    async def writer():
        for i in range(20):
            await database_sync_to_async(store.append)(
                conversation.pk, [UserMessageEvent(text=f"late{i}")]
            )
            await asyncio.sleep(0.005)

    writing = asyncio.create_task(writer())
    await communicator.send_to(text_data=json.dumps({"resume": 0}))
    received = await receive_rows(communicator, 620)
    await writing
    assert [seq_of(f) for f in received] == list(range(1, 621))
    assert await communicator.receive_nothing(timeout=0.5)
    await communicator.disconnect()


async def test_reconnect_resumes_where_the_page_left_off(user):
    conversation = await database_sync_to_async(make_conversation)(user, 2)
    headers = await database_sync_to_async(session_headers)(user)
    first = await connect(conversation, headers)
    await first.send_to(text_data=json.dumps({"resume": 2}))
    await database_sync_to_async(store.append)(conversation.pk, [UserMessageEvent(text="m3")])
    assert [seq_of(f) for f in await receive_rows(first, 1)] == [3]
    await first.disconnect()

    for i in (4, 5):  # written while the page was offline
        await database_sync_to_async(store.append)(
            conversation.pk, [UserMessageEvent(text=f"m{i}")]
        )
    second = await connect(conversation, headers)
    await second.send_to(text_data=json.dumps({"resume": 3}))
    assert [seq_of(f) for f in await receive_rows(second, 2)] == [4, 5]
    assert await second.receive_nothing(timeout=0.5)
    await second.disconnect()


async def test_status_change_updates_badge_controls_and_stats(user):
    conversation = await database_sync_to_async(make_conversation)(user, 1)
    communicator = await connect(conversation, await database_sync_to_async(session_headers)(user))
    await communicator.send_to(text_data=json.dumps({"resume": 1}))
    await database_sync_to_async(store.append)(
        conversation.pk,
        [
            AgentMessageEvent(text="done", usage=Usage(prompt_tokens=10, completion_tokens=5)),
            StatusChangeEvent(status=Status.FINISHED, previous=Status.RUNNING),
        ],
    )
    frames = [await communicator.receive_from(timeout=5) for _ in range(3)]
    assert seq_of(frames[0]) == 2
    assert seq_of(frames[1]) == 3
    assert (
        '<span id="status-badge" class="badge status-finished" hx-swap-oob="true">Finished</span>'
        in frames[1]
    )
    assert '<div id="controls" class="controls" hx-swap-oob="true">' in frames[1]
    assert 'id="stats"' in frames[2] and 'hx-swap-oob="true"' in frames[2]
    assert "10 in · 5 out" in frames[2]
    await communicator.disconnect()


async def test_a_closed_conversations_controls_offer_no_resume(user):
    conversation = await database_sync_to_async(make_conversation)(user, 1)
    communicator = await connect(conversation, await database_sync_to_async(session_headers)(user))
    await communicator.send_to(text_data=json.dumps({"resume": 1}))
    await Conversation.objects.filter(pk=conversation.pk).aupdate(closed_at=timezone.now())
    await database_sync_to_async(store.append)(
        conversation.pk, [StatusChangeEvent(status=Status.PAUSED, previous=Status.RUNNING)]
    )
    await receive_rows(communicator, 1)
    header = await communicator.receive_from(timeout=5)  # follows the rows it refreshes
    assert 'id="stats"' in header
    assert '<div id="controls" class="controls" hx-swap-oob="true">' in header
    assert ">Closed</span>" in header and "resume" not in header
    await communicator.disconnect()


def test_resuming_reads_the_log_and_the_stats_once(user, monkeypatch):
    """receive() reads what resuming needs and no more: the log's pages after the page's seq
    and, once, the stats row; access was decided at connect. Many header-changing events
    (usage, status changes) cost nothing more, and a resume with nothing new costs one read."""
    monkeypatch.setattr(consumers, "SAFETY_POLL_SECONDS", 3600)  # only receive() reads here
    conversation = make_conversation(user, 0)
    for _ in range(3):
        store.append(
            conversation.pk,
            [
                event
                for _ in range(200)
                for event in (
                    AgentMessageEvent(text="x", usage=Usage(prompt_tokens=1, completion_tokens=1)),
                    StatusChangeEvent(status=Status.PAUSED, previous=Status.RUNNING),
                )
            ],
        )
    last = store.append(conversation.pk, [UserMessageEvent(text="last")])[-1].seq
    headers = session_headers(user)
    pages = -(-last // consumers.CATCH_UP_PAGE)
    idle_resumes = 5
    sql: list[str] = []

    def count(execute, query, params, many, context):
        sql.append(query)
        return execute(query, params, many, context)

    # Under async_to_sync the consumer's database calls run on this thread's connection.
    database = connections["default"]

    async def scenario() -> None:
        communicator = await connect(conversation, headers)
        with database.execute_wrapper(count):
            await communicator.send_to(text_data=json.dumps({"resume": 0}))
            frames = []
            while not frames or 'id="stats"' not in frames[-1]:
                frames.append(await communicator.receive_from(timeout=10))
            assert [seq_of(f) for f in frames[:-1]] == list(range(1, last + 1))
            assert len(sql) <= pages + 1, sql
            for _ in range(idle_resumes):
                await communicator.send_to(text_data=json.dumps({"resume": last}))
            await communicator.send_to(text_data=json.dumps({"resume": last - 1}))
            [frame] = await receive_rows(communicator, 1)  # every resume before it is done
            assert seq_of(frame) == last
        await communicator.disconnect()

    async_to_sync(scenario)()
    assert len(sql) <= pages + 1 + idle_resumes + 1, sql


@pytest.mark.parametrize("message", ["nope", json.dumps({"resume": -1}), json.dumps({"x": 1})])
async def test_a_bad_resume_message_closes_the_socket(user, message):
    conversation = await database_sync_to_async(make_conversation)(user, 1)
    communicator = await connect(conversation, await database_sync_to_async(session_headers)(user))
    await communicator.send_to(text_data=message)
    output = await communicator.receive_output(timeout=2)
    assert output == {"type": "websocket.close", "code": 4400}


async def refused(conversation, headers) -> int:
    communicator = WebsocketCommunicator(application, url_for(conversation), headers=headers)
    connected, code = await communicator.connect()
    assert not connected
    return code


async def test_foreign_origin_is_refused(user):
    conversation = await database_sync_to_async(make_conversation)(user, 1)
    headers = await database_sync_to_async(session_headers)(
        user, (b"origin", b"http://evil.example")
    )
    assert await refused(conversation, headers) == 4403


async def test_missing_origin_is_refused_for_a_session(user):
    conversation = await database_sync_to_async(make_conversation)(user, 1)
    headers = await database_sync_to_async(session_headers)(user, None)
    assert await refused(conversation, headers) == 4403


async def test_anonymous_is_refused(user):
    conversation = await database_sync_to_async(make_conversation)(user, 1)
    assert await refused(conversation, [HOST, ORIGIN]) == 4404


async def test_another_users_conversation_is_refused(user, other_user):
    conversation = await database_sync_to_async(make_conversation)(user, 1)
    headers = await database_sync_to_async(session_headers)(other_user)
    assert await refused(conversation, headers) == 4404


async def test_unknown_conversation_is_refused(user):
    conversation = Conversation(owner=user)  # never saved: a well-formed id nobody has
    headers = await database_sync_to_async(session_headers)(user)
    assert await refused(conversation, headers) == 4404
