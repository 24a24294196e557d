"""The secrets API: values go in and never come out; roles and teams are enforced; audited."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from teams.models import AuditRecord
from teams.secrets import MAX_VALUE_BYTES, secret_values_for_team
from teams.services import member_add
from tests.api import client_for, send

pytestmark = pytest.mark.django_db

VALUE = "sk-live-0123456789abcdef"
NEW_VALUE = "sk-live-fedcba9876543210"


@pytest.fixture
def url(team) -> str:
    return f"/api/teams/{team.pk}/secrets"


def test_create_list_update_delete_without_ever_returning_a_value(api, url, team) -> None:
    responses = []
    created = send(api, "post", url, {"name": "API_KEY", "value": VALUE, "description": "ci"})
    responses.append(created)
    assert created.status_code == 201
    body = created.json()
    assert set(body) == {"name", "description", "created_at", "updated_at", "updated_by"}
    assert body["name"] == "API_KEY" and body["description"] == "ci"
    assert body["updated_by"] == "alice"

    listed = api.get(url)
    responses.append(listed)
    assert [s["name"] for s in listed.json()] == ["API_KEY"]

    updated = send(api, "put", f"{url}/API_KEY", {"value": NEW_VALUE})
    responses.append(updated)
    assert updated.status_code == 200 and updated.json()["description"] == "ci"
    assert secret_values_for_team(team.pk) == {"API_KEY": NEW_VALUE}

    described = send(api, "put", f"{url}/API_KEY", {"description": "deploys"})
    responses.append(described)
    assert described.json()["description"] == "deploys"
    assert secret_values_for_team(team.pk) == {"API_KEY": NEW_VALUE}  # value kept

    deleted = api.delete(f"{url}/API_KEY")
    assert deleted.status_code == 204
    responses.append(api.get(url))
    assert responses[-1].json() == []
    assert api.delete(f"{url}/API_KEY").status_code == 404

    for response in responses:
        text = response.content.decode()
        assert VALUE not in text and NEW_VALUE not in text


def test_every_write_bumps_the_teams_secrets_version(api, url, team) -> None:
    versions = []
    for method, path, body in [
        ("post", url, {"name": "A", "value": VALUE}),
        ("put", f"{url}/A", {"value": NEW_VALUE}),
        ("delete", f"{url}/A", None),
    ]:
        send(api, method, path, body)
        team.refresh_from_db()
        versions.append(team.secrets_version)
    assert versions == [1, 2, 3]


def test_audit_records_each_change_and_never_the_value(api, url, team) -> None:
    send(api, "post", url, {"name": "API_KEY", "value": VALUE, "description": "ci"})
    send(api, "put", f"{url}/API_KEY", {"value": NEW_VALUE})
    api.delete(f"{url}/API_KEY")
    records = list(AuditRecord.objects.filter(team=team, kind__startswith="secret."))
    assert sorted(r.kind for r in records) == ["secret.created", "secret.deleted", "secret.updated"]
    assert all(r.target == "API_KEY" and r.actor_name == "alice" for r in records)
    assert next(r for r in records if r.kind == "secret.updated").data == {"changed": ["value"]}
    dumped = json.dumps([[r.target, r.data, str(r)] for r in records])
    assert VALUE not in dumped and NEW_VALUE not in dumped
    audit = api.get(f"/api/teams/{team.pk}/audit?kind=secret.").content.decode()
    assert "secret.created" in audit and VALUE not in audit


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"name": "lower", "value": VALUE}, "environment variable name"),
        ({"name": "1DIGIT", "value": VALUE}, "environment variable name"),
        ({"name": "A" * 65, "value": VALUE}, "environment variable name"),
        ({"name": "HAS-DASH", "value": VALUE}, "environment variable name"),
        ({"name": "OK", "value": ""}, "must not be empty"),
        ({"name": "OK", "value": "with\u0000nul-inside"}, "NUL"),
        ({"name": "OK", "value": "x" * (MAX_VALUE_BYTES + 1)}, "bytes"),
        ({"name": "OK", "value": "é" * (MAX_VALUE_BYTES // 2 + 1)}, "bytes"),  # 2 bytes each
    ],
)
def test_invalid_input_is_a_400_that_does_not_echo_the_value(api, url, body, says) -> None:
    response = send(api, "post", url, body)
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid_input"
    assert says in str(response.json()["detail"])  # the service's words, or the schema's
    if body["value"]:
        assert body["value"][:20] not in response.content.decode()


def test_the_biggest_value_allowed_is_accepted(api, url, team) -> None:
    value = "v" * MAX_VALUE_BYTES
    assert send(api, "post", url, {"name": "BIG", "value": value}).status_code == 201
    assert secret_values_for_team(team.pk)["BIG"] == value


def test_a_duplicate_name_is_a_conflict(api, url) -> None:
    assert send(api, "post", url, {"name": "API_KEY", "value": VALUE}).status_code == 201
    again = send(api, "post", url, {"name": "API_KEY", "value": NEW_VALUE})
    assert again.status_code == 409 and again.json()["error"] == "conflict"


def test_update_needs_something_to_change_and_an_existing_secret(api, url) -> None:
    assert send(api, "put", f"{url}/MISSING", {"value": VALUE}).status_code == 404
    send(api, "post", url, {"name": "API_KEY", "value": VALUE})
    assert send(api, "put", f"{url}/API_KEY", {}).status_code == 400


def test_a_viewer_lists_names_but_cannot_write(user, team, url, django_user_model) -> None:
    viewer = django_user_model.objects.create_user("victor", password="victor-password-1")
    member_add(by=user, team=team, username="victor", role="viewer")
    send(client_for(user), "post", url, {"name": "API_KEY", "value": VALUE})
    api = client_for(viewer)
    listed = api.get(url)
    assert listed.status_code == 200 and [s["name"] for s in listed.json()] == ["API_KEY"]
    assert VALUE not in listed.content.decode()
    assert send(api, "post", url, {"name": "OTHER", "value": VALUE}).status_code == 403
    assert send(api, "put", f"{url}/API_KEY", {"value": NEW_VALUE}).status_code == 403
    assert api.delete(f"{url}/API_KEY").status_code == 403
    assert secret_values_for_team(team.pk) == {"API_KEY": VALUE}


def test_another_teams_secrets_are_not_found(user, other_user, url) -> None:
    send(client_for(user), "post", url, {"name": "API_KEY", "value": VALUE})
    mallory = client_for(other_user)
    assert mallory.get(url).status_code == 404
    assert send(mallory, "post", url, {"name": "X", "value": VALUE}).status_code == 404
    assert send(mallory, "put", f"{url}/API_KEY", {"value": "x" * 10}).status_code == 404
    assert mallory.delete(f"{url}/API_KEY").status_code == 404
    assert Client().get(url).status_code == 401


def test_a_value_sent_for_no_secret_is_not_remembered_for_log_redaction(api, url) -> None:
    from common import secret_values

    stray = "stray-value-for-no-secret"
    response = send(api, "put", f"{url}/NO_SUCH_SECRET", {"value": stray})
    assert response.status_code == 404
    assert stray not in {value for _name, value in secret_values.known()[1]}
