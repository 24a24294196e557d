"""One automation's run history page: its runs newest first with their conversation, filtered
by status (plain GET or htmx); admins Run now (with a payload) and Retry a failed, cancelled or
skipped run through automations.manual, each refusal in its words and status; members read,
viewers' posts are refused, another team's automation and another automation's run are not
found."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from automations import services
from automations.models import AutomationRun
from teams.models import Role
from teams.services import member_add
from tests.automations.conftest import PULL_REQUEST_OPENED, RENDERED, TEMPLATE, github_post
from tests.conftest import owner_of_own_team

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def hook(user, team, dispatched):
    """alice's webhook automation (the scripted model) and its secret."""
    made = services.automation_create(
        by=user, team=team, name="pr-review", trigger="webhook", prompt_template=TEMPLATE,
        model="scripted",
    )  # fmt: skip
    return made.automation, made.secret


def _url(name: str, automation, *args) -> str:
    return reverse(name, args=[automation.team_id, automation.pk, *args])


def _run(automation, status: str, key: str, **fields) -> AutomationRun:
    return AutomationRun.objects.create(
        automation=automation, trigger="webhook", delivery_key=key, status=status, **fields
    )


def test_the_history_lists_runs_newest_first_with_their_conversation(browser, hook):
    automation, secret = hook
    assert github_post(Client(), automation.pk, secret, PULL_REQUEST_OPENED).status_code == 202
    _run(automation, "failed", "github:d-2", error="the payload has no field payload.x")
    page = browser.get(_url("team-automation-runs", automation)).content.decode()
    started = AutomationRun.objects.get(delivery_key__startswith="sha256:")  # the body's MAC
    failed = AutomationRun.objects.get(delivery_key="github:d-2")
    assert page.index(f'id="run-{failed.pk}"') < page.index(f'id="run-{started.pk}"')
    assert reverse("conversation-detail", args=[started.conversation_id]) in page
    assert escape(RENDERED)[:60] in page and started.delivery_key[:20] in page
    assert "the payload has no field payload.x" in page
    assert f"http://testserver/hooks/{automation.pk}" in page
    here = reverse("team-automations", args=[automation.team_id])
    assert f'href="{here}" aria-current="page">Automations</a>' in page
    # Retry on the failed run only; Run now on the automation.
    assert _url("team-automation-run-retry", automation, failed.pk) in page
    assert _url("team-automation-run-retry", automation, started.pk) not in page
    assert 'id="run-now"' in page


def test_the_status_filter_by_plain_get_and_by_htmx(browser, hook):
    automation, _ = hook
    failed = _run(automation, "failed", "k-1")
    skipped = _run(automation, "skipped", "k-2")
    page = browser.get(_url("team-automation-runs", automation), {"status": "failed"})
    text = page.content.decode()
    assert f'id="run-{failed.pk}"' in text and f'id="run-{skipped.pk}"' not in text
    assert '<option value="failed" selected>' in text
    response = browser.get(_url("team-automation-runs", automation), {"status": "skipped"}, **HX)
    text = response.content.decode()
    assert text.strip().startswith('<div id="run-list"')
    assert f'id="run-{skipped.pk}"' in text and f'id="run-{failed.pk}"' not in text
    assert "HX-Request" in response["Vary"]
    # An unknown status filters nothing out.
    text = browser.get(_url("team-automation-runs", automation), {"status": "nope"}).content
    assert f'id="run-{failed.pk}"'.encode() in text and f'id="run-{skipped.pk}"'.encode() in text


def test_durations_are_for_people(browser, hook):
    automation, _ = hook
    start = timezone.now() - timedelta(hours=3)
    _run(
        automation, "finished", "k-1", started_at=start, finished_at=start + timedelta(seconds=125)
    )
    _run(automation, "failed", "k-2", started_at=start, finished_at=start + timedelta(seconds=7.25))
    _run(automation, "finished", "k-3", started_at=start, finished_at=start + timedelta(hours=2))
    _run(automation, "started", "k-4", started_at=start)
    page = browser.get(_url("team-automation-runs", automation)).content.decode()
    for shown in ("<td>2 min 5 s</td>", "<td>7.2 s</td>", "<td>2 h 0 min</td>", "<td>—</td>"):
        assert shown in page


def test_run_now_with_a_payload_starts_a_conversation(browser, hook, dispatched):
    automation, _ = hook
    body = {"payload": json.dumps(PULL_REQUEST_OPENED)}
    response = browser.post(_url("team-automation-run-now", automation), body, **HX)
    assert response.status_code == 200, response.content.decode()
    run = AutomationRun.objects.get(automation=automation)
    assert (run.trigger, run.status, run.prompt) == ("manual", "started", RENDERED)
    assert run.conversation_id is not None and run.started_by is not None
    page = response.content.decode()
    assert page.strip().startswith('<section id="runs"')
    assert f'id="run-{run.pk}"' in page and f"Run #{run.pk}: started" in page
    assert 'manual <span class="muted">by alice</span>' in page
    assert [c for c, _ in dispatched] == [str(run.conversation_id)]
    # Without htmx a success redirects back to the page: a reload never runs it again.
    response = browser.post(_url("team-automation-run-now", automation), body)
    assert response.status_code == 302
    assert response["Location"] == _url("team-automation-runs", automation)


