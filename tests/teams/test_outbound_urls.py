"""Saving a URL the server will call for a team (the notification webhook, a model profile's
api_base) refuses loopback, private, link-local, metadata and other internal targets with a
400 that says why, unless the site lists the range in CANVAS_ALLOWED_PRIVATE_NETWORKS.
Nothing here sends a request: saving only checks."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from teams.models import ModelProfile, TeamNotification
from tests.api import send

pytestmark = pytest.mark.django_db

BAD_TARGETS = {
    "http://169.254.169.254/latest/meta-data/iam/": "cloud metadata endpoint",
    "http://metadata.google.internal/computeMetadata/v1/": "cloud metadata endpoint",
    "http://[fd00:ec2::254]/latest/": "cloud metadata endpoint",
    "http://10.0.0.5/hook": "private address",
    "http://192.168.1.1/": "private address",
    "http://172.20.0.2:8080/": "private address",
    "http://[fc00::1]/": "private address",
    "http://[::1]:8080/": "loopback address",
    "http://127.0.0.1:6379/": "loopback address",
    "http://localhost:5432/": "loopback name",
    "http://[::ffff:127.0.0.1]/": "loopback address",
    "http://[::ffff:169.254.169.254]/": "cloud metadata endpoint",
    "http://169.254.10.1/": "link-local address",
    "http://[fe80::1]/": "link-local address",
    "http://0.0.0.0:8000/": "unspecified address",
    "http://224.0.0.251/": "multicast address",
    "http://240.0.0.1/": "reserved address",
    "http://100.64.0.1/": "shared (CGNAT) address",
}
"""Every one also refused spelled so that Django's URLValidator rejects it first."""
ODD_SPELLINGS = ["http://metadata/", "http://127.1/", "http://2130706433/", "http://0x7f000001/"]


def put_webhook(api: Client, team, url: str):
    return send(api, "put", f"/api/teams/{team.pk}/notifications", {"url": url})


def post_profile(api: Client, team, api_base: str, name: str = "p"):
    body = {"name": name, "model": "openai/gpt-4o-mini", "api_base": api_base}
    return send(api, "post", f"/api/teams/{team.pk}/profiles", body)


@pytest.mark.parametrize(("url", "why"), BAD_TARGETS.items())
def test_internal_webhook_urls_are_refused_on_save(api, team, url, why) -> None:
    response = put_webhook(api, team, url)
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid_input"
    assert response.json()["detail"].startswith("the webhook URL is refused: ")
    assert why in response.json()["detail"]
    assert not TeamNotification.objects.exists()


@pytest.mark.parametrize(("url", "why"), BAD_TARGETS.items())
def test_internal_api_bases_are_refused_on_save(api, team, url, why) -> None:
    response = post_profile(api, team, url)
    assert response.status_code == 400, response.content
    assert response.json()["detail"].startswith("api_base is refused: ")
    assert why in response.json()["detail"]
    assert not ModelProfile.objects.exists()


def test_an_update_cannot_move_a_profile_inside(api, team) -> None:
    assert post_profile(api, team, "https://93.184.216.34/v1").status_code == 201
    url = f"/api/teams/{team.pk}/profiles/p"
    body = {"model": "openai/gpt-4o-mini", "api_base": "http://169.254.169.254/"}
    response = send(api, "put", url, body)
    assert response.status_code == 400 and "cloud metadata" in response.json()["detail"]
    assert ModelProfile.objects.get().api_base == "https://93.184.216.34/v1"


@pytest.mark.parametrize("url", ODD_SPELLINGS)
def test_odd_spellings_of_internal_targets_are_refused(api, team, url) -> None:
    assert put_webhook(api, team, url).status_code == 400
    assert post_profile(api, team, url).status_code == 400
    assert not TeamNotification.objects.exists() and not ModelProfile.objects.exists()


def test_public_targets_and_unresolvable_names_are_saved(api, team) -> None:
    # A public literal address passes; a name this host cannot resolve is checked at send.
    assert put_webhook(api, team, "https://93.184.216.34/services/T1/B2/x").status_code == 200
    assert put_webhook(api, team, "https://hooks.example.invalid/x").status_code == 200
    assert post_profile(api, team, "https://93.184.216.34/v1").status_code == 201
    assert post_profile(api, team, "https://llm.example.invalid/v1", name="q").status_code == 201


def test_the_site_setting_lets_listed_ranges_through(api, team, settings) -> None:
    settings.CANVAS_ALLOWED_PRIVATE_NETWORKS = ["10.0.0.0/8", "127.0.0.0/8"]
    assert put_webhook(api, team, "http://10.1.2.3:8080/hook").status_code == 200
    assert post_profile(api, team, "http://localhost:11434/v1").status_code == 201
    still = put_webhook(api, team, "http://192.168.1.1/hook")
    assert still.status_code == 400 and "private address" in still.json()["detail"]
    metadata = post_profile(api, team, "http://169.254.169.254/", name="q")
    assert metadata.status_code == 400 and "never allowed" in metadata.json()["detail"]


def test_the_page_refuses_an_internal_webhook_with_the_reason(user, team) -> None:
    browser = Client()
    browser.force_login(user)
    response = browser.post(
        reverse("team-notification-set", args=[team.pk]),
        {"url": "http://169.254.169.254/latest/meta-data/"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 400
    assert "cloud metadata endpoint" in response.content.decode()
    assert not TeamNotification.objects.exists()


@pytest.mark.parametrize("model", ["ollama/llama3", "ollama_chat/llama3", "llamafile/any"])
def test_a_provider_that_defaults_to_the_local_host_needs_an_api_base(api, team, model) -> None:
    body = {"name": "local", "model": model}
    response = send(api, "post", f"/api/teams/{team.pk}/profiles", body)
    assert response.status_code == 400
    assert "without an api_base calls http://" in response.json()["detail"]
    assert "loopback" in response.json()["detail"]
    # With a public api_base it is fine; taking that away again is refused.
    public = body | {"api_base": "https://93.184.216.34/"}
    assert send(api, "post", f"/api/teams/{team.pk}/profiles", public).status_code == 201
    cleared = {"model": model, "api_base": ""}
    moved = send(api, "put", f"/api/teams/{team.pk}/profiles/local", cleared)
    assert moved.status_code == 400 and "without an api_base" in moved.json()["detail"]


def test_a_local_default_is_allowed_with_the_loopback_range(api, team, loopback_allowed) -> None:
    body = {"name": "local", "model": "ollama/llama3"}
    assert send(api, "post", f"/api/teams/{team.pk}/profiles", body).status_code == 201
