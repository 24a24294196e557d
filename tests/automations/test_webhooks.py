"""POST /hooks/{id}: each kind of delivery gets its status, and only an accepted one starts a
conversation."""

from __future__ import annotations

import json
import threading
import time

import pytest
from django.db import connection, connections
from django.test import Client

from automations import runs
from automations.models import Automation, AutomationRun
from automations.runs import start_pending_runs
from automations.signatures import sign_github, sign_timestamped
from automations.templating import PAYLOAD_NOTE
from conversations import store
from conversations.models import Conversation
from tests.runs import drive, script

from .conftest import PULL_REQUEST_OPENED, RENDERED, github_post, timestamped_post

pytestmark = pytest.mark.django_db


@pytest.fixture
def hook(make_automation, dispatched):
    return make_automation()


def user_messages(conversation_id) -> list[str]:
    return [s.event.text for s in store.load(conversation_id) if s.event.type == "message.user"]


def conversations() -> int:
    return Conversation.objects.count()


def test_a_signed_github_pull_request_starts_a_conversation_with_the_rendered_prompt(
    hook, dispatched
):
    automation, secret = hook
    response = github_post(Client(), automation.pk, secret, PULL_REQUEST_OPENED)
    assert response.status_code == 202, response.content
    body = response.json()
    run = AutomationRun.objects.get(pk=body["run_id"])
    assert body["conversation_id"] == str(run.conversation_id)
    assert run.status == "started" and run.started_at is not None
    assert run.prompt == RENDERED and run.payload == PULL_REQUEST_OPENED
    body_mac = sign_github(secret, json.dumps(PULL_REQUEST_OPENED).encode())
    assert run.delivery_key == body_mac.replace("=", ":") and run.trigger == "webhook"
    assert run.headers["X-Github-Delivery"] == "d-1"  # kept for people, never the key
    assert run.headers["X-Hub-Signature-256"] == "[redacted]"
    assert run.headers["X-Github-Event"] == "pull_request"
    assert secret not in json.dumps(run.headers)
    conversation = run.conversation
    assert conversation.team_id == automation.team_id and conversation.model == "scripted"
    assert conversation.owner == automation.created_by
    assert "untrusted_payload" not in conversation.title  # the quotes are for the model
    assert "Fix the flaky login test" in conversation.title
    texts = user_messages(conversation.pk)
    assert texts == [RENDERED]
    assert [c for c, _ in dispatched] == [str(conversation.pk)]


def test_a_timestamped_delivery_is_accepted(hook):
    automation, secret = hook
    response = timestamped_post(Client(), automation.pk, secret, PULL_REQUEST_OPENED)
    assert response.status_code == 202, response.content
    assert conversations() == 1


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"X-Hub-Signature-256": sign_github("not-the-secret", b"{}")},
        {"X-Hub-Signature-256": "sha256=" + "0" * 64},
        {"X-Canvas-Signature": "t=1,v1=00"},
    ],
    ids=["missing", "forged-github", "zeros", "malformed-timestamped"],
)
def test_missing_or_forged_signatures_are_401_and_start_nothing(hook, headers):
    automation, _ = hook
    response = Client().post(f"/hooks/{automation.pk}", data=json.dumps(PULL_REQUEST_OPENED),
                             content_type="application/json", headers=headers)  # fmt: skip
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized" and response.json()["detail"]
    assert conversations() == 0 and not AutomationRun.objects.exists()


def test_a_signature_of_another_body_is_refused(hook):
    automation, secret = hook
    signature = sign_github(secret, json.dumps({"action": "closed"}).encode())
    response = github_post(Client(), automation.pk, secret, PULL_REQUEST_OPENED,
                           signature=signature)  # fmt: skip
    assert response.status_code == 401 and conversations() == 0


def test_a_stale_timestamp_is_401(hook):
    automation, secret = hook
    response = timestamped_post(Client(), automation.pk, secret, PULL_REQUEST_OPENED,
                                at=int(time.time()) - 301)  # fmt: skip
    assert response.status_code == 401 and "seconds from now" in response.json()["detail"]
    assert conversations() == 0