def test_run_now_refusals_are_inline_and_start_nothing(browser, hook):
    automation, _ = hook
    url = _url("team-automation-run-now", automation)
    response = browser.post(url, {"payload": "{not json"}, **HX)
    assert response.status_code == 400 and "The payload is not JSON" in response.content.decode()
    response = browser.post(url, {"payload": "[1, 2]"}, **HX)
    assert response.status_code == 400
    assert "The payload must be a JSON object" in response.content.decode()
    assert "[1, 2]</textarea>" in response.content.decode()  # as typed
    assert not AutomationRun.objects.exists()


def test_run_now_without_the_templates_field_records_a_failed_run_naming_it(browser, hook):
    automation, _ = hook
    response = browser.post(_url("team-automation-run-now", automation), {"payload": ""}, **HX)
    assert response.status_code == 200
    run = AutomationRun.objects.get()
    assert run.status == "failed" and "the payload has no field" in run.error
    page = response.content.decode()
    assert 'class="form-errors" role="status" id="run-outcome"' in page
    assert _url("team-automation-run-retry", automation, run.pk) in page


def test_retry_makes_a_new_run_and_a_finished_one_is_refused(browser, hook, dispatched):
    automation, _ = hook
    old = _run(automation, "failed", "k-1", payload=PULL_REQUEST_OPENED, error="boom")
    response = browser.post(_url("team-automation-run-retry", automation, old.pk), **HX)
    assert response.status_code == 200, response.content.decode()
    new = AutomationRun.objects.exclude(pk=old.pk).get()
    assert (new.retry_of_id, new.status, new.prompt) == (old.pk, "started", RENDERED)
    assert f"(retry of #{old.pk})" in response.content.decode()

    # A retry from the filtered history answers with the history filtered the same way.
    again = _run(automation, "skipped", "k-3", payload=PULL_REQUEST_OPENED)
    url = _url("team-automation-run-retry", automation, again.pk)
    page = browser.post(url, {"status": "skipped"}, **HX).content.decode()
    # (It is skipped itself: the first retry's run still goes, and the rule is skip.)
    retried = AutomationRun.objects.get(retry_of=again)
    assert retried.status == "skipped" and "the previous run is still going" in retried.error
    assert "Runs · skipped · 2" in page and f'id="run-{again.pk}"' in page
    assert f'id="run-{retried.pk}"' in page and f'id="run-{old.pk}"' not in page

    done = _run(automation, "finished", "k-2")
    response = browser.post(_url("team-automation-run-retry", automation, done.pk), **HX)
    assert response.status_code == 409
    page = response.content.decode()
    assert "can be retried; this one is finished" in page and page.strip().startswith("<section")
    assert AutomationRun.objects.filter(retry_of=done).count() == 0


def test_a_run_of_another_automation_is_not_found_through_this_one(browser, user, team, hook):
    automation, _ = hook
    other = services.automation_create(
        by=user, team=team, name="other", trigger="webhook", prompt_template="x", model="scripted"
    ).automation
    theirs = _run(other, "failed", "k-1")
    response = browser.post(_url("team-automation-run-retry", automation, theirs.pk), **HX)
    assert response.status_code == 404
    assert not AutomationRun.objects.filter(retry_of=theirs).exists()


def test_members_read_the_history_and_viewers_posts_are_refused(
    user, team, hook, django_user_model
):
    automation, _ = hook
    failed = _run(automation, "failed", "k-1")
    for name, role in (("mia", Role.MEMBER), ("victor", Role.VIEWER)):
        django_user_model.objects.create_user(name, password=f"{name}-password-1")
        member_add(by=user, team=team, username=name, role=role)
        client = Client()
        client.force_login(django_user_model.objects.get(username=name))
        page = client.get(_url("team-automation-runs", automation)).content.decode()
        assert f'id="run-{failed.pk}"' in page
        assert 'id="run-now"' not in page and "Retry" not in page
        assert client.post(_url("team-automation-run-now", automation), **HX).status_code == 403
        url = _url("team-automation-run-retry", automation, failed.pk)
        assert client.post(url, **HX).status_code == 403
    assert AutomationRun.objects.count() == 1


def test_another_teams_automation_is_not_found(browser, django_user_model, dispatched):
    bob = owner_of_own_team(django_user_model, "bob")
    bobs_team = bob.memberships.get().team
    bobs = services.automation_create(
        by=bob, team=bobs_team, name="b", trigger="webhook", prompt_template="x", model="scripted"
    ).automation
    run = _run(bobs, "failed", "k-1")
    assert browser.get(_url("team-automation-runs", bobs)).status_code == 404
    assert browser.post(_url("team-automation-run-now", bobs), **HX).status_code == 404
    assert browser.post(_url("team-automation-run-retry", bobs, run.pk), **HX).status_code == 404
    assert AutomationRun.objects.count() == 1
