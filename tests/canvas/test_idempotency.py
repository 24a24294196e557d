"""`Idempotency-Key` on POST /api/conversations and POST .../messages: a retry gets the first
answer and creates nothing twice; the key used for another request is a 422; two requests
racing with one key create one thing; keys expire after 24 hours."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from canvas.api import idempotency
from canvas.models import IdempotencyKey
from conversations import store
from conversations.models import Conversation
from orchestration import services
from tests.api import client_for
from tests.conftest import wait_for

CREATE = {"prompt": "hello", "model": "scripted"}


def post(client: Client, url: str, body, key: str | None = None):
    headers = {"Idempotency-Key": key} if key is not None else {}
    return client.post(url, data=json.dumps(body), content_type="application/json", headers=headers)


@pytest.mark.django_db
def test_a_retried_create_returns_the_first_answer_and_creates_nothing(user, dispatched):
    api = client_for(user)
    first = post(api, "/api/conversations", CREATE, key="create-1")
    again = post(api, "/api/conversations", CREATE, key="create-1")
    assert first.status_code == again.status_code == 201
    assert again.content == first.content
    assert again["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first
    assert Conversation.objects.count() == 1 and len(dispatched) == 1

    # Spacing and key order are not a different body; no key at all is a new request.
    same = '{ "model": "scripted",  "prompt": "hello" }'
    respaced = api.post(
        "/api/conversations", data=same, content_type="application/json",
        headers={"Idempotency-Key": "create-1"},
    )  # fmt: skip
    assert respaced.status_code == 201 and respaced.json()["id"] == first.json()["id"]
    assert post(api, "/api/conversations", CREATE).json()["id"] != first.json()["id"]
    assert Conversation.objects.count() == 2


@pytest.mark.django_db
def test_a_retried_message_is_posted_once(user, dispatched):
    api = client_for(user)
    conversation_id = post(api, "/api/conversations", CREATE).json()["id"]
    url = f"/api/conversations/{conversation_id}/messages"
    first = post(api, url, {"text": "more"}, key="msg-1")
    again = post(api, url, {"text": "more"}, key="msg-1")
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json() and again["Idempotent-Replayed"] == "true"
    texts = [e.event.text for e in store.load(conversation_id) if e.event.type == "message.user"]
    assert texts == ["hello", "more"]


@pytest.mark.django_db
def test_the_same_key_for_another_request_is_a_422_and_does_nothing(user, dispatched):
    api = client_for(user)
    first = post(api, "/api/conversations", CREATE, key="k")
    other = post(api, "/api/conversations", {**CREATE, "prompt": "something else"}, key="k")
    assert other.status_code == 422
    body = other.json()
    assert body["error"] == "idempotency_key_reused" and "Idempotency-Key" in body["detail"]
    url = f"/api/conversations/{first.json()['id']}/messages"
    elsewhere = post(api, url, {"text": "hello"}, key="k")
    assert elsewhere.status_code == 422
    assert Conversation.objects.count() == 1
    assert [e.event.type for e in store.load(first.json()["id"])].count("message.user") == 1


@pytest.mark.django_db
def test_keys_are_per_user(user, other_user, dispatched):
    mine = post(client_for(user), "/api/conversations", CREATE, key="shared-name")
    theirs = post(client_for(other_user), "/api/conversations", CREATE, key="shared-name")
    assert mine.status_code == theirs.status_code == 201
    assert mine.json()["id"] != theirs.json()["id"]


@pytest.mark.django_db
def test_an_error_is_not_remembered(user, dispatched):
    api = client_for(user)
    refused = post(api, "/api/conversations", {**CREATE, "model": "no-such-model"}, key="fix")
    assert refused.status_code == 400
    assert post(api, "/api/conversations", CREATE, key="fix").status_code == 201


@pytest.mark.django_db
def test_a_bad_key_is_a_400(user, dispatched):
    api = client_for(user)
    for bad in ("x" * 256, ""):
        response = post(api, "/api/conversations", CREATE, key=bad)
        assert response.status_code == 400, bad
        assert response.json()["error"] == "invalid_input"
    assert Conversation.objects.count() == 0


@pytest.mark.django_db
def test_keys_expire_after_24_hours_and_are_purged(user, other_user, dispatched):
    api = client_for(user)
    first = post(api, "/api/conversations", CREATE, key="daily").json()
    stale = post(client_for(other_user), "/api/conversations", CREATE, key="old").json()
    assert stale["id"]
    IdempotencyKey.objects.update(created_at=timezone.now() - timedelta(hours=24, seconds=1))

    # An expired key is a new request, even with another body; storing it purges the others.
    renewed = post(api, "/api/conversations", {**CREATE, "prompt": "next day"}, key="daily")
    assert renewed.status_code == 201 and renewed.json()["id"] != first["id"]
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["daily"]
    assert post(api, "/api/conversations", CREATE, key="daily").status_code == 422

    IdempotencyKey.objects.update(created_at=timezone.now() - timedelta(hours=23))
    assert idempotency.purge_expired() == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
def test_two_requests_racing_with_one_key_create_one_conversation(user, dispatched, monkeypatch):
    """The first request holds its transaction open inside the service until the second is
    seen waiting on a database lock; then both finish."""
    inside, release = threading.Event(), threading.Event()
    create = services.conversation_create

    def held_open(**kwargs):
        conversation = create(**kwargs)
        inside.set()
        assert release.wait(30)
        return conversation

    monkeypatch.setattr(services, "conversation_create", held_open)
    api = client_for(user)
    answers: dict[str, object] = {}

    def send(name: str) -> None:
        try:
            answers[name] = post(api, "/api/conversations", CREATE, key="race")
        finally:
            connection.close()

    first = threading.Thread(target=send, args=("first",))
    first.start()
    assert inside.wait(30)
    second = threading.Thread(target=send, args=("second",))
    second.start()
    wait_for(_someone_waits_on_a_lock, 30, 0.05, "the second request to wait on the key")
    release.set()
    first.join(30)
    second.join(30)

    assert answers["first"].status_code == answers["second"].status_code == 201
    assert answers["second"].content == answers["first"].content
    assert answers["second"]["Idempotent-Replayed"] == "true"
    assert Conversation.objects.count() == 1 and len(dispatched) == 1


def _someone_waits_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0] > 0
