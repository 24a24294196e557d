"""/api/teams/{id}/automations: create, read, change, rotate, runs and delete, with roles,
audit, and the webhook secret shown once and stored encrypted."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test import Client

from automations.models import Automation
from automations.signatures import sign_github
from teams.models import AuditRecord, Role
from teams.services import member_add
from tests.api import call, client_for, send

from .conftest import PULL_REQUEST_OPENED, TEMPLATE, github_post

pytestmark = pytest.mark.django_db

BODY = {"name": "pr-review", "trigger": "webhook", "prompt_template": TEMPLATE,
        "model": "scripted", "filter": "action == 'opened'"}  # fmt: skip


def url(team, *rest) -> str:
    return "/".join([f"/api/teams/{team.pk}/automations", *map(str, rest)])


def person(django_user_model, team, owner, username: str, role: str):
    someone = django_user_model.objects.create_user(username, password=f"{username}-pw-12345")
    member_add(by=owner, team=team, username=username, role=role)
    return client_for(someone)


def kinds(team) -> list[str]:
    rows = AuditRecord.objects.filter(team=team, kind__startswith="automation.")
    return list(rows.order_by("id").values_list("kind", flat=True))


@pytest.fixture
def created(api, team):
    response = send(api, "post", url(team), BODY)
    assert response.status_code == 201, response.content
    return response


def test_create_answers_the_secret_once_and_stores_it_encrypted(created, api, team):
    body = created.json()
    secret = body["webhook_secret"]
    assert len(secret) >= 40 and created["Cache-Control"] == "no-store"
    assert body["webhook_url"] == f"http://testserver/hooks/{body['id']}"
    assert body | {"name": "pr-review", "trigger": "webhook", "concurrency": "skip",
                   "enabled": True, "timezone": "UTC", "created_by": "alice"} == body  # fmt: skip
    assert body["workspace"] == {"kind": "local", "source": None, "image": None}

    for response in (api.get(url(team)), api.get(url(team, body["id"]))):
        assert response.status_code == 200
        assert secret not in response.content.decode() and b"webhook_secret" not in response.content
    with connection.cursor() as cursor:
        cursor.execute("SELECT webhook_secret FROM automations_automation")
        (stored,) = cursor.fetchone()
    assert secret not in stored and stored.startswith("gAAAA")  # a Fernet token
    audit = AuditRecord.objects.get(kind="automation.created")
    assert audit.target == "pr-review" and secret not in str(audit.data)
    assert audit.data["filter"] == "action == 'opened'"


def test_a_created_automation_receives_signed_deliveries(created, dispatched):
    body = created.json()
    response = github_post(Client(), body["id"], body["webhook_secret"], PULL_REQUEST_OPENED)
    assert response.status_code == 202, response.content


def test_a_budget_is_kept_by_null_and_removed_by_an_empty_string(created, api, team):
    automation_id = created.json()["id"]
    call(api, "patch", url(team, automation_id), {"max_cost_usd": 2.5})
    status, kept = call(api, "patch", url(team, automation_id), {"max_cost_usd": None})
    assert status == 200 and kept["max_cost_usd"] == 2.5
    status, removed = call(api, "patch", url(team, automation_id), {"max_cost_usd": ""})
    assert status == 200 and removed["max_cost_usd"] is None
    status, refused = call(api, "patch", url(team, automation_id), {"max_cost_usd": "lots"})
    assert status == 400 and Automation.objects.get().max_cost_usd is None


def test_list_get_update_runs_and_delete(created, api, team, dispatched):
    automation_id = created.json()["id"]
    secret = created.json()["webhook_secret"]
    status, listed = call(api, "get", url(team))
    assert status == 200 and [a["id"] for a in listed] == [automation_id]

    status, changed = call(api, "patch", url(team, automation_id),
                           {"filter": "", "concurrency": "queue", "max_cost_usd": 2.5})  # fmt: skip
    assert status == 200
    assert (changed["filter"], changed["concurrency"], changed["max_cost_usd"]) == (
        "",
        "queue",
        2.5,
    )
    assert changed["prompt_template"] == TEMPLATE  # left out: kept
    status, put = call(api, "put", url(team, automation_id), {"enabled": False})
    assert status == 200 and put["enabled"] is False
    call(api, "put", url(team, automation_id), {"enabled": True})

    closed, opened = {"action": "closed"}, PULL_REQUEST_OPENED
    github_post(Client(), automation_id, secret, closed, delivery="a")
    github_post(Client(), automation_id, secret, opened, delivery="b")
    a, b = (sign_github(secret, json.dumps(p).encode()).replace("=", ":") for p in (closed, opened))
    status, runs = call(api, "get", url(team, automation_id, "runs"))
    assert status == 200
    assert [r["delivery_key"] for r in runs] == [b, a]  # newest first
    assert runs[0]["status"] == "started" and runs[0]["conversation_id"]
    assert runs[0]["conversation_status"] == "running" and runs[1]["error"].startswith(
        "the payload"
    )
    status, started = call(api, "get", url(team, automation_id, "runs") + "?status=started")
    assert [r["delivery_key"] for r in started] == [b]

    assert send(api, "delete", url(team, automation_id)).status_code == 204
    assert call(api, "get", url(team, automation_id))[0] == 404
    assert not Automation.objects.exists()
    assert kinds(team) == ["automation.created", "automation.updated", "automation.updated",
                           "automation.updated", "automation.deleted"]  # fmt: skip


def test_rotating_the_secret_shows_the_new_one_once_and_the_old_one_stops(created, api, team,
                                                                         dispatched):  # fmt: skip
    automation_id, old = created.json()["id"], created.json()["webhook_secret"]
    response = send(api, "post", url(team, automation_id, "rotate-secret"))
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    new = response.json()["webhook_secret"]
    assert new != old
    assert github_post(Client(), automation_id, old, PULL_REQUEST_OPENED).status_code == 401
    assert github_post(Client(), automation_id, new, PULL_REQUEST_OPENED).status_code == 202
    assert new not in api.get(url(team, automation_id)).content.decode()
    assert kinds(team)[-1] == "automation.secret_rotated"
    assert new not in str(AuditRecord.objects.filter(team=team).values_list("data", flat=True))


@pytest.mark.parametrize("role", [Role.MEMBER, Role.VIEWER])
def test_members_read_and_only_admins_write(created, team, user, django_user_model, role):
    member = person(django_user_model, team, user, "mia", role)
    automation_id = created.json()["id"]
    assert member.get(url(team)).status_code == 200
    assert member.get(url(team, automation_id)).status_code == 200
    assert member.get(url(team, automation_id, "runs")).status_code == 200
    for method, path, body in [
        ("post", url(team), {**BODY, "name": "other"}),
        ("patch", url(team, automation_id), {"enabled": False}),
        ("post", url(team, automation_id, "rotate-secret"), None),
        ("delete", url(team, automation_id), None),
    ]:
        response = send(member, method, path, body)
        assert response.status_code == 403, (method, path)
        assert b"webhook_secret" not in response.content
    assert kinds(team) == ["automation.created"]


def test_an_admin_may_create(team, user, django_user_model):
    admin = person(django_user_model, team, user, "ada", Role.ADMIN)
    assert send(admin, "post", url(team), BODY).status_code == 201


def test_another_team_is_404(created, team, other_user):
    stranger = client_for(other_user)
    automation_id = created.json()["id"]
    assert stranger.get(url(team)).status_code == 404
    assert stranger.get(url(team, automation_id, "runs")).status_code == 404
    assert send(stranger, "delete", url(team, automation_id)).status_code == 404
    # The stranger's own team does not reach it either.
    from teams.services import team_default_for

    theirs = team_default_for(other_user)
    assert stranger.get(url(theirs, automation_id)).status_code == 404


@pytest.mark.parametrize(
    "change, message",
    [
        ({"name": "has space"}, "automation name"),
        ({"trigger": "email"}, "trigger must be one of webhook, schedule"),
        ({"prompt_template": "{{ payload.a | upper }}"}, "is not of the form"),
        ({"filter": "action =="}, "not a valid JMESPath expression"),
        ({"trigger": "schedule"}, "a schedule needs cron"),
        ({"trigger": "schedule", "cron": "every day"}, "is not a cron expression"),
        ({"trigger": "schedule", "cron": "0 3 * * *", "timezone": "Mars/Olympus"}, "IANA"),
        ({"cron": "0 3 * * *"}, "only for trigger 'schedule'"),
        ({"model": "no-such-profile"}, "no-such-profile"),
        ({"agent": "no-such-agent"}, "no-such-agent"),
        ({"concurrency": "sometimes"}, "concurrency must be one of skip, queue, cancel"),
        ({"allowed_secrets": ["lower"]}, "secret names"),
        ({"workspace": {"kind": "local", "image": "python:3"}}, "only for docker"),
    ],
)
def test_bad_fields_are_a_400_with_a_reason(api, team, change, message):
    status, body = call(api, "post", url(team), {**BODY, **change})
    assert status == 400 and message in str(body["detail"]), body
    assert not Automation.objects.exists()


def test_a_schedule_with_a_time_zone_is_accepted(api, team):
    body = {**BODY, "trigger": "schedule", "cron": "0 3 * * 1-5", "timezone": "Europe/Paris"}
    status, made = call(api, "post", url(team), body)
    assert status == 201 and (made["cron"], made["timezone"]) == ("0 3 * * 1-5", "Europe/Paris")


def test_a_second_automation_of_the_same_name_is_a_409(created, api, team):
    status, body = call(api, "post", url(team), BODY)
    assert status == 409 and "pr-review" in body["detail"]


def test_limits_tighten_the_policy_for_the_runs_and_never_loosen_it(user, team, dispatched):
    from django.test import Client

    from automations import manual
    from teams.policies import policy_update

    policy_update(by=user, team=team, confirmation_mode="risky")
    client = Client()
    client.force_login(user)
    base = f"/api/teams/{team.pk}/automations"
    body = {"name": "strict", "trigger": "webhook", "prompt_template": "go", "model": "scripted",
            "limits": {"confirmation_mode": "always", "max_iterations": 7,
                       "tools": ["think", "finish"]}}  # fmt: skip
    made = client.post(base, body, content_type="application/json")
    assert made.status_code == 201, made.content
    assert made.json()["limits"] == {"confirmation_mode": "always", "max_iterations": 7,
                                     "tools": ["think", "finish"]}  # fmt: skip
    looser = client.post(base, {**body, "name": "loose", "limits": {"confirmation_mode": "never"}},
                         content_type="application/json")  # fmt: skip
    assert looser.status_code == 400 and "confirmation_mode" in looser.json()["detail"]
    unknown = client.post(base, {**body, "name": "odd", "limits": {"tools": ["nope"]}},
                          content_type="application/json")  # fmt: skip
    assert unknown.status_code == 400 and "nope" in unknown.json()["detail"]
    run = manual.run_now(by=user, team=team, automation_id=made.json()["id"]).run
    config = run.conversation.agent_config
    assert (config["confirmation_mode"], config["max_iterations"], config["tools"]) == (
        "always", 7, ["think", "finish"],
    )  # fmt: skip