def test_a_repeated_github_delivery_starts_nothing(hook):
    automation, secret = hook
    first = github_post(Client(), automation.pk, secret, PULL_REQUEST_OPENED, delivery="same")
    again = github_post(Client(), automation.pk, secret, PULL_REQUEST_OPENED, delivery="same")
    assert first.status_code == 202 and again.status_code == 200
    assert again.json() == {"status": "duplicate", "run_id": first.json()["run_id"]}
    assert conversations() == 1 and AutomationRun.objects.count() == 1


def test_a_replayed_timestamped_signature_starts_nothing(hook):
    automation, secret = hook
    body = json.dumps(PULL_REQUEST_OPENED).encode()
    header = sign_timestamped(secret, body, int(time.time()))
    answers = [
        Client().post(f"/hooks/{automation.pk}", data=body, content_type="application/json",
                      headers={"X-Canvas-Signature": header}).status_code
        for _ in range(2)
    ]  # fmt: skip
    assert answers == [202, 200] and conversations() == 1


def test_an_oversized_body_is_413(hook, settings):
    settings.CANVAS_WEBHOOK_MAX_BYTES = 100
    automation, secret = hook
    payload = {"pad": "x" * 200}
    response = github_post(Client(), automation.pk, secret, payload)
    assert response.status_code == 413 and response.json()["error"] == "too_large"
    assert conversations() == 0 and not AutomationRun.objects.exists()


@pytest.mark.parametrize("change", ["disabled", "unknown", "schedule"])
def test_disabled_unknown_or_scheduled_automations_are_404(hook, change):
    automation, secret = hook
    target = automation.pk
    if change == "disabled":
        Automation.objects.filter(pk=target).update(enabled=False)
    elif change == "unknown":
        target += 1000
    else:
        Automation.objects.filter(pk=target).update(trigger="schedule", cron="0 3 * * *")
    response = github_post(Client(), target, secret, PULL_REQUEST_OPENED)
    assert response.status_code == 404 and response.json()["error"] == "not_found"
    assert conversations() == 0


def test_an_id_beyond_any_row_is_404_not_500(hook):
    response = Client().post(f"/hooks/{2**70}", data=b"{}", content_type="application/json")
    assert response.status_code == 404


def test_a_filtered_out_delivery_is_recorded_as_ignored(make_automation, dispatched):
    automation, secret = make_automation(filter="action == 'closed'")
    response = github_post(Client(), automation.pk, secret, PULL_REQUEST_OPENED)
    assert response.status_code == 200
    run = AutomationRun.objects.get()
    assert response.json() == {"status": "ignored", "run_id": run.pk}
    assert run.status == "ignored" and run.conversation is None and conversations() == 0


def test_a_filter_that_passes_starts(make_automation, dispatched):
    automation, secret = make_automation(
        filter="action == 'opened' && pull_request.labels[?name=='ci']"
    )
    assert github_post(Client(), automation.pk, secret, PULL_REQUEST_OPENED).status_code == 202


def test_over_the_rate_limit_is_429(hook, settings):
    settings.CANVAS_WEBHOOK_RATE_PER_MINUTE = 2
    automation, secret = hook
    answers = [
        github_post(Client(), automation.pk, secret, {"action": "closed", "n": i}) for i in range(3)
    ]
    assert [a.status_code for a in answers[:2]] != [429, 429]
    assert answers[2].status_code == 429 and int(answers[2]["Retry-After"]) >= 1
    assert AutomationRun.objects.count() == 2


def test_forged_deliveries_do_not_use_up_the_rate(hook, settings):
    settings.CANVAS_WEBHOOK_RATE_PER_MINUTE = 1
    automation, secret = hook
    for _ in range(3):
        github_post(Client(), automation.pk, "wrong", PULL_REQUEST_OPENED)
    assert github_post(Client(), automation.pk, secret, PULL_REQUEST_OPENED).status_code == 202


@pytest.mark.parametrize(
    "body, detail",
    [
        (b"not json", "must be JSON"),
        (b'{"a": "\\u0000"}', "NUL"),
        (b'{"a": "\\ud800"}', "not valid Unicode"),
        (b"[" * 100 + b"]" * 100, "nests deeper"),
        (b"[" * 100_000 + b"]" * 100_000, "must be JSON"),
    ],
    ids=["text", "nul", "surrogate", "deep", "very-deep"],
)
def test_a_body_that_is_not_storable_json_is_400(hook, body, detail):
    automation, secret = hook
    response = github_post(Client(), automation.pk, secret, None, body=body)
    assert response.status_code == 400 and detail in response.json()["detail"]
    assert conversations() == 0 and not AutomationRun.objects.exists()


