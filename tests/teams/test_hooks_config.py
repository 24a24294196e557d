"""Configuring hooks and the notification webhook: services, the API and the page. Admins and
owners only (reads too), other teams 404, every write audited."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client
from django.urls import reverse

from common.errors import Forbidden
from orchestration.control.hooks import EVENTS
from teams import hooks
from teams.models import AuditRecord, Hook, Role, Team, TeamNotification
from teams.notifications import notification_set, webhook_target_for_team
from teams.services import member_add, team_default_for
from tests.api import client_for, send

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
HOOK = {"name": "no-force-push", "event": "PreToolUse", "command": "exit 0", "matcher": "term.*"}


@pytest.fixture
def url(team) -> str:
    return f"/api/teams/{team.pk}/hooks"


def person(django_user_model, team: Team, owner, username: str, role: str):
    someone = django_user_model.objects.create_user(username, password=f"{username}-pw-12345")
    member_add(by=owner, team=team, username=username, role=role)
    return someone


def kinds(team: Team) -> list[str]:
    return list(AuditRecord.objects.filter(team=team).order_by("id").values_list("kind", flat=True))


def test_the_event_choices_equal_the_runners_events() -> None:
    assert hooks.HOOK_EVENTS == EVENTS


# --- services -----------------------------------------------------------------------------------


def test_hooks_run_in_position_order_and_only_enabled_ones_of_the_event_are_specs(
    user, team, django_assert_num_queries
) -> None:
    first = hooks.hook_create(by=user, team=team, name="a", event="Stop", command="true")
    second = hooks.hook_create(
        by=user, team=team, name="b", event="Stop", command="exit 2", timeout_seconds=3,
        fail_closed=True,
    )  # fmt: skip
    hooks.hook_create(by=user, team=team, name="off", event="Stop", command="x", enabled=False)
    hooks.hook_create(by=user, team=team, name="pre", event="PreToolUse", command="true")
    assert (first.position, second.position) == (0, 1)
    hooks.hook_update(by=user, team=team, hook_id=first.pk, position=5)
    with django_assert_num_queries(1):
        specs = hooks.hook_specs_for_team(team.pk, "Stop")
    assert specs == [
        {"name": "b", "event": "Stop", "command": "exit 2", "matcher": "", "timeout": 3.0,
         "fail_closed": True},
        {"name": "a", "event": "Stop", "command": "true", "matcher": "", "timeout": 10.0,
         "fail_closed": False},
    ]  # fmt: skip
    assert hooks.hook_specs_for_team(team.pk, "PostToolUse") == []


@pytest.mark.parametrize(
    "fields, words",
    [
        ({"matcher": "term(inal"}, "not a valid regular expression"),
        ({"timeout_seconds": 0}, "from 1 to 300"),
        ({"timeout_seconds": 301}, "from 1 to 300"),
        ({"timeout_seconds": True}, "from 1 to 300"),
        ({"event": "BeforeLunch"}, "event must be one of PreToolUse"),
        ({"command": "   "}, "command must not be empty"),
        ({"name": "has space"}, "a hook name is"),
        ({"name": "trailing-newline\n"}, "a hook name is"),
        ({"fail_closed": "yes"}, "true or false"),
    ],
)
def test_invalid_hooks_are_refused_with_the_rule(user, team, fields, words) -> None:
    with pytest.raises(hooks.InvalidInput, match=words):
        hooks.hook_create(by=user, team=team, **{**HOOK, **fields})
    assert not Hook.objects.exists()


def test_members_cannot_touch_hooks_through_the_services(user, team, django_user_model) -> None:
    member = person(django_user_model, team, user, "mia", Role.MEMBER)
    with pytest.raises(Forbidden):
        hooks.hook_create(by=member, team=team, **HOOK)
    with pytest.raises(Forbidden):
        hooks.hook_list(by=member, team=team)


# --- the hooks API --------------------------------------------------------------------------------


def test_create_list_update_delete_audited_with_the_command(api, url, team) -> None:
    created = send(api, "post", url, HOOK)
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["name"] == "no-force-push" and body["timeout_seconds"] == 10
    assert body["enabled"] is True and body["fail_closed"] is False and body["position"] == 0
    hook_id = body["id"]

    assert [h["id"] for h in api.get(url).json()] == [hook_id]

    updated = send(api, "put", f"{url}/{hook_id}", {"enabled": False, "timeout_seconds": 30})
    assert updated.status_code == 200
    assert updated.json()["enabled"] is False and updated.json()["timeout_seconds"] == 30
    assert updated.json()["command"] == "exit 0"  # left out: kept

    assert send(api, "post", url, HOOK).status_code == 409  # the name is taken
    assert api.delete(f"{url}/{hook_id}").status_code == 204
    assert api.get(url).json() == []
    assert api.delete(f"{url}/{hook_id}").status_code == 404

    assert kinds(team)[-3:] == ["hook.created", "hook.updated", "hook.deleted"]
    record = AuditRecord.objects.get(team=team, kind="hook.updated")
    assert record.data["before"]["timeout_seconds"] == 10
    assert record.data["after"]["timeout_seconds"] == 30
    assert record.data["after"]["command"] == "exit 0"


def test_the_api_answers_invalid_input_with_400(api, url) -> None:
    response = send(api, "post", url, {**HOOK, "matcher": "("})
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_input"
    assert "regular expression" in response.json()["detail"]
    assert send(api, "post", url, {**HOOK, "timeout_seconds": 0}).status_code == 400
    assert send(api, "post", url, {**HOOK, "event": "Whenever"}).status_code == 400
    hook_id = send(api, "post", url, HOOK).json()["id"]
    assert send(api, "put", f"{url}/{hook_id}", {"matcher": "[a-"}).status_code == 400


@pytest.mark.parametrize("role", [Role.VIEWER, Role.MEMBER])
def test_viewers_and_members_get_403_even_for_reading(
    user, team, url, django_user_model, role
) -> None:
    hook = hooks.hook_create(by=user, team=team, **HOOK)
    client = client_for(person(django_user_model, team, user, "pat", role))
    assert client.get(url).status_code == 403
    assert send(client, "post", url, {**HOOK, "name": "other"}).status_code == 403
    assert send(client, "put", f"{url}/{hook.pk}", {"enabled": False}).status_code == 403
    assert client.delete(f"{url}/{hook.pk}").status_code == 403
    notifications = f"/api/teams/{team.pk}/notifications"
    assert client.get(notifications).status_code == 403
    assert send(client, "put", notifications, {"url": "https://x.example/h"}).status_code == 403
    assert Hook.objects.get().enabled


def test_admins_may_manage_hooks(user, team, url, django_user_model) -> None:
    client = client_for(person(django_user_model, team, user, "ada", Role.ADMIN))
    assert send(client, "post", url, HOOK).status_code == 201


def test_other_teams_get_404_and_cannot_reach_a_hook_through_their_own_team(
    user, team, url, other_user
) -> None:
    hook = hooks.hook_create(by=user, team=team, **HOOK)
    mallory = client_for(other_user)
    assert mallory.get(url).status_code == 404
    assert send(mallory, "post", url, HOOK).status_code == 404
    assert send(mallory, "put", f"{url}/{hook.pk}", {"enabled": False}).status_code == 404
    own = team_default_for(other_user)
    assert send(mallory, "put", f"/api/teams/{own.pk}/hooks/{hook.pk}", {}).status_code == 404
    assert mallory.delete(f"/api/teams/{own.pk}/hooks/{hook.pk}").status_code == 404
    assert Hook.objects.get().enabled


# --- the notifications API ------------------------------------------------------------------------


def test_the_signing_secret_is_shown_once_and_stored_encrypted(api, team) -> None:
    url = f"/api/teams/{team.pk}/notifications"
    assert api.get(url).json()["url"] is None
    hook_url = "https://hooks.slack.com/services/T000/B000/very-secret-path"
    created = send(api, "put", url, {"url": hook_url})
    assert created.status_code == 200
    assert created["Cache-Control"] == "no-store"
    secret = created.json()["secret"]
    assert secret and secret.startswith("whsec_") and created.json()["url"] == hook_url

    shown = api.get(url).json()
    assert shown["url"] == hook_url and shown["secret"] is None
    moved = send(api, "put", url, {"url": "https://example.com/new"})
    assert moved.json()["secret"] is None  # the secret stays
    assert webhook_target_for_team(team.pk).secret == secret
    row = TeamNotification.objects.get(team=team)
    assert secret not in row.webhook_secret

    renewed = send(api, "put", url, {"url": "https://example.com/new", "regenerate_secret": True})
    assert renewed.json()["secret"] not in (None, secret)

    assert api.delete(url).status_code == 204
    assert api.get(url).json()["url"] is None
    assert api.delete(url).status_code == 404

    records = AuditRecord.objects.filter(team=team, kind__startswith="notification.")
    assert [r.kind for r in records.order_by("id")] == ["notification.set"] * 3 + [
        "notification.cleared"
    ]
    dumped = json.dumps(list(records.values("target", "data")))
    assert "very-secret-path" not in dumped and secret not in dumped  # host only
    assert "hooks.slack.com" in dumped


@pytest.mark.parametrize("bad", ["", "not a url", "ftp://example.com/x", "javascript:alert(1)"])
def test_webhook_urls_must_be_http(api, team, bad) -> None:
    response = send(api, "put", f"/api/teams/{team.pk}/notifications", {"url": bad})
    assert response.status_code == 400
    assert not TeamNotification.objects.exists()


# --- the page -------------------------------------------------------------------------------------


def test_the_page_is_for_admins_and_linked_from_the_team_page(
    browser, team, user, django_user_model, other_user
) -> None:
    page = reverse("team-hooks", args=[team.pk])
    assert browser.get(page).status_code == 200
    assert page in browser.get(reverse("team-detail", args=[team.pk])).content.decode()
    member = Client()
    member.force_login(person(django_user_model, team, user, "mia", Role.MEMBER))
    assert member.get(page).status_code == 403
    assert page not in member.get(reverse("team-detail", args=[team.pk])).content.decode()
    outsider = Client()
    outsider.force_login(other_user)
    assert outsider.get(page).status_code == 404


def test_adding_editing_disabling_and_deleting_a_hook_from_the_page(browser, team) -> None:
    form = {**HOOK, "timeout_seconds": "10", "enabled": "on"}
    added = browser.post(reverse("team-hook-add", args=[team.pk]), form, **HX)
    assert added.status_code == 200
    html = added.content.decode()
    assert html.lstrip().startswith('<section id="hooks">') and "no-force-push" in html
    hook = Hook.objects.get()
    assert hook.enabled and hook.matcher == "term.*"

    edit = reverse("team-hook-edit", args=[team.pk, hook.pk])
    refused = browser.post(edit, {**form, "matcher": "(("}, **HX)
    assert refused.status_code == 400
    assert "not a valid regular expression" in refused.content.decode()
    assert " open>" in refused.content.decode()  # the failed edit stays open
    assert browser.post(edit, {**form, "command": "exit 2"}, **HX).status_code == 200
    hook.refresh_from_db()
    assert hook.command == "exit 2"

    enable = reverse("team-hook-enable", args=[team.pk, hook.pk])
    assert browser.post(enable, {"enabled": "false"}, **HX).status_code == 200
    hook.refresh_from_db()
    assert not hook.enabled
    assert browser.post(enable, {"enabled": "maybe"}, **HX).status_code == 400

    deleted = browser.post(reverse("team-hook-delete", args=[team.pk, hook.pk]))
    assert deleted.status_code == 302  # without htmx: back to the page
    assert not Hook.objects.exists()


def test_the_page_shows_a_new_signing_secret_once(browser, team) -> None:
    set_url = reverse("team-notification-set", args=[team.pk])
    response = browser.post(set_url, {"url": "https://example.com/hook"}, **HX)
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    secret = re.search(
        r'id="new-secret-value"[^>]*value="(whsec_[^"]+)"', response.content.decode()
    )
    assert secret is not None
    assert webhook_target_for_team(team.pk).secret == secret.group(1)
    page = browser.get(reverse("team-hooks", args=[team.pk])).content.decode()
    assert secret.group(1) not in page and "https://example.com/hook" in page

    bad = browser.post(set_url, {"url": "nope"}, **HX)
    assert bad.status_code == 400 and "http(s) URL" in bad.content.decode()
    cleared = browser.post(reverse("team-notification-clear", args=[team.pk]), **HX)
    assert cleared.status_code == 200
    assert not TeamNotification.objects.exists()


def test_a_member_cannot_set_the_webhook_from_the_page(user, team, django_user_model) -> None:
    member = Client()
    member.force_login(person(django_user_model, team, user, "mia", Role.MEMBER))
    url = reverse("team-notification-set", args=[team.pk])
    assert member.post(url, {"url": "https://example.com/x"}).status_code == 403
    notification_set(by=user, team=team, url="https://example.com/ok")
    assert member.post(reverse("team-notification-clear", args=[team.pk])).status_code == 403
    assert TeamNotification.objects.get().webhook_url == "https://example.com/ok"
