"""Failure and overdue alerts to the team's notification webhook, and completion callbacks,
against a real HTTP receiver on 127.0.0.1 that checks the signature. The send task runs
eagerly (its retries too); the outbox pass is called as the sweeper calls it."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from automations import manual, outbox
from automations.models import AutomationRun
from automations.outbox import notices_send
from automations.runs import start_pending_runs
from canvas.celery import app
from common.errors import InvalidInput
from conversations import store
from conversations.events import AgentMessageEvent, Status
from conversations.models import Conversation
from teams.notifications import notification_set
from teams.secrets import secret_create
from tests.http_server import QuietHandler, serving

from .conftest import PULL_REQUEST_OPENED, github_post

pytestmark = pytest.mark.django_db


@dataclass
class Receiver:
    plan: list[int] = field(default_factory=list)
    requests: list[dict] = field(default_factory=list)
    port: int = 0

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def to(self, path: str) -> list[dict]:
        return [r for r in self.requests if r["path"] == path]


@pytest.fixture
def receiver(loopback_allowed) -> Iterator[Receiver]:
    state = Receiver()

    class Handler(QuietHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            state.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            self.send_response(state.plan.pop(0) if state.plan else 200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    with serving(Handler) as port:
        state.port = port
        yield state


@pytest.fixture(autouse=True)
def eager() -> Iterator[None]:
    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = before


@pytest.fixture
def team_secret(user, team, receiver) -> str:
    """The team's notification webhook, at /team on the receiver: its signing secret."""
    return notification_set(by=user, team=team, url=receiver.url("/team")).secret


def verified(request: dict, secret: str) -> dict:
    """The body, after checking the signature the way a receiver would."""
    timestamp = request["headers"]["X-Canvas-Timestamp"]
    expected = hmac.new(
        secret.encode(), f"{timestamp}.{request['body']}".encode(), hashlib.sha256
    ).hexdigest()
    assert hmac.compare_digest(request["headers"]["X-Canvas-Signature"], f"v1={expected}")
    return json.loads(request["body"])


def test_a_failed_run_alerts_the_team_webhook_once(
    team, team_secret, receiver, make_automation, dispatched
):
    automation, secret = make_automation(prompt_template="{{ payload.missing }}")
    assert github_post(Client(), automation.pk, secret, PULL_REQUEST_OPENED).status_code == 422
    assert notices_send() == 1
    assert notices_send() == 0  # a second sweeper finds it claimed
    (alert,) = receiver.to("/team")
    body = verified(alert, team_secret)
    run = AutomationRun.objects.get()
    assert body["type"] == "automation.run_failed"
    assert body["automation"] == {"id": automation.pk, "name": "pr-review"}
    assert body["run"]["id"] == run.pk and body["run"]["status"] == "failed"
    assert "payload.missing" in body["run"]["error"] and "payload.missing" in body["text"]
    assert body["conversation"] is None
    assert run.__class__.objects.get().failure_alerted_at is not None


def test_a_conversation_that_errors_fails_its_run_and_alerts(
    user, team, team_secret, receiver, make_automation, dispatched
):
    automation, _ = make_automation(prompt_template="go")
    run = manual.run_now(by=user, team=team, automation_id=automation.pk).run
    Conversation.objects.filter(pk=run.conversation_id).update(status=Status.ERROR)
    start_pending_runs(grace_seconds=0)
    assert notices_send() == 1
    body = verified(receiver.to("/team")[0], team_secret)
    assert body["run"]["error"] == "the conversation ended error."
    assert body["conversation"]["id"] == str(run.conversation_id)
    assert body["conversation"]["url"] in body["text"]


def test_a_run_past_its_deadline_alerts_once_and_keeps_going(
    user, team, team_secret, receiver, make_automation, dispatched
):
    automation, _ = make_automation(prompt_template="go", deadline_minutes=5)
    run = manual.run_now(by=user, team=team, automation_id=automation.pk).run
    assert notices_send() == 0  # not late yet
    AutomationRun.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(minutes=6))
    assert notices_send() == 1
    assert notices_send() == 0
    body = verified(receiver.to("/team")[0], team_secret)
    assert body["type"] == "automation.run_overdue"
    assert "still going after 5 min" in body["text"]
    assert AutomationRun.objects.get(pk=run.pk).status == "started"