def test_a_missing_template_field_fails_the_run_with_its_path(make_automation, dispatched):
    automation, secret = make_automation(prompt_template="Look at {{ payload.issue.title }}")
    response = github_post(Client(), automation.pk, secret, PULL_REQUEST_OPENED)
    assert response.status_code == 422
    run = AutomationRun.objects.get()
    assert run.status == "failed" and "payload.issue.title" in run.error
    assert response.json() == {"error": "unprocessable", "detail": run.error, "run_id": run.pk}
    assert conversations() == 0


def test_a_conversation_the_service_refuses_fails_the_run(hook):
    automation, secret = hook
    Automation.objects.filter(pk=automation.pk).update(model="no-such-profile")
    response = github_post(Client(), automation.pk, secret, PULL_REQUEST_OPENED)
    assert response.status_code == 400
    run = AutomationRun.objects.get()
    assert run.status == "failed" and "no-such-profile" in run.error
    assert response.json()["run_id"] == run.pk and response.json()["detail"] == run.error
    assert conversations() == 0


def test_payload_secrets_are_redacted_in_the_record(make_automation, user, team, dispatched):
    from teams.secrets import secret_create

    secret_create(by=user, team=team, name="DEPLOY_TOKEN", value="tok-very-private-123")
    automation, secret = make_automation(prompt_template="{{ payload.note }}")
    payload = {"note": "leaked tok-very-private-123 here"}
    assert github_post(Client(), automation.pk, secret, payload).status_code == 202
    run = AutomationRun.objects.get()
    assert "tok-very-private-123" not in json.dumps(run.payload) + run.prompt


@pytest.mark.django_db(transaction=True)
def test_the_delivery_is_committed_before_its_conversation_and_a_crash_is_recovered(
    make_automation, dispatched, monkeypatch
):
    automation, secret = make_automation()
    seen: list[int] = []

    def crash(automation, run):
        # Another connection sees the run: it was committed before this was called.
        def look():
            seen.append(AutomationRun.objects.filter(pk=run.pk, status="accepted").count())
            connections.close_all()

        thread = threading.Thread(target=look)
        thread.start()
        thread.join()
        raise RuntimeError("the worker died here")

    real = runs._create
    monkeypatch.setattr(runs, "_create", crash)
    response = github_post(Client(), automation.pk, secret, PULL_REQUEST_OPENED)
    assert seen == [1]
    assert response.status_code == 202
    assert response.json()["conversation_id"] is None and conversations() == 0
    run = AutomationRun.objects.get()
    assert run.status == "accepted"

    monkeypatch.setattr(runs, "_create", real)
    assert start_pending_runs(grace_seconds=0) == 1
    run.refresh_from_db()
    assert run.status == "started" and run.conversation is not None and conversations() == 1
    assert start_pending_runs(grace_seconds=0) == 0  # started once
    assert not connection.in_atomic_block


@pytest.mark.django_db(transaction=True)  # slices commit and use their own connections
def test_end_to_end_a_pull_request_runs_to_finished(make_automation, dispatched):
    template = script(
        {"say": "Reviewed {{ payload.repository.full_name }} PR {{ payload.number }}"}
    )
    automation, secret = make_automation(prompt_template=template)
    response = github_post(Client(), automation.pk, secret, PULL_REQUEST_OPENED)
    assert response.status_code == 202, response.content
    drive(dispatched)
    conversation = Conversation.objects.get(pk=response.json()["conversation_id"])
    assert conversation.status == "finished"
    messages = user_messages(conversation.pk)
    said = ("Reviewed <untrusted_payload>acme/web</untrusted_payload> PR "
            "<untrusted_payload>42</untrusted_payload>")  # fmt: skip
    assert messages[0] == script({"say": said}) + PAYLOAD_NOTE
    start_pending_runs(grace_seconds=0)
    run = AutomationRun.objects.get()
    assert run.status == "finished" and run.finished_at is not None
