"""The team's Secrets page: admins create, replace and delete; values never come back."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from teams import secrets
from teams.models import AuditRecord, Role, Secret
from teams.services import member_add

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
VALUE = "sk-test-0123456789-very-secret"
NEW_VALUE = "sk-test-rotated-9876543210"


def _url(name: str, team) -> str:
    return reverse(name, args=[team.pk])


def _kinds(team) -> list[tuple[str, str, dict]]:
    rows = AuditRecord.objects.filter(team=team, kind__startswith="secret.").order_by("id")
    return [(r.kind, r.target, r.data) for r in rows]


def test_admin_round_trip_never_shows_a_value(browser, team):
    response = browser.post(
        _url("team-secret-create", team),
        {"name": "OPENAI_API_KEY", "value": VALUE, "description": "for the gpt profile"},
        **HX,
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert page.strip().startswith('<section id="secrets"')
    assert 'id="secret-OPENAI_API_KEY"' in page and "for the gpt profile" in page
    assert VALUE not in page

    full = browser.get(_url("team-secrets", team))
    assert full["Cache-Control"].startswith("max-age=0")
    assert VALUE not in full.content.decode()
    assert 'type="password"' in full.content.decode()

    replace = _url("team-secret-replace", team)
    response = browser.post(
        replace,
        {"name": "OPENAI_API_KEY", "value": NEW_VALUE, "description": "for the gpt profile"},
        **HX,
    )
    assert response.status_code == 200 and NEW_VALUE not in response.content.decode()
    assert secrets.secret_values_for_team(team.pk) == {"OPENAI_API_KEY": NEW_VALUE}

    response = browser.post(replace, {"name": "OPENAI_API_KEY", "description": "rotated"}, **HX)
    assert response.status_code == 200 and "rotated" in response.content.decode()
    assert secrets.secret_values_for_team(team.pk) == {"OPENAI_API_KEY": NEW_VALUE}

    # Nothing new: the service's own words, and the form stays open.
    response = browser.post(replace, {"name": "OPENAI_API_KEY", "description": "rotated"}, **HX)
    assert response.status_code == 400
    assert "give a new value, a new description or both" in response.content.decode()

    response = browser.post(_url("team-secret-delete", team), {"name": "OPENAI_API_KEY"}, **HX)
    assert response.status_code == 200
    assert "No secrets yet." in response.content.decode()
    assert not Secret.objects.filter(team=team).exists()

    assert _kinds(team) == [
        ("secret.created", "OPENAI_API_KEY", {}),
        ("secret.updated", "OPENAI_API_KEY", {"changed": ["value"]}),
        ("secret.updated", "OPENAI_API_KEY", {"changed": ["description"]}),
        ("secret.deleted", "OPENAI_API_KEY", {}),
    ]


def test_a_refused_create_comes_back_without_the_value(browser, team):
    url = _url("team-secret-create", team)
    response = browser.post(url, {"name": "lower-case", "value": VALUE}, **HX)
    assert response.status_code == 400
    page = response.content.decode()
    assert "environment variable name" in page
    assert VALUE not in page

    browser.post(url, {"name": "TOKEN", "value": VALUE}, **HX)
    response = browser.post(url, {"name": "TOKEN", "value": VALUE}, **HX)
    assert response.status_code == 409
    assert "already has a secret named TOKEN" in response.content.decode()
    assert VALUE not in response.content.decode()

    # Without htmx a success redirects, so a reload repeats nothing.
    response = browser.post(url, {"name": "OTHER", "value": VALUE})
    assert response.status_code == 302 and response["Location"] == _url("team-secrets", team)


def test_a_member_sees_names_only_and_every_write_is_refused(team, user, django_user_model):
    secrets.secret_create(by=user, team=team, name="DEPLOY_KEY", value=VALUE)
    mia = django_user_model.objects.create_user("mia", password="mia-pw-12345")
    member_add(by=user, team=team, username="mia", role=Role.MEMBER)
    client = Client()
    client.force_login(mia)

    page = client.get(_url("team-secrets", team)).content.decode()
    assert "DEPLOY_KEY" in page and VALUE not in page
    assert 'id="secret-add"' not in page and "Replace DEPLOY_KEY" not in page
    assert _url("team-secret-delete", team) not in page

    for name, data in (
        ("team-secret-create", {"name": "MINE", "value": "x"}),
        ("team-secret-replace", {"name": "DEPLOY_KEY", "value": "x"}),
        ("team-secret-delete", {"name": "DEPLOY_KEY"}),
    ):
        assert client.post(_url(name, team), data, **HX).status_code == 403, name
    assert secrets.secret_values_for_team(team.pk) == {"DEPLOY_KEY": VALUE}


def test_another_team_is_404(team, other_user):
    client = Client()
    client.force_login(other_user)
    assert client.get(_url("team-secrets", team)).status_code == 404
    response = client.post(_url("team-secret-create", team), {"name": "X", "value": "y"}, **HX)
    assert response.status_code == 404
