"""A team secret printed by an agent, every way we could think of, never leaves in clear.

A scripted conversation runs in-process (slices driven by hand) and prints the secret plainly,
split across output chunks at every split point, base64 (both alphabets, every offset),
URL-encoded, JSON-encoded, hex, HTML-escaped and in Python reprs. Then every place it could surface is searched: the event
table, the Redis test database and its pub/sub traffic, what the store handed to the
broadcaster, websocket frames, the API, and the logs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid

import msgpack
import pytest
import redis
import redis.asyncio as aredis
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.db import connection
from django.test import Client

from canvas.asgi import application
from canvas.logging import RedactSecretsFilter
from conversations import broadcast, store
from conversations.broadcast import conversation_group
from conversations.events import UserMessageEvent
from orchestration import services
from orchestration.chain.slices import run_slice
from teams.secrets import secret_create
from teams.services import team_default_for
from tests.factories import make_conversation
from tests.leaks import leaks, strings_in

pytestmark = pytest.mark.django_db(transaction=True)

LABEL = "<secret:MY_TOKEN>"
# Quotes, a backslash, URL-special characters and a non-ASCII letter: every encoding changes it.
VALUE = 'tok_9fA2"qu\\ote+sl/ash&eq=é~Z_' + uuid.uuid4().hex[:10]

B64_PY = (
    "import base64, sys; v = sys.argv[1].encode(); "
    "[print(f(b'p' * i + v + b's' * j).decode()) "
    "for f in (base64.b64encode, base64.urlsafe_b64encode) for i in range(3) for j in range(3)]"
)
URL_PY = (
    "import sys, urllib.parse as u; v = sys.argv[1]; "
    "print(u.quote(v)); print(u.quote(v, safe='')); print(u.quote_plus(v))"
)
JSON_PY = (
    "import json, sys; v = sys.argv[1]; "
    "print(json.dumps(v)); print(json.dumps(v, ensure_ascii=False)); print(json.dumps({'k': v}))"
)
MARKUP_PY = (
    "import html, sys; v = sys.argv[1]; "
    "print(html.escape(v)); print(ascii(v)); print(repr(v.encode())); print(repr(v + chr(39)))"
)
COMMANDS = [
    "echo $MY_TOKEN",
    # Two reads of the output per line: the secret split at every character.
    'for k in $(seq 0 ${#MY_TOKEN}); do printf "%s" "${MY_TOKEN:0:k}"; sleep 0.05; '
    'printf "%s\\n" "${MY_TOKEN:k}"; done',
    'printf "%s" "$MY_TOKEN" | base64; printf "ab%s" "$MY_TOKEN" | base64 -w0; echo; '
    'printf "a%sxyz" "$MY_TOKEN" | base64 | tr "+/" "-_"',
    f'python3 -c "{B64_PY}" "$MY_TOKEN"',
    f'python3 -c "{URL_PY}" "$MY_TOKEN"',
    f'python3 -c "{JSON_PY}" "$MY_TOKEN"',
    f'python3 -c "{MARKUP_PY}" "$MY_TOKEN"',
    'printf "%s" "$MY_TOKEN" | od -An -tx1 | tr -d " \\n"; echo',
    'echo "failed with ${MY_TOKEN}" >&2; exit 3',
]


def script() -> str:
    turns = [{"tool": "terminal", "args": {"command": c}} for c in COMMANDS]
    return json.dumps({"script": [*turns, {"tool": "finish", "args": {"message": "done"}}]})


def drive(dispatched: list) -> None:
    for _ in range(50):
        if not dispatched:
            return
        run_slice(*dispatched.pop(0))
    raise AssertionError("the run did not stop")


def assert_clean(where: str, text: str) -> None:
    found = leaks(text, VALUE)
    assert not found, f"{where} holds the secret as {found}"


def event_table_texts() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT payload::text FROM conversations_conversationevent")
        rows = [row[0] for row in cursor.fetchall()]
    decoded = ["\n".join(strings_in(json.loads(row))) for row in rows]
    return rows + decoded


def redis_texts(url: str) -> list[str]:
    client = redis.Redis.from_url(url)
    texts = []
    for key in client.scan_iter():
        kind = client.type(key).decode()
        if kind == "string":
            values = [client.get(key)]
        elif kind == "list":
            values = client.lrange(key, 0, -1)
        elif kind == "hash":
            values = [b for pair in client.hgetall(key).items() for b in pair]
        elif kind == "set":
            values = list(client.smembers(key))
        elif kind == "zset":
            values = client.zrange(key, 0, -1)
        else:
            values = []
        texts += [v.decode("utf-8", "replace") for v in [key, *values] if v is not None]
    return texts


async def listen(url: str, channel: str, ready: asyncio.Event, out: list[str]) -> None:
    """Every message published on the conversation's channel-layer group, decoded."""
    client = aredis.Redis.from_url(url)
    pubsub = client.pubsub()
    await pubsub.subscribe(channel)
    ready.set()
    try:
        while True:
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=0.2)
            if message is not None:
                data = message["data"]
                out.append(data.decode("utf-8", "replace"))
                body = msgpack.unpackb(data, raw=False)  # the pub/sub layer's format
                out.append(json.dumps(body, ensure_ascii=False))
    finally:
        await pubsub.aclose()
        await client.aclose()


async def heard(out: list[str], last_seq: int) -> None:
    """Until the listener has the hint that ends at `last_seq` (the last one published)."""
    while not any(f'"last_seq": {last_seq}' in text for text in out):
        await asyncio.sleep(0.02)


