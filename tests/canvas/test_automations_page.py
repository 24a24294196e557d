"""The team's Automations page: admins add, change, enable, delete automations and rotate their
webhook secret through htmx forms, each refusal in the service's words and status with nothing
saved; the secret is shown once, in the answer that made it; members see the list without
controls, viewers' writes are refused, another team is not found."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from automations import services
from automations.models import Automation, AutomationRun
from teams.models import AuditRecord, Role
from teams.profiles import profile_create
from teams.secrets import secret_create, secret_delete
from teams.services import member_add
from tests.conftest import owner_of_own_team

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
TEMPLATE = "Review {{ payload.pull_request.html_url }}"


def _url(name: str, team, *args) -> str:
    return reverse(name, args=[team.pk, *args])


def _fields(**fields) -> dict:
    return {
        "name": "pr-review", "trigger": "webhook", "cron": "", "timezone": "UTC",
        "missed": "skip", "prompt_template": TEMPLATE, "filter": "action == 'opened'",
        "model": "scripted", "agent": "", "concurrency": "queue", "max_cost_usd": "1.5",
        "deadline_minutes": "30", "callback_url": "", "enabled": "on", **fields,
    }  # fmt: skip


def _made(user, team, **fields) -> tuple[Automation, str]:
    given = {"name": "nightly", "trigger": "schedule", "cron": "0 3 * * *",
             "timezone": "Europe/Paris", "prompt_template": "Nightly check", "model": "scripted",
             **fields}  # fmt: skip
    made = services.automation_create(by=user, team=team, **given)
    return made.automation, made.secret


def _member(django_user_model, user, team, name: str, role: str) -> Client:
    django_user_model.objects.create_user(name, password=f"{name}-password-1")
    member_add(by=user, team=team, username=name, role=role)
    client = Client()
    client.force_login(django_user_model.objects.get(username=name))
    return client


def test_the_page_lists_automations_with_their_trigger_url_and_last_run(browser, user, team):
    nightly, _ = _made(user, team)
    hook, _ = _made(user, team, name="on-push", trigger="webhook", cron="", enabled=False)
    AutomationRun.objects.create(
        automation=nightly, trigger="schedule", delivery_key="slot:1", status="failed"
    )
    AutomationRun.objects.create(
        automation=nightly, trigger="schedule", delivery_key="slot:2", status="finished"
    )
    page = browser.get(_url("team-automations", team)).content.decode()
    here = _url("team-automations", team)
    assert f'href="{here}" aria-current="page">Automations</a>' in page
    assert 'data-automation="nightly"' in page and "<code>0 3 * * *</code>" in page
    assert "Europe/Paris" in page
    assert f"http://testserver/hooks/{hook.pk}</code>" in page
    assert '<span class="badge status-finished">finished</span>' in page  # the newest run
    assert "status-failed" not in page
    assert f'id="automation-{hook.pk}" data-automation="on-push" class="is-revoked"' in page
    assert _url("team-automation-runs", team, nightly.pk) in page
    assert 'id="automation-add"' in page and "Edit nightly" in page


def test_the_model_and_agent_menus_and_the_secret_checkboxes_are_the_teams(browser, user, team):
    profile_create(by=user, team=team, name="fast", model="openai/gpt-4o-mini")
    secret_create(by=user, team=team, name="GITHUB_TOKEN", value="ghp-page-secret-value-123")
    page = browser.get(_url("team-automations", team)).content.decode()
    assert '<optgroup label="Team profiles">' in page and '<option value="fast">' in page
    assert '<option value="scripted">' in page
    assert 'value="GITHUB_TOKEN"' in page and "ghp-page-secret-value-123" not in page
    assert "Our agent (with the model below)" in page


def test_create_shows_the_secret_once_with_the_webhook_url(browser, user, team):
    secret_create(by=user, team=team, name="GITHUB_TOKEN", value="ghp-page-secret-value-123")
    fields = _fields(allowed_secrets=["GITHUB_TOKEN"])
    response = browser.post(_url("team-automation-create", team), fields, **HX)
    assert response.status_code == 200, response.content.decode()
    assert "no-store" in response["Cache-Control"]
    page = response.content.decode()
    assert page.strip().startswith('<section id="automations"')
    automation = Automation.objects.get(team=team)
    assert (automation.name, automation.trigger, automation.concurrency) == (
        "pr-review", "webhook", "queue",
    )  # fmt: skip
    assert str(automation.max_cost_usd) == "1.5000" and automation.deadline_minutes == 30
    assert automation.allowed_secrets == ["GITHUB_TOKEN"] and automation.enabled
    secret = _shown_secret(page)
    assert f'value="http://testserver/hooks/{automation.pk}"' in page
    assert services.webhook_secret_of(automation) == secret  # the one deliveries are checked with
    # Never again: the page, reloaded, has no secret.
    again = browser.get(_url("team-automations", team)).content.decode()
    assert secret not in again and 'id="new-secret-value"' not in again
    assert AuditRecord.objects.filter(team=team, kind="automation.created").count() == 1


def _shown_secret(page: str) -> str:
    marker = 'id="new-secret-value" type="text" readonly value="'
    assert marker in page, page
    return page.split(marker, 1)[1].split('"', 1)[0]


def test_a_plain_create_renders_the_secret_instead_of_redirecting(browser, team):
    response = browser.post(_url("team-automation-create", team), _fields())
    assert response.status_code == 200
    page = response.content.decode()
    assert "<!DOCTYPE html>" in page or "<html" in page
    assert _shown_secret(page)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"cron": "not a cron"}, "cron &#x27;not a cron&#x27; is not a cron expression"),
        ({"trigger": "schedule", "cron": ""}, "a schedule needs cron"),
        ({"timezone": "Mars/Olympus"}, "is not an IANA time zone"),
        ({"prompt_template": "{{ payload.a|upper }}"}, "is not of the form"),
        ({"filter": "[[["}, "the filter is not a valid JMESPath expression"),
        ({"name": "bad name!"}, "an automation name is 1-64 letters"),
        ({"model": "no-such-profile"}, "no-such-profile"),
        ({"max_cost_usd": "0"}, "max_cost_usd must be more than 0"),
        ({"deadline_minutes": "0"}, "deadline_minutes must be 1 to"),
        ({"callback_url": "ftp://example.com/x"}, "callback URL"),
    ],
)
def test_bad_input_is_shown_inline_in_the_services_words_and_nothing_is_saved(
    browser, team, change, message
):
    response = browser.post(_url("team-automation-create", team), _fields(**change), **HX)
    assert response.status_code == 400
    page = response.content.decode()
    assert 'class="form-errors" role="alert"' in page
    assert message in page, page
    assert not Automation.objects.exists()
    assert 'id="new-secret-value"' not in page
    # What was typed stays in the add form.
    typed = change.get("prompt_template", TEMPLATE)
    assert f">\n{escape(typed)}</textarea>" in page


def test_a_second_automation_of_the_same_name_is_a_conflict(browser, user, team):
    _made(user, team, name="pr-review", trigger="webhook", cron="")
    response = browser.post(_url("team-automation-create", team), _fields(), **HX)
    assert response.status_code == 409
    assert "already has an automation named" in response.content.decode()
    assert Automation.objects.count() == 1


def test_edit_changes_the_fields_and_a_refusal_keeps_the_form_open(browser, user, team):
    automation, _ = _made(user, team)
    edit = _fields(name="nightly", trigger="schedule", cron="30 4 * * 1-5", timezone="UTC",
                   concurrency="cancel", filter="", missed="once")  # fmt: skip
    response = browser.post(_url("team-automation-edit", team, automation.pk), edit, **HX)
    assert response.status_code == 200, response.content.decode()
    automation.refresh_from_db()
    assert (automation.cron, automation.timezone, automation.concurrency, automation.missed) == (
        "30 4 * * 1-5", "UTC", "cancel", "once",
    )  # fmt: skip
    assert 'id="new-secret-value"' not in response.content.decode()  # an edit makes no secret

    bad = {**edit, "cron": "99 99 * * *"}
    response = browser.post(_url("team-automation-edit", team, automation.pk), bad, **HX)
    assert response.status_code == 400
    page = response.content.decode()
    assert "is not a cron expression" in page and "<details open>" in page
    assert 'value="99 99 * * *"' in page
    automation.refresh_from_db()
    assert automation.cron == "30 4 * * 1-5"


def test_an_edit_that_empties_the_budget_removes_it(browser, user, team):
    automation, _ = _made(user, team, max_cost_usd="2")
    edit = _fields(name="nightly", trigger="schedule", cron="0 3 * * *", max_cost_usd="")
    response = browser.post(_url("team-automation-edit", team, automation.pk), edit, **HX)
    assert response.status_code == 200, response.content.decode()
    automation.refresh_from_db()
    assert automation.max_cost_usd is None
    create = _fields(name="other", max_cost_usd="")  # a new one: no budget either
    assert browser.post(_url("team-automation-create", team), create, **HX).status_code == 200
    assert Automation.objects.get(name="other").max_cost_usd is None


def test_enable_disable_delete_and_rotate(browser, user, team):
    automation, old_secret = _made(user, team)
    url = _url("team-automation-enable", team, automation.pk)
    assert browser.post(url, {"enabled": "false"}, **HX).status_code == 200
    automation.refresh_from_db()
    assert not automation.enabled
    assert browser.post(url, {"enabled": "false"}, **HX).status_code == 200  # not a toggle
    automation.refresh_from_db()
    assert not automation.enabled
    assert browser.post(url, {"enabled": "maybe"}, **HX).status_code == 400
    assert browser.post(url, {"enabled": "true"}, **HX).status_code == 200
    automation.refresh_from_db()
    assert automation.enabled

    response = browser.post(_url("team-automation-rotate-secret", team, automation.pk), **HX)
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    new_secret = _shown_secret(response.content.decode())
    assert new_secret != old_secret
    automation.refresh_from_db()
    assert services.webhook_secret_of(automation) == new_secret

    response = browser.post(_url("team-automation-delete", team, automation.pk))
    assert response.status_code == 302 and response["Location"] == _url("team-automations", team)
    assert not Automation.objects.exists()
    response = browser.post(_url("team-automation-delete", team, automation.pk), **HX)
    assert response.status_code == 404 and "no such automation" in response.content.decode()
    kinds = AuditRecord.objects.filter(team=team, kind__startswith="automation.")
    assert set(kinds.values_list("kind", flat=True)) == {
        "automation.created", "automation.updated", "automation.secret_rotated",
        "automation.deleted",
    }  # fmt: skip


def test_a_member_reads_the_list_without_controls_and_a_viewers_writes_are_refused(
    user, team, django_user_model
):
    automation, _ = _made(user, team)
    member = _member(django_user_model, user, team, "mia", Role.MEMBER)
    page = member.get(_url("team-automations", team)).content.decode()
    assert 'data-automation="nightly"' in page
    assert 'id="automation-add"' not in page and "Delete" not in page and "Edit " not in page
    viewer = _member(django_user_model, user, team, "victor", Role.VIEWER)
    assert viewer.get(_url("team-automations", team)).status_code == 200
    for client in (member, viewer):
        assert client.post(_url("team-automation-create", team), _fields(), **HX).status_code == 403
        for name in ("team-automation-edit", "team-automation-enable",
                     "team-automation-delete", "team-automation-rotate-secret"):  # fmt: skip
            url = _url(name, team, automation.pk)
            assert client.post(url, _fields(enabled="false"), **HX).status_code == 403, name
    assert Automation.objects.get().enabled and Automation.objects.count() == 1


def test_another_team_is_not_found(browser, user, django_user_model):
    bob = owner_of_own_team(django_user_model, "bob")
    bobs_team = bob.memberships.get().team
    bobs, _ = _made(bob, bobs_team)
    assert browser.get(_url("team-automations", bobs_team)).status_code == 404
    response = browser.post(_url("team-automation-create", bobs_team), _fields(), **HX)
    assert response.status_code == 404
    assert browser.post(_url("team-automation-delete", bobs_team, bobs.pk)).status_code == 404
    # Alice's own team, bob's automation's id: not hers either.
    mine = user.memberships.get().team
    assert browser.post(_url("team-automation-delete", mine, bobs.pk), **HX).status_code == 404
    response = browser.post(_url("team-automation-rotate-secret", mine, bobs.pk), **HX)
    assert response.status_code == 404 and 'id="new-secret-value"' not in response.content.decode()
    assert Automation.objects.filter(pk=bobs.pk).exists()


def test_an_edit_form_offers_the_automations_own_model_and_secrets(browser, user, team):
    """Set through the API: a raw LiteLLM id and a secret the team has since deleted."""
    secret_create(by=user, team=team, name="GONE_KEY", value="gone-value-1234")
    automation, _ = _made(user, team, model="openai/gpt-4o-mini", allowed_secrets=["GONE_KEY"])
    secret_delete(by=user, team=team, name="GONE_KEY")
    page = browser.get(_url("team-automations", team)).content.decode()
    assert '<option value="openai/gpt-4o-mini" selected>' in page
    assert f'id="id_automation{automation.pk}_allowed_secrets_0" checked' in page
    assert 'value="GONE_KEY"' in page


def test_the_form_tightens_the_policy_for_its_runs(user, team):
    from django.test import Client

    from automations.models import Automation

    client = Client()
    client.force_login(user)
    data = {"name": "strict", "trigger": "webhook", "timezone": "UTC", "missed": "skip",
            "prompt_template": "go", "model": "scripted", "concurrency": "skip",
            "deadline_minutes": "60", "enabled": "on", "confirmation_mode": "always",
            "max_iterations": "5", "tools": "think, finish"}  # fmt: skip
    answer = client.post(f"/teams/{team.pk}/automations/new", data, headers={"HX-Request": "true"})
    assert answer.status_code == 200, answer.content.decode()[:2000]
    automation = Automation.objects.get()
    assert automation.limits == {"confirmation_mode": "always", "max_iterations": 5,
                                 "tools": ["think", "finish"]}  # fmt: skip
    page = client.get(f"/teams/{team.pk}/automations/").content.decode()
    assert 'value="think, finish"' in page


def test_the_form_sets_where_its_runs_work(user, team):
    from django.test import Client

    from automations.models import Automation

    client = Client()
    client.force_login(user)
    data = {"name": "from-git", "trigger": "webhook", "timezone": "UTC", "missed": "skip",
            "prompt_template": "go", "model": "scripted", "concurrency": "skip",
            "deadline_minutes": "60", "enabled": "on", "workspace_kind": "local",
            "git_repo": "https://example.com/acme/web.git", "git_ref": "main"}  # fmt: skip
    answer = client.post(f"/teams/{team.pk}/automations/new", data, headers={"HX-Request": "true"})
    assert answer.status_code == 200, answer.content.decode()[:2000]
    spec = Automation.objects.get().workspace_spec
    assert spec["kind"] == "local" and spec["image"] is None
    assert spec["source"] == {"repo": "https://example.com/acme/web.git", "ref": "main"}
    page = client.get(f"/teams/{team.pk}/automations/").content.decode()
    assert 'value="https://example.com/acme/web.git"' in page
    bad = client.post(f"/teams/{team.pk}/automations/new",
                      {**data, "name": "bad-image", "workspace_kind": "docker", "image": "not an image!"},
                      headers={"HX-Request": "true"})  # fmt: skip
    assert bad.status_code == 400 and "image" in bad.content.decode()
    assert Automation.objects.count() == 1
