"""An external agent's live text over both websockets: bubbles on the page that the stored
event replaces, and `{"type": "delta"}` records on the JSON socket."""

from __future__ import annotations

import json
import re

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from canvas import ui_consumers
from canvas.asgi import application
from canvas.event_rows import call_key
from conversations import store
from conversations.broadcast import publish_delta
from conversations.events import (
    AcpTurnEvent,
    ActionEvent,
    AgentMessageEvent,
    AgentThoughtEvent,
    BaseEvent,
    ObservationEvent,
    UserMessageEvent,
)
from conversations.models import Conversation
from tests.canvas.test_ui_consumer import connect, receive_rows, session_headers
from tests.canvas.test_ws_json import token_headers
from tests.factories import make_conversation

pytestmark = pytest.mark.django_db(transaction=True)

START = '<div hx-swap-oob="beforeend:#live-stream">'


def acp_conversation(owner) -> Conversation:
    conversation = make_conversation(owner, agent="claude-code")
    store.append(conversation.pk, [UserMessageEvent(text="go")])
    return conversation


async def page_socket(user) -> tuple[Conversation, WebsocketCommunicator]:
    """A page's socket, resumed (deltas are ignored before that): its first row is the proof."""
    conversation = await database_sync_to_async(acp_conversation)(user)
    communicator = await connect(conversation, await database_sync_to_async(session_headers)(user))
    await communicator.send_to(text_data=json.dumps({"resume": 0}))
    await receive_rows(communicator, 1)
    return conversation, communicator


async def append(conversation: Conversation, *events: BaseEvent) -> None:
    await database_sync_to_async(store.append)(conversation.pk, list(events))


def bubble_id(kind: str, key: str) -> str:
    return f"live-{kind}-{call_key(key)}"


async def test_first_delta_starts_a_bubble_later_ones_append(user) -> None:
    conversation, communicator = await page_socket(user)
    publish_delta(conversation.pk, kind="message", key="msg-1", text="Hello")
    publish_delta(conversation.pk, kind="message", key="msg-1", text=", world")

    start = await communicator.receive_from(timeout=5)
    assert start.lstrip().startswith(START)
    assert (
        f'<article id="{bubble_id("message", "msg-1")}" class="live-bubble live-message"' in start
    )
    assert '<span class="label">Agent</span>' in start
    assert re.search(r'class="live-text" id="live-text-message-c-msg-1">Hello</div>', start)

    more = await communicator.receive_from(timeout=5)
    assert more == '<span hx-swap-oob="beforeend:#live-text-message-c-msg-1">, world</span>'
    await communicator.disconnect()


@pytest.mark.parametrize(
    ("kind", "key", "event"),
    [
        ("message", "msg-1", AgentMessageEvent(text="Hello, world", llm_response_id="msg-1")),
        ("thought", "msg-1", AgentThoughtEvent(text="Thinking it over", message_id="msg-1")),
    ],
    ids=["message", "thought"],
)
async def test_the_stored_event_replaces_its_bubble_in_one_frame(user, kind, key, event) -> None:
    conversation, communicator = await page_socket(user)
    publish_delta(conversation.pk, kind=kind, key=key, text="Hel")
    assert START in await communicator.receive_from(timeout=5)

    await append(conversation, event)
    [frame] = await receive_rows(communicator, 1)
    assert '<div hx-swap-oob="beforeend:#events">' in frame and 'data-seq="2"' in frame
    assert frame.rstrip().endswith(f'<div id="{bubble_id(kind, key)}" hx-swap-oob="delete"></div>')
    assert await communicator.receive_nothing(timeout=0.5)
    await communicator.disconnect()


async def test_a_thought_and_a_message_of_one_id_are_two_bubbles(user) -> None:
    conversation, communicator = await page_socket(user)
    publish_delta(conversation.pk, kind="thought", key="m", text="hmm")
    publish_delta(conversation.pk, kind="message", key="m", text="Done")
    thought, message = [await communicator.receive_from(timeout=5) for _ in range(2)]
    assert START in thought and '<span class="label">Thinking</span>' in thought
    assert START in message and bubble_id("message", "m") in message

    await append(conversation, AgentMessageEvent(text="Done.", llm_response_id="m"))
    [frame] = await receive_rows(communicator, 1)
    assert f'id="{bubble_id("message", "m")}" hx-swap-oob="delete"' in frame
    assert bubble_id("thought", "m") not in frame  # still streaming
    await communicator.disconnect()


async def test_tool_progress_names_its_call_and_ends_with_the_result(user) -> None:
    conversation, communicator = await page_socket(user)
    await append(
        conversation,
        ActionEvent(tool_call_id="call-1", tool="execute", arguments="{}", title="Run tests"),
    )
    await receive_rows(communicator, 1)
    publish_delta(conversation.pk, kind="tool", key="call-1", text="3 passed", title="Run tests")
    start = await communicator.receive_from(timeout=5)
    assert START in start
    assert 'class="live-bubble live-tool" data-live-key="call-1" data-call-key="c-call-1"' in start
    assert '<span class="label">Run tests</span>' in start

    await append(
        conversation, ObservationEvent(tool_call_id="call-1", tool="execute", content="ok")
    )
    [frame] = await receive_rows(communicator, 1)
    assert 'hx-swap-oob="beforeend:#call-log-c-call-1"' in frame  # the result, into its card
    assert f'<div id="{bubble_id("tool", "call-1")}" hx-swap-oob="delete"></div>' in frame
    await communicator.disconnect()


