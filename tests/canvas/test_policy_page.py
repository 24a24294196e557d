"""The team's Policy page: each limit's site default, team value and value in force; admins
change the team's row through teams.policies, in its words."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import Client
from django.urls import reverse

from teams.models import AuditRecord, Policy, Role
from teams.services import member_add

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
FORM = {
    "confirmation_mode": "risky",
    "risk_threshold": "HIGH",
    "network": "none",
    "allowed_tools": "",
    "allowed_agent_kinds": "",
    "max_iterations_per_run": "",
    "max_cost_per_run_usd": "",
    "max_cost_per_month_usd": "",
    "max_concurrent_runs": "",
}


def _row(page: str, key: str) -> str:
    start = page.index(f'id="policy-{key}"')
    return page[start : page.index("</tr>", start)]


def test_limits_show_site_default_team_value_and_the_stricter_in_force(browser, team):
    Policy.objects.create(team=None, max_cost_per_run_usd=Decimal("2"), max_concurrent_runs=3)
    url = reverse("team-policy", args=[team.pk])
    page = browser.get(url).content.decode()
    assert "$2" in _row(page, "max_cost_per_run_usd")
    assert "has not set a policy of its own" in page

    saved = browser.post(
        reverse("team-policy-set", args=[team.pk]),
        {**FORM, "max_cost_per_run_usd": "5", "max_iterations_per_run": "40",
         "allowed_tools": "terminal, think", "confirmation_mode": "always"},
        **HX,
    )  # fmt: skip
    assert saved.status_code == 200
    page = saved.content.decode()
    assert "Policy saved" in page
    cost = _row(page, "max_cost_per_run_usd")
    # The team's $5 is looser than the site's $2: kept, marked, and $2 is in force.
    assert "$5" in cost and "site's default is stricter" in cost and "<strong>$2</strong>" in cost
    assert "<strong>40</strong>" in _row(page, "max_iterations_per_run")
    assert "<strong>terminal, think</strong>" in _row(page, "allowed_tools")
    assert "<strong>Always confirm</strong>" in _row(page, "confirmation_mode")
    assert Policy.objects.get(team=team).allowed_tools == ["terminal", "think"]
    record = AuditRecord.objects.get(team=team, kind="policy.updated")
    assert record.data["after"]["max_iterations_per_run"] == 40

    # The form shows what is saved.
    page = browser.get(url).content.decode()
    assert 'value="terminal, think"' in page and 'value="40"' in page


def test_refusals_are_the_services_words(browser, team, settings):
    settings.CANVAS_SANDBOX_ALLOW_HOST_NETWORK = False
    url = reverse("team-policy-set", args=[team.pk])
    for data, words in (
        ({"max_cost_per_run_usd": "-1"}, "max_cost_per_run_usd must be between 0 and"),
        ({"max_iterations_per_run": "0"}, "must be a whole number from 1 to 10000"),
        ({"allowed_tools": "rm -rf;"}, "allowed_tools has invalid entries"),
        ({"network": "host"}, "not allowed on this site"),
    ):
        response = browser.post(url, {**FORM, **data}, **HX)
        assert response.status_code == 400, data
        assert words in response.content.decode(), data
    assert not Policy.objects.filter(team=team).exists()


def test_a_member_reads_the_policy_and_cannot_change_it(team, user, django_user_model):
    mia = django_user_model.objects.create_user("mia", password="mia-pw-12345")
    member_add(by=user, team=team, username="mia", role=Role.MEMBER)
    client = Client()
    client.force_login(mia)
    page = client.get(reverse("team-policy", args=[team.pk])).content.decode()
    assert 'id="policy-max_cost_per_run_usd"' in page
    assert 'id="policy-form"' not in page
    response = client.post(reverse("team-policy-set", args=[team.pk]), FORM, **HX)
    assert response.status_code == 403
    assert not Policy.objects.filter(team=team).exists()
