"""The policy's answers to external (ACP) agents' permission requests: which tool kinds are
granted without asking, and how long a request waits for a person."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from common.errors import InvalidInput
from teams.models import AuditRecord, Policy, Team
from teams.policies import EffectivePolicy, policy_for_team, policy_update
from teams.tokens import api_token_create

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


def team_of(user) -> Team:
    return Team.objects.get(memberships__user=user)


# --- combining rows ---------------------------------------------------------------------------


def test_no_rows_grant_nothing_and_wait_the_sites_time(user, settings):
    settings.CANVAS_ACP_PERMISSION_TIMEOUT_SECONDS = 600
    effective = policy_for_team(team_of(user).pk)
    assert effective.acp_auto_allow_kinds == ()
    assert not effective.acp_auto_allows("read") and not effective.acp_auto_allows(None)
    assert effective.acp_permission_timeout() == 600.0


def test_the_teams_row_alone_stands(user):
    Policy.objects.create(team=team_of(user), acp_auto_allow_kinds=["read", "search"])
    effective = policy_for_team(team_of(user).pk)
    assert effective.acp_auto_allow_kinds == ("read", "search")
    assert effective.acp_auto_allows("search") and not effective.acp_auto_allows("execute")
    assert not effective.acp_auto_allows(None)


def test_team_may_only_narrow_what_the_site_grants(user):
    Policy.objects.create(team=None, acp_auto_allow_kinds=["read", "search", "think"])
    Policy.objects.create(team=team_of(user), acp_auto_allow_kinds=["read", "execute"])
    assert policy_for_team(team_of(user).pk).acp_auto_allow_kinds == ("read",)


def test_an_empty_list_grants_nothing_rather_than_everything(user):
    # Unlike allowed_tools, where an empty row list means "no restriction".
    Policy.objects.create(team=None, acp_auto_allow_kinds=["read"])
    Policy.objects.create(team=team_of(user))
    assert policy_for_team(team_of(user).pk).acp_auto_allow_kinds == ()
    Policy.objects.filter(team=None).update(acp_auto_allow_kinds=[])
    Policy.objects.filter(team=team_of(user)).update(acp_auto_allow_kinds=["read"])
    assert policy_for_team(team_of(user).pk).acp_auto_allow_kinds == ()


def test_the_shorter_wait_wins_and_the_site_setting_caps_it(user, settings):
    settings.CANVAS_ACP_PERMISSION_TIMEOUT_SECONDS = 600
    team = team_of(user)
    Policy.objects.create(team=None, acp_permission_timeout_seconds=120)
    Policy.objects.create(team=team, acp_permission_timeout_seconds=300)
    effective = policy_for_team(team.pk)
    assert effective.acp_permission_timeout_seconds == 120
    assert effective.acp_permission_timeout() == 120.0

    Policy.objects.filter(team=None).update(acp_permission_timeout_seconds=None)
    assert policy_for_team(team.pk).acp_permission_timeout() == 300.0
    Policy.objects.filter(team=team).update(acp_permission_timeout_seconds=5000)
    assert policy_for_team(team.pk).acp_permission_timeout() == 600.0
    assert EffectivePolicy(acp_permission_timeout_seconds=30).acp_permission_timeout() == 30.0


# --- changing a policy ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"acp_auto_allow_kinds": ["read", "write"]}, "'write'"),
        ({"acp_auto_allow_kinds": "read"}, "must be a list of tool kinds"),
        ({"acp_permission_timeout_seconds": 0}, "must be a whole number from 1 to"),
        ({"acp_permission_timeout_seconds": True}, "must be a whole number from 1 to"),
        ({"acp_permission_timeout_seconds": 10**9}, "must be a whole number from 1 to"),
    ],
)
def test_bad_values_are_refused_in_words(user, fields, words):
    with pytest.raises(InvalidInput) as refused:
        policy_update(by=user, team=team_of(user), **fields)
    assert words in str(refused.value)
    assert not Policy.objects.filter(team=team_of(user)).exists()


def test_an_unknown_kind_is_named_with_the_valid_ones(user):
    with pytest.raises(InvalidInput) as refused:
        policy_update(by=user, team=team_of(user), acp_auto_allow_kinds=["write"])
    message = str(refused.value)
    assert "acp_auto_allow_kinds" in message and "'write'" in message
    assert "read, edit, delete, move, search, execute, think, fetch, switch_mode, other" in message


def test_update_keeps_kinds_once_and_is_audited(user):
    row = policy_update(
        by=user, team=team_of(user), acp_auto_allow_kinds=["read", "search", "read"],
        acp_permission_timeout_seconds=90,
    )  # fmt: skip
    assert row.acp_auto_allow_kinds == ["read", "search"]
    record = AuditRecord.objects.get(team=team_of(user), kind="policy.updated")
    assert record.data["after"]["acp_auto_allow_kinds"] == ["read", "search"]
    assert record.data["after"]["acp_permission_timeout_seconds"] == 90


# --- the API ----------------------------------------------------------------------------------


def test_api_put_and_get_round_trip(user, settings):
    settings.CANVAS_ACP_PERMISSION_TIMEOUT_SECONDS = 600
    client = Client(headers={"Authorization": f"Bearer {api_token_create(user=user, name='t')[1]}"})
    url = f"/api/teams/{team_of(user).pk}/policy"
    body = {"acp_auto_allow_kinds": ["read", "search"], "acp_permission_timeout_seconds": 120}
    put = client.put(url, data=json.dumps(body), content_type="application/json")
    assert put.status_code == 200, put.content
    got = client.get(url).json()
    assert got == put.json()
    for layer in ("team", "effective"):
        assert got[layer]["acp_auto_allow_kinds"] == ["read", "search"]
        assert got[layer]["acp_permission_timeout_seconds"] == 120

    # PUT replaces the whole policy: left out, the kinds fall back to none.
    client.put(url, data=json.dumps({}), content_type="application/json")
    got = client.get(url).json()
    assert got["effective"]["acp_auto_allow_kinds"] == []
    assert got["effective"]["acp_permission_timeout_seconds"] is None

    bad = client.put(
        url, data=json.dumps({"acp_auto_allow_kinds": ["write"]}), content_type="application/json"
    )
    assert bad.status_code == 400 and "'write'" in bad.content.decode()


# --- the page ---------------------------------------------------------------------------------


def _row(page: str, key: str) -> str:
    start = page.index(f'id="policy-{key}"')
    return page[start : page.index("</tr>", start)]


def test_form_round_trip(browser, team, settings):
    settings.CANVAS_ACP_PERMISSION_TIMEOUT_SECONDS = 600
    form = {"confirmation_mode": "risky", "risk_threshold": "HIGH", "network": "none"}
    url = reverse("team-policy", args=[team.pk])
    page = browser.get(url).content.decode()
    assert "none (ask for every request)" in _row(page, "acp_auto_allow_kinds")
    assert "<strong>600 s</strong>" in _row(page, "acp_permission_timeout_seconds")

    saved = browser.post(
        reverse("team-policy-set", args=[team.pk]),
        {**form, "acp_auto_allow_kinds": "read, search", "acp_permission_timeout_seconds": "90"},
        **HX,
    )
    assert saved.status_code == 200
    page = saved.content.decode()
    assert "<strong>read, search</strong>" in _row(page, "acp_auto_allow_kinds")
    assert "<strong>90 s</strong>" in _row(page, "acp_permission_timeout_seconds")
    row = Policy.objects.get(team=team)
    assert (row.acp_auto_allow_kinds, row.acp_permission_timeout_seconds) == (
        ["read", "search"],
        90,
    )

    page = browser.get(url).content.decode()
    assert 'value="read, search"' in page and 'value="90"' in page

    refused = browser.post(
        reverse("team-policy-set", args=[team.pk]), {**form, "acp_auto_allow_kinds": "write"}, **HX
    )
    assert refused.status_code == 400 and "&#x27;write&#x27;" in refused.content.decode()
    assert Policy.objects.get(team=team).acp_auto_allow_kinds == ["read", "search"]