async def frames(communicator: WebsocketCommunicator) -> list[dict]:
    """Frames up to the end of the run (a receive timeout would cancel the consumer)."""
    received = [json.loads(await communicator.receive_from(timeout=10))]
    while received[-1]["type"] != "run.finished":
        received.append(json.loads(await communicator.receive_from(timeout=10)))
    assert await communicator.receive_nothing(timeout=0.5)
    return received


async def test_a_printed_secret_is_redacted_everywhere(
    user, api_token, dispatched, settings, monkeypatch, caplog
) -> None:
    caplog.handler.addFilter(RedactSecretsFilter())
    caplog.set_level(logging.DEBUG)
    team = await database_sync_to_async(team_default_for)(user)
    await database_sync_to_async(secret_create)(
        by=user, team=team, name="MY_TOKEN", value=VALUE, description="test"
    )
    conversation = await database_sync_to_async(services.conversation_create)(
        owner=user, model="scripted", prompt=script(), title="secrets"
    )

    published: list[list[dict]] = []
    real_publish = broadcast.publish_events

    def capture(conversation_id, records, *, status):
        published.append(records)
        real_publish(conversation_id, records, status=status)

    monkeypatch.setattr(broadcast, "publish_events", capture)

    pubsub_texts: list[str] = []
    subscribed = asyncio.Event()
    # The layer's own channel name: its prefix differs per deployment (and xdist worker).
    group_channel = get_channel_layer().group_channel(conversation_group(conversation.pk))
    listener = asyncio.create_task(
        listen(settings.REDIS_URL, group_channel, subscribed, pubsub_texts)
    )
    await asyncio.wait_for(subscribed.wait(), 5)

    headers = [(b"authorization", f"Bearer {api_token}".encode())]
    url = f"/ws/conversations/{conversation.pk}/events?after_seq=0"
    communicator = WebsocketCommunicator(application, url, headers=headers)
    connected, _ = await communicator.connect()
    assert connected

    await database_sync_to_async(drive)(dispatched)
    received = await frames(communicator)
    await communicator.disconnect()
    await asyncio.wait_for(heard(pubsub_texts, published[-1][-1]["seq"]), 5)
    listener.cancel()

    # The commands ran and printed it: what arrived is the label, in every output.
    results = [f for f in received if f["type"] == "tool.result"]
    assert len(results) == len(COMMANDS) + 1
    assert received[-1]["type"] == "run.finished" and received[-1]["status"] == "finished"
    for result in results[:-1]:
        assert LABEL in result["content"], result["content"]
    assert results[-2]["exit_code"] == 3
    assert results[1]["content"].count(LABEL) == len(VALUE) + 1

    for text in await database_sync_to_async(event_table_texts)():
        assert_clean("the event table", text)
    assert published and pubsub_texts
    for records in published:
        assert_clean("a broadcast", json.dumps(records, ensure_ascii=False))
    for text in pubsub_texts:
        assert_clean("a Redis pub/sub message", text)
    for text in await database_sync_to_async(redis_texts)(settings.REDIS_URL):
        assert_clean("Redis", text)
    for frame in received:
        assert_clean("a websocket frame", json.dumps(frame, ensure_ascii=False))
        assert_clean("a websocket frame", "\n".join(strings_in(frame)))

    api = Client(headers={"Authorization": f"Bearer {api_token}"})
    for path in ("/events?after_seq=0", ""):
        response = await database_sync_to_async(api.get)(
            f"/api/conversations/{conversation.pk}{path}"
        )
        assert response.status_code == 200
        assert_clean("the API", response.content.decode())
        assert_clean("the API", "\n".join(strings_in(response.json())))

    logging.getLogger("tests.secrets").info(f"the token is {VALUE} (oops)")
    assert f"the token is {LABEL} (oops)" in caplog.text
    assert_clean("the logs", caplog.text)


def test_a_secret_created_a_moment_ago_is_redacted_on_the_next_append(user) -> None:
    team = team_default_for(user)
    conversation = make_conversation(user)
    secret_create(by=user, team=team, name="OLDER", value="older-value-456")
    store.append(conversation.pk, [UserMessageEvent(text="older-value-456 warms the cache")])
    # The store caches the version-1 redactor; only the version read tells it about FRESH,
    # exactly as for a secret written by another process.
    secret_create(by=user, team=team, name="FRESH", value="fresh-value-123")
    stored = store.append(
        conversation.pk, [UserMessageEvent(text="fresh-value-123 and older-value-456")]
    )
    assert stored[0].event.text == "<secret:FRESH> and <secret:OLDER>"
    assert [s.event.text for s in store.load(conversation.pk)] == [
        "<secret:OLDER> warms the cache",
        "<secret:FRESH> and <secret:OLDER>",
    ]


def test_a_team_without_secrets_is_stored_as_is(user, other_user) -> None:
    secret_create(
        by=other_user, team=team_default_for(other_user), name="THEIRS", value="mallory-value"
    )
    conversation = make_conversation(user)
    stored = store.append(conversation.pk, [UserMessageEvent(text="mallory-value is not ours")])
    assert stored[0].event.text == "mallory-value is not ours"


def test_a_secret_in_the_prompt_is_redacted_from_the_title_too(user, dispatched) -> None:
    team = team_default_for(user)
    secret_create(by=user, team=team, name="MY_TOKEN", value=VALUE)
    team.refresh_from_db()
    conversation = services.conversation_create(
        owner=user, model="scripted", prompt=f"deploy with {VALUE} please"
    )
    assert conversation.title == f"deploy with {LABEL} please"
    assert VALUE not in store.load(conversation.pk)[1].event.text
