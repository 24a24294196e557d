"""The "Sandbox" section of the team's hooks page: the team policy's network, edited by admins."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from teams.models import Policy

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


def test_the_page_shows_the_network_and_host_is_refused_unless_the_site_allows_it(
    browser, team, settings
) -> None:
    settings.CANVAS_SANDBOX_ALLOW_HOST_NETWORK = False
    page = browser.get(reverse("team-hooks", args=[team.pk])).content.decode()
    assert 'id="sandbox"' in page and "Network now: <strong>none</strong>" in page
    assert "CANVAS_SANDBOX_ALLOW_HOST_NETWORK" in page

    url = reverse("team-sandbox-set", args=[team.pk])
    refused = browser.post(url, {"network": "host"}, **HX)
    assert refused.status_code == 400
    assert "not allowed on this site" in refused.content.decode()
    assert not Policy.objects.exists()
    assert browser.post(url, {"network": "internet"}, **HX).status_code == 400

    settings.CANVAS_SANDBOX_ALLOW_HOST_NETWORK = True
    saved = browser.post(url, {"network": "host"}, **HX)
    assert saved.status_code == 200
    assert "Network now: <strong>the host's network" in saved.content.decode()
    assert Policy.objects.get(team=team).network == "host"
    assert browser.post(url, {"network": "none"}).status_code == 302  # without htmx: redirect
    assert Policy.objects.get(team=team).network == "none"


def test_only_admins_may_change_it(team, user, other_user) -> None:
    outsider = Client()
    outsider.force_login(other_user)
    url = reverse("team-sandbox-set", args=[team.pk])
    assert outsider.post(url, {"network": "none"}, **HX).status_code == 404
    assert not Policy.objects.exists()