async def test_a_stored_event_without_a_bubble_deletes_nothing(user) -> None:
    conversation, communicator = await page_socket(user)
    await append(conversation, AgentMessageEvent(text="no stream", llm_response_id="quiet"))
    [frame] = await receive_rows(communicator, 1)
    assert 'hx-swap-oob="delete"' not in frame
    await communicator.disconnect()


async def test_delta_text_and_title_are_escaped(user) -> None:
    conversation, communicator = await page_socket(user)
    xss = "<script>alert(1)</script>"
    publish_delta(conversation.pk, kind="tool", key='k"><img src=x>', text=xss, title=xss)
    publish_delta(conversation.pk, kind="tool", key='k"><img src=x>', text=f"{xss}&")
    start, more = [await communicator.receive_from(timeout=5) for _ in range(2)]
    for frame in (start, more):
        assert "<script>" not in frame and "<img" not in frame
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in frame
    assert 'data-live-key="k&quot;&gt;&lt;img src=x&gt;"' in start
    assert "&lt;/script&gt;&amp;</span>" in more
    await communicator.disconnect()


async def test_unknown_kinds_and_empty_text_are_ignored(user) -> None:
    conversation, communicator = await page_socket(user)
    publish_delta(conversation.pk, kind="plan", key="k", text="not live")
    publish_delta(conversation.pk, kind="message", key="k", text="")
    publish_delta(conversation.pk, kind="message", key="", text="no key")
    assert await communicator.receive_nothing(timeout=0.5)
    publish_delta(conversation.pk, kind="message", key="k", text="shown")
    assert "shown" in await communicator.receive_from(timeout=5)  # the socket is still open
    await communicator.disconnect()


async def test_deltas_before_resume_are_not_sent(user) -> None:
    conversation = await database_sync_to_async(acp_conversation)(user)
    communicator = await connect(conversation, await database_sync_to_async(session_headers)(user))
    publish_delta(conversation.pk, kind="message", key="k", text="early")
    assert await communicator.receive_nothing(timeout=0.5)
    await communicator.send_to(text_data=json.dumps({"resume": 0}))
    await receive_rows(communicator, 1)
    publish_delta(conversation.pk, kind="message", key="k", text="late")
    frame = await communicator.receive_from(timeout=5)
    assert START in frame and "late" in frame and "early" not in frame  # a fresh bubble
    await communicator.disconnect()


async def test_the_json_socket_gets_delta_records(user, api_token) -> None:
    conversation = await database_sync_to_async(acp_conversation)(user)
    url = f"/ws/conversations/{conversation.pk}/events?after_seq=0"
    communicator = WebsocketCommunicator(application, url, headers=token_headers(api_token))
    connected, _ = await communicator.connect()
    assert connected
    # The first record comes after the socket joined the group: deltas reach it from here.
    assert json.loads(await communicator.receive_from(timeout=5))["seq"] == 1
    publish_delta(conversation.pk, kind="tool", key="call-1", text="<b>out</b>", title="Run")
    publish_delta(conversation.pk, kind="message", key="msg-1", text="Hi")
    first, second = [json.loads(await communicator.receive_from(timeout=5)) for _ in range(2)]
    assert first == {
        "type": "delta", "kind": "tool", "key": "call-1", "text": "<b>out</b>", "title": "Run",
    }  # fmt: skip
    assert second == {"type": "delta", "kind": "message", "key": "msg-1", "text": "Hi", "title": ""}
    await append(conversation, AgentMessageEvent(text="Hi", llm_response_id="msg-1"))
    stored = json.loads(await communicator.receive_from(timeout=5))
    assert (stored["seq"], stored["type"], stored["text"]) == (2, "message.agent", "Hi")
    await communicator.disconnect()


async def test_the_end_of_the_turn_deletes_every_bubble_left(user) -> None:
    """A stream its worker never completed must not stay on the page as if still live."""
    conversation, communicator = await page_socket(user)
    publish_delta(conversation.pk, kind="thought", key="t", text="hmm")
    publish_delta(conversation.pk, kind="tool", key="call-1", text="running")
    for _ in range(2):
        assert START in await communicator.receive_from(timeout=5)

    await append(conversation, AcpTurnEvent(stop_reason="cancelled"))
    [frame] = await receive_rows(communicator, 1)
    deleted = re.findall(r'<div id="([^"]+)" hx-swap-oob="delete"></div>', frame)
    assert deleted == [bubble_id("thought", "t"), bubble_id("tool", "call-1")]
    await append(conversation, AcpTurnEvent(stop_reason="end_turn"))
    [frame] = await receive_rows(communicator, 1)
    assert 'hx-swap-oob="delete"' not in frame  # nothing was left
    await communicator.disconnect()


async def test_too_many_open_bubbles_drop_the_oldest(user, monkeypatch) -> None:
    monkeypatch.setattr(ui_consumers, "MAX_LIVE_BUBBLES", 2)
    conversation, communicator = await page_socket(user)
    for key in ("a", "b", "c"):
        publish_delta(conversation.pk, kind="message", key=key, text=key)
    frames = [await communicator.receive_from(timeout=5) for _ in range(3)]
    assert 'hx-swap-oob="delete"' not in frames[0] + frames[1]
    assert frames[2].startswith(f'<div id="{bubble_id("message", "a")}" hx-swap-oob="delete">')
    assert START in frames[2]
    await communicator.disconnect()
