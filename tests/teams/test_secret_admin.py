"""The admin's secret form: write-only value, blank keeps it, saves go through the services."""

from __future__ import annotations

import pytest
from django.test import Client

from teams.models import AuditRecord, Secret, Team
from teams.secrets import secret_values_for_team

pytestmark = pytest.mark.django_db

VALUE = "admin-entered-value-42"
ADD_URL = "/admin/teams/secret/add/"


@pytest.fixture
def admin_client(django_user_model) -> Client:
    root = django_user_model.objects.create_superuser("root", password="root-password-1")
    client = Client()
    client.force_login(root)
    return client


def add(client: Client, team: Team, **fields):
    data = {"team": team.pk, "name": "API_KEY", "description": "from admin", "value": VALUE}
    return client.post(ADD_URL, data | fields)


def change_url(secret: Secret) -> str:
    return f"/admin/teams/secret/{secret.pk}/change/"


def test_adding_goes_through_the_service(admin_client, team) -> None:
    assert add(admin_client, team).status_code == 302
    assert secret_values_for_team(team.pk) == {"API_KEY": VALUE}
    team.refresh_from_db()
    assert team.secrets_version == 1
    record = AuditRecord.objects.get(kind="secret.created")
    assert record.actor_name == "root" and record.target == "API_KEY"


def test_the_change_page_shows_that_a_value_is_set_but_never_the_value(admin_client, team):
    add(admin_client, team)
    secret = Secret.objects.get()
    page = admin_client.get(change_url(secret)).content.decode()
    assert "set, updated" in page and "by root" in page
    assert VALUE not in page and secret.ciphertext not in page
    assert 'type="password"' in page


def test_a_blank_value_on_edit_keeps_the_current_one(admin_client, team) -> None:
    add(admin_client, team)
    secret = Secret.objects.get()
    response = admin_client.post(change_url(secret), {"description": "renamed", "value": ""})
    assert response.status_code == 302
    assert secret_values_for_team(team.pk) == {"API_KEY": VALUE}
    assert Secret.objects.get().description == "renamed"
    assert AuditRecord.objects.get(kind="secret.updated").data == {"changed": ["description"]}

    admin_client.post(change_url(secret), {"description": "renamed", "value": "a-new-value"})
    assert secret_values_for_team(team.pk) == {"API_KEY": "a-new-value"}
    team.refresh_from_db()
    assert team.secrets_version == 3


def test_form_errors(admin_client, team) -> None:
    assert b"environment variable name" in add(admin_client, team, name="bad-name").content
    assert b"needs a value" in add(admin_client, team, value="").content
    add(admin_client, team)
    assert b"already exists" in add(admin_client, team).content
    assert Secret.objects.count() == 1


def test_deleting_goes_through_the_service(admin_client, team) -> None:
    add(admin_client, team)
    secret = Secret.objects.get()
    response = admin_client.post(f"/admin/teams/secret/{secret.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not Secret.objects.exists()
    assert AuditRecord.objects.filter(kind="secret.deleted", target="API_KEY").exists()
    team.refresh_from_db()
    assert team.secrets_version == 2
