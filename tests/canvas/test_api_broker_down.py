"""With the Celery broker down, the API answers from what it committed: the JSON answer with
its usual status, the rows saved and the next slice recorded on the conversation; the sweeper
sends that slice again once the broker is back. The broker is really down: this process's Celery
connects to a port nothing listens on."""

from __future__ import annotations

import logging
import time

import kombu.pools
import pytest
from django.test import Client

from canvas.celery import app as celery_app
from conversations import store
from conversations.models import Conversation
from orchestration.chain.slices import run_slice
from tests.conftest import wait_for
from tests.faults.services import free_port
from tests.runs import script

pytestmark = pytest.mark.django_db(transaction=True)

FINISH = {"tool": "finish", "args": {"message": "done"}}


def _repoint(url: str) -> None:
    """Make this process's Celery connect to `url` from its next send (drops pooled
    connections, as Celery does after a fork)."""
    celery_app.conf.broker_url = url
    # kombu keeps its pools in process-wide groups keyed by the connection: closing only
    # Celery's would leave a closed pool there for the next send to the same URL to find.
    kombu.pools.reset()
    celery_app._pool = None
    celery_app.amqp._producer_pool = None


@pytest.fixture
def broker_down():
    saved = celery_app.conf.broker_url
    _repoint(f"redis://127.0.0.1:{free_port()}/0")
    yield
    _repoint(saved)


@pytest.fixture
def api(api_token) -> Client:
    # No re-raising: the test sees exactly what a client would.
    return Client(headers={"Authorization": f"Bearer {api_token}"}, raise_request_exception=False)


def post(client: Client, url: str, body=None):
    return client.post(url, data=body or {}, content_type="application/json")


def _row(conversation_id) -> Conversation:
    return Conversation.objects.get(pk=conversation_id)


def test_every_run_starting_post_answers_json_while_the_broker_is_down(api, broker_down, caplog):
    caplog.set_level(logging.WARNING, logger="orchestration.chain.dispatch")
    created = post(
        api, "/api/conversations",
        {"prompt": script({"tool": "terminal", "args": {"command": "echo hi"}}, FINISH),
         "model": "scripted", "confirmation_mode": "always"},
    )  # fmt: skip
    assert created.status_code == 201, created.content
    assert created["Content-Type"].startswith("application/json")
    conversation_id = created.json()["id"]
    row = _row(conversation_id)
    assert row.status == "running" and row.run_slice
    assert [e.event.type for e in store.load(row.pk)][:2] == ["system.prompt", "message.user"]
    assert "could not enqueue" in caplog.text and conversation_id in caplog.text

    # The worker's side of a lost message: the recorded slice still runs when it arrives.
    run_slice(conversation_id, row.run_slice)
    assert _row(conversation_id).status == "waiting_for_confirmation"
    url = f"/api/conversations/{conversation_id}"
    (pending,) = api.get(f"{url}/pending").json()["pending"]

    approved = post(api, f"{url}/actions/{pending['action_id']}/approve")
    assert approved.status_code == 200, approved.content
    assert approved.json() == {"decision": "approved", "status": "running"}
    assert _row(conversation_id).run_slice

    assert post(api, f"{url}/pause").status_code == 200
    resumed = post(api, f"{url}/run")
    assert resumed.status_code == 202 and resumed.json() == {"status": "running"}
    slice_after_run = _row(conversation_id).run_slice
    assert slice_after_run

    assert post(api, f"{url}/pause").status_code == 200
    message = post(api, f"{url}/messages", {"text": "go on"})
    assert message.status_code == 201, message.content
    assert message.json()["status"] == "running"
    row = _row(conversation_id)
    assert row.run_slice and row.run_slice != slice_after_run
    assert store.load(row.pk)[-3].event.type == "message.user"


@pytest.mark.worker
@pytest.mark.timeout(120)
def test_the_sweeper_sends_the_slice_once_the_broker_is_back(api, start_worker):
    saved = celery_app.conf.broker_url
    _repoint(f"redis://127.0.0.1:{free_port()}/0")
    try:
        created = post(
            api, "/api/conversations", {"prompt": script({"say": "hello"}), "model": "scripted"}
        )
    finally:
        _repoint(saved)
    assert created.status_code == 201, created.content
    conversation_id = created.json()["id"]

    # Nothing was sent. A worker and its sweeper, on the default settings, find the slice
    # unclaimed past its due time and send it again.
    start_worker(beat=True)
    back = time.monotonic()
    wait_for(lambda: _row(conversation_id).status == "finished", 60, 0.1, "the run to finish")
    print(f"run finished {time.monotonic() - back:.1f} s after the worker came up")