def test_the_completion_callback_posts_the_final_answer_signed_with_the_webhook_secret(
    user, team, receiver, make_automation, dispatched
):
    secret_create(by=user, team=team, name="TOKEN", value="tok-value-123456", description="")
    automation, secret = make_automation(
        prompt_template="go", callback_url=receiver.url("/done"), allowed_secrets=["TOKEN"]
    )
    run = manual.run_now(by=user, team=team, automation_id=automation.pk).run
    store.append(run.conversation_id,
                 [AgentMessageEvent(text="All green; tok-value-123456 was not needed.")])  # fmt: skip
    Conversation.objects.filter(pk=run.conversation_id).update(status=Status.FINISHED)
    start_pending_runs(grace_seconds=0)
    assert notices_send() == 1
    (callback,) = receiver.to("/done")
    body = verified(callback, secret)
    assert body["type"] == "automation.run_completed"
    assert body["run"]["status"] == "finished" and body["run"]["trigger"] == "manual"
    assert body["final_answer"] == "All green; <secret:TOKEN> was not needed."
    assert body["conversation"]["status"] == "finished"
    assert receiver.to("/team") == []  # a finished run alerts nobody
    assert notices_send() == 0


def test_without_a_team_webhook_or_callback_nothing_is_sent_and_nothing_waits(
    team, receiver, make_automation, dispatched
):
    automation, secret = make_automation(prompt_template="{{ payload.missing }}")
    github_post(Client(), automation.pk, secret, PULL_REQUEST_OPENED)
    assert notices_send() == 0
    run = AutomationRun.objects.get()
    assert run.failure_alerted_at is not None and run.callback_done_at is not None
    assert receiver.requests == []


def test_a_notice_the_broker_could_not_take_is_sent_by_the_next_pass(
    team, team_secret, receiver, make_automation, dispatched, monkeypatch
):
    automation, secret = make_automation(prompt_template="{{ payload.missing }}")
    github_post(Client(), automation.pk, secret, PULL_REQUEST_OPENED)
    real = outbox._enqueue
    monkeypatch.setattr(outbox, "_enqueue", lambda run_id, notice: False)
    assert notices_send() == 0
    assert AutomationRun.objects.get().failure_alerted_at is None
    monkeypatch.setattr(outbox, "_enqueue", real)
    assert notices_send() == 1 and len(receiver.to("/team")) == 1


def test_a_receiver_error_is_retried(team, team_secret, receiver, make_automation, dispatched):
    receiver.plan = [503, 500]
    automation, secret = make_automation(prompt_template="{{ payload.missing }}")
    github_post(Client(), automation.pk, secret, PULL_REQUEST_OPENED)
    notices_send()
    assert len(receiver.to("/team")) == 3  # two failures, then taken


def test_runs_that_ended_long_ago_are_not_reported_now(
    team, team_secret, receiver, make_automation, dispatched
):
    automation, secret = make_automation(prompt_template="{{ payload.missing }}")
    github_post(Client(), automation.pk, secret, PULL_REQUEST_OPENED)
    AutomationRun.objects.update(finished_at=timezone.now() - timedelta(days=2))
    assert notices_send() == 0
    assert receiver.requests == []
    assert AutomationRun.objects.get().failure_alerted_at is not None


def test_a_callback_url_on_a_blocked_network_is_refused(settings, make_automation):
    settings.CANVAS_ALLOWED_PRIVATE_NETWORKS = []
    with pytest.raises(InvalidInput, match="callback URL is refused"):
        make_automation(callback_url="http://127.0.0.1:9/done")
    with pytest.raises(InvalidInput, match="http"):
        make_automation(callback_url="ftp://example.com/done")
