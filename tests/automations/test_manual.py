"""Run now and Retry: runs a person starts, through the service and the API."""

from __future__ import annotations

import pytest
from django.test import Client

from automations import manual
from automations.models import AutomationRun
from common.errors import Conflict, Forbidden, InvalidInput, NotFound
from conversations.models import Conversation
from teams.models import AuditRecord
from teams.services import member_add

from .conftest import PULL_REQUEST_OPENED, RENDERED, TEMPLATE, github_post

pytestmark = pytest.mark.django_db


def test_run_now_renders_the_payload_and_starts_a_conversation(
    user, team, make_automation, dispatched
):
    automation, _ = make_automation()
    outcome = manual.run_now(by=user, team=team, automation_id=automation.pk,
                             payload=PULL_REQUEST_OPENED)  # fmt: skip
    run = outcome.run
    assert outcome.failure is None
    assert (run.status, run.trigger, run.prompt, run.started_by) == (
        "started", "manual", RENDERED, user,
    )  # fmt: skip
    assert run.delivery_key.startswith("manual:")
    assert Conversation.objects.get(pk=run.conversation_id).team_id == team.pk
    kinds = AuditRecord.objects.filter(team=team, kind__startswith="automation.run")
    assert list(kinds.values_list("kind", flat=True)) == ["automation.run_now"]


def test_run_now_of_a_template_that_needs_a_missing_field_fails_naming_it(
    user, team, make_automation, dispatched
):
    automation, _ = make_automation()
    run = manual.run_now(by=user, team=team, automation_id=automation.pk).run
    assert run.status == "failed" and "payload.repository" in run.error
    assert run.conversation_id is None and dispatched == []


@pytest.mark.parametrize("payload", [[1, 2], "text", {"a": "nul\0"}])
def test_run_now_refuses_a_payload_that_is_not_a_clean_object(user, team, make_automation, payload):
    automation, _ = make_automation()
    with pytest.raises(InvalidInput):
        manual.run_now(by=user, team=team, automation_id=automation.pk, payload=payload)
    assert AutomationRun.objects.count() == 0


def test_run_now_follows_the_concurrency_rule(user, team, make_automation, dispatched):
    automation, _ = make_automation(prompt_template="go")
    first = manual.run_now(by=user, team=team, automation_id=automation.pk).run
    second = manual.run_now(by=user, team=team, automation_id=automation.pk).run
    assert first.status == "started"
    assert second.status == "skipped" and "still going" in second.error


def test_retry_starts_the_same_payload_again_with_the_template_as_it_is_now(
    user, team, make_automation, dispatched
):
    automation, secret = make_automation(prompt_template="{{ payload.nope }}")
    response = github_post(Client(), automation.pk, secret, PULL_REQUEST_OPENED)
    assert response.status_code == 422
    failed = AutomationRun.objects.get()
    automation.prompt_template = TEMPLATE
    automation.save()
    retried = manual.run_retry(by=user, team=team, run_id=failed.pk).run
    assert (retried.status, retried.prompt, retried.retry_of_id) == ("started", RENDERED, failed.pk)
    assert retried.payload == failed.payload
    failed.refresh_from_db()
    assert failed.status == "failed"  # the history keeps what happened


def test_only_ended_runs_that_did_not_finish_can_be_retried(
    user, team, make_automation, dispatched
):
    automation, _ = make_automation(prompt_template="go")
    run = manual.run_now(by=user, team=team, automation_id=automation.pk).run
    with pytest.raises(Conflict, match="this one is started"):
        manual.run_retry(by=user, team=team, run_id=run.pk)


def test_members_cannot_run_by_hand_and_other_teams_see_nothing(
    user, team, other_user, django_user_model, make_automation
):
    automation, _ = make_automation(prompt_template="go")
    member = django_user_model.objects.create_user("mia", password="mia-password-1")
    member_add(by=user, team=team, username="mia", role="member")
    with pytest.raises(Forbidden):
        manual.run_now(by=member, team=team, automation_id=automation.pk)
    from teams.services import team_default_for

    other_team = team_default_for(other_user)
    with pytest.raises(NotFound):
        manual.run_now(by=other_user, team=other_team, automation_id=automation.pk)
    assert AutomationRun.objects.count() == 0


def test_the_api_runs_now_and_retries(user, team, make_automation, dispatched):
    automation, _ = make_automation()
    client = Client()
    client.force_login(user)
    base = f"/api/teams/{team.pk}/automations/{automation.pk}/runs"
    started = client.post(base, {"payload": PULL_REQUEST_OPENED}, content_type="application/json")
    assert started.status_code == 202, started.content
    body = started.json()
    assert (body["trigger"], body["status"], body["started_by"]) == ("manual", "started", "alice")
    assert body["conversation_id"]
    failed = client.post(base, {}, content_type="application/json")
    assert failed.status_code == 200 and failed.json()["status"] == "failed"
    retry = client.post(f"{base}/{failed.json()['id']}/retry")
    assert retry.status_code == 200 and retry.json()["retry_of"] == failed.json()["id"]
    not_found = client.post(f"{base}/999999/retry")
    assert not_found.status_code == 404
    listed = client.get(base).json()
    assert [r["trigger"] for r in listed] == ["manual"] * 3
