"""The policy's sub-agent rules: the site's CANVAS_SUBAGENT_* settings are the defaults and
caps, a row may only tighten them (forbidding wins), the service refuses bad values in words,
and the API and the Policy page show them."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from common.errors import InvalidInput
from teams.models import Policy
from teams.policies import EffectivePolicy, combine, policy_for_team, policy_update

pytestmark = pytest.mark.django_db


def test_without_rows_the_sites_settings_apply(team):
    policy = policy_for_team(team.pk)
    assert policy.subagents_allowed is True
    assert (
        policy.max_subagent_depth, policy.max_children_per_call, policy.max_children_per_run,
        policy.max_concurrent_children,
    ) == (3, 5, 50, 8)  # fmt: skip


def test_rows_tighten_the_settings_and_never_loosen_them(team, settings):
    settings.CANVAS_SUBAGENT_MAX_CHILDREN_PER_RUN = 20
    Policy.objects.create(team=None, max_subagent_depth=2, max_children_per_call=50)
    Policy.objects.create(team=team, max_subagent_depth=5, max_concurrent_children=4)
    policy = policy_for_team(team.pk)
    assert policy.max_subagent_depth == 2  # the site row is stricter than the team's 5
    assert policy.max_children_per_call == 5  # the setting caps the site row's 50
    assert policy.max_children_per_run == 20  # no row sets it: the setting
    assert policy.max_concurrent_children == 4


def test_forbidding_wins_whichever_side_says_it(team, settings):
    forbid, allow = EffectivePolicy(subagents_allowed=False), EffectivePolicy()
    assert not combine(forbid, allow).subagents_allowed
    assert not combine(allow, forbid).subagents_allowed

    Policy.objects.create(team=team, subagents_allowed=False)
    assert not policy_for_team(team.pk).subagents_allowed
    Policy.objects.filter(team=team).update(subagents_allowed=True)
    settings.CANVAS_SUBAGENTS_ALLOWED = False
    assert not policy_for_team(team.pk).subagents_allowed  # a team cannot allow past the site


def test_a_site_setting_of_no_limit_leaves_it_to_the_rows(team, settings):
    settings.CANVAS_SUBAGENT_MAX_DEPTH = None
    assert policy_for_team(team.pk).max_subagent_depth is None
    Policy.objects.create(team=team, max_subagent_depth=7)
    assert policy_for_team(team.pk).max_subagent_depth == 7


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ({"subagents_allowed": "no"}, "subagents_allowed must be true or false"),
        ({"subagents_allowed": None}, "subagents_allowed must be true or false"),
        ({"max_subagent_depth": 0}, "max_subagent_depth must be a whole number from 1 to 20"),
        ({"max_children_per_call": 101}, "from 1 to 100"),
        ({"max_children_per_run": 2.5}, "max_children_per_run must be a whole number"),
        ({"max_concurrent_children": True}, "max_concurrent_children must be a whole number"),
    ],
)
def test_bad_values_are_refused_in_words(user, team, bad, says):
    with pytest.raises(InvalidInput, match=says):
        policy_update(by=user, team=team, **bad)


def test_the_api_reads_and_replaces_the_subagent_fields(api, team):
    url = f"/api/teams/{team.pk}/policy"
    body = api.get(url).json()
    assert body["effective"]["subagents_allowed"] is True
    assert body["effective"]["max_subagent_depth"] == 3

    answer = api.put(
        url, json.dumps({"subagents_allowed": False, "max_children_per_call": 2}),
        content_type="application/json",
    )  # fmt: skip
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["team"]["subagents_allowed"] is False
    assert body["team"]["max_children_per_call"] == 2
    assert body["team"]["max_subagent_depth"] is None
    assert body["effective"]["subagents_allowed"] is False
    assert body["effective"]["max_children_per_call"] == 2
    assert body["effective"]["max_subagent_depth"] == 3

    refused = api.put(url, json.dumps({"max_subagent_depth": 0}), content_type="application/json")
    assert refused.status_code == 400


def test_the_policy_page_shows_and_saves_them(browser, team):
    page = browser.get(reverse("team-policy", args=[team.pk])).content.decode()
    assert 'id="policy-subagents_allowed"' in page and "Sub-agent depth" in page
    # No subagents_allowed: an unticked box is not sent, and forbids.
    form = {
        "confirmation_mode": "risky", "risk_threshold": "HIGH", "network": "none",
        "max_subagent_depth": "2", "max_children_per_run": "10",
    }  # fmt: skip
    saved = browser.post(
        reverse("team-policy-set", args=[team.pk]), form, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "Policy saved" in saved
    start = saved.index('id="policy-subagents_allowed"')
    assert "<strong>forbidden</strong>" in saved[start : saved.index("</tr>", start)]
    row = Policy.objects.get(team=team)
    assert (row.subagents_allowed, row.max_subagent_depth, row.max_children_per_run) == (
        False, 2, 10,
    )  # fmt: skip
