"""The policy's workspace rules: allowed kinds and images, container limits; stricter wins,
the API and the Policy page show them, the service refuses bad values in words."""

from __future__ import annotations

import pytest
from django.urls import reverse

from common.errors import InvalidInput
from orchestration.workspace import container_limits
from teams.models import Policy
from teams.policies import policy_for_team, policy_update

pytestmark = pytest.mark.django_db


def test_site_and_team_rows_combine_stricter_wins(team, settings):
    settings.CANVAS_DOCKER_IMAGES = ["img:a", "img:b", "img:c"]
    Policy.objects.create(
        team=None, allowed_workspace_kinds=["local", "docker"], allowed_images=["img:a", "img:b"],
        docker_cpus=2.0, docker_memory_mb=1024,
    )  # fmt: skip
    Policy.objects.create(
        team=team, allowed_workspace_kinds=["docker"], allowed_images=["img:b", "img:c"],
        docker_cpus=4.0, docker_memory_mb=512, docker_pids=64,
    )  # fmt: skip
    policy = policy_for_team(team.pk)
    assert policy.allowed_workspace_kinds == ("docker",)
    assert policy.workspace_kind_allowed("docker") and not policy.workspace_kind_allowed("local")
    assert policy.images() == ("img:b",)  # the site's list, the site row and the team's row
    assert (policy.docker_cpus, policy.docker_memory_mb, policy.docker_pids) == (2.0, 512, 64)


def test_without_rows_every_kind_and_the_sites_images(team, settings):
    settings.CANVAS_DOCKER_IMAGES = ["img:a"]
    policy = policy_for_team(team.pk)
    assert policy.workspace_kind_allowed("docker") and policy.workspace_kind_allowed("local")
    assert policy.images() == ("img:a",)


def test_container_limits_are_the_site_settings_lowered_by_the_policy(team, settings):
    settings.CANVAS_DOCKER_CPUS, settings.CANVAS_DOCKER_MEMORY_MB = 1.5, 2048
    settings.CANVAS_DOCKER_PIDS = None
    Policy.objects.create(team=team, docker_cpus=4.0, docker_memory_mb=256, docker_pids=100)
    limits = container_limits(policy_for_team(team.pk))
    assert (limits.cpus, limits.memory_mb, limits.pids) == (1.5, 256, 100)


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"allowed_workspace_kinds": ["vm"]}, "allowed_workspace_kinds has invalid entries"),
        ({"allowed_images": ["-x"]}, "allowed_images has invalid entries"),
        ({"docker_cpus": 0}, "docker_cpus must be from 0.01"),
        ({"docker_cpus": "2"}, "docker_cpus must be a number"),
        ({"docker_memory_mb": 0}, "docker_memory_mb must be a whole number"),
        ({"docker_pids": 2.5}, "docker_pids must be a whole number"),
    ],
)
def test_bad_values_are_refused_in_words(team, user, fields, says):
    with pytest.raises(InvalidInput, match=says):
        policy_update(by=user, team=team, **fields)


def test_the_api_reads_and_replaces_the_workspace_rules(api, team, settings):
    settings.CANVAS_DOCKER_IMAGES = ["img:a", "img:b"]
    url = f"/api/teams/{team.pk}/policy"
    body = {"allowed_workspace_kinds": ["local"], "allowed_images": ["img:b"],
            "docker_cpus": 0.5, "docker_memory_mb": 128, "docker_pids": 32}  # fmt: skip
    response = api.put(url, body, content_type="application/json")
    assert response.status_code == 200, response.content
    got = api.get(url).json()
    for key, value in body.items():
        assert got["team"][key] == value
        assert got["effective"][key] == value
    bad = api.put(url, {"allowed_workspace_kinds": ["vm"]}, content_type="application/json")
    assert bad.status_code == 400 and "allowed_workspace_kinds" in bad.json()["detail"]


def test_the_policy_page_shows_and_saves_them(browser, team):
    from tests.canvas.test_policy_page import FORM, HX, _row

    form = {**FORM, "allowed_workspace_kinds": "docker", "allowed_images": "img:a img:b",
            "docker_cpus": "1.5", "docker_memory_mb": "300", "docker_pids": ""}  # fmt: skip
    response = browser.post(reverse("team-policy-set", args=[team.pk]), form, **HX)
    assert response.status_code == 200, response.content.decode()
    row = Policy.objects.get(team=team)
    assert row.allowed_workspace_kinds == ["docker"] and row.allowed_images == ["img:a", "img:b"]
    assert (row.docker_cpus, row.docker_memory_mb, row.docker_pids) == (1.5, 300, None)
    page = browser.get(reverse("team-policy", args=[team.pk])).content.decode()
    assert "docker" in _row(page, "allowed_workspace_kinds")
    assert "300" in _row(page, "docker_memory_mb")
    assert 'value="img:a, img:b"' in page  # the form shows the list as it is written
