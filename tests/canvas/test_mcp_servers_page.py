"""The team's MCP servers page: admins add, change and delete servers through htmx forms, each
refusal in the service's words and status; members see them without controls; a secret is
only ever shown by its name."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from orchestration.mcp.servers import mcp_server_create
from teams.models import AuditRecord, McpServer, Role
from teams.secrets import secret_create
from teams.services import member_add

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
TOKEN_VALUE = "ghp-mcp-page-secret-value-0123456789"


@pytest.fixture(autouse=True)
def _secret(user, team):
    secret_create(by=user, team=team, name="GH_TOKEN", value=TOKEN_VALUE)


def _url(name: str, team) -> str:
    return reverse(name, args=[team.pk])


def _server(**fields) -> dict:
    return {
        "name": "git", "transport": "stdio", "command": "mcp-server-git",
        "args": "--repo\n.", "env": "LOG_LEVEL=debug", "secret_env": "GITHUB_TOKEN=GH_TOKEN",
        "url": "", "headers": "", "secret_headers": "", "model_profiles": "scripted, demo",
        "enabled": "on", **fields,
    }  # fmt: skip


def test_admin_round_trip(browser, team):
    page = browser.get(_url("team-mcp-servers", team)).content.decode()
    here = _url("team-mcp-servers", team)
    assert f'href="{here}" aria-current="page">MCP servers</a>' in page
    assert 'id="mcp-server-add"' in page and "No MCP servers" in page

    response = browser.post(_url("team-mcp-server-create", team), _server(), **HX)
    assert response.status_code == 200, response.content.decode()
    page = response.content.decode()
    assert page.strip().startswith('<section id="mcp-servers"')
    assert 'data-mcp-server="git"' in page and "<code>mcp-server-git --repo .</code>" in page
    assert "secret <code>GH_TOKEN</code>" in page and TOKEN_VALUE not in page
    server = McpServer.objects.get()
    assert server.env == {"LOG_LEVEL": "debug", "GITHUB_TOKEN": {"secret": "GH_TOKEN"}}
    assert server.model_profiles == ["scripted", "demo"] and server.enabled

    remote = _server(transport="http", command="", args="", env="", secret_env="",
                     url="https://mcp.example.com/mcp", secret_headers="Authorization=GH_TOKEN",
                     enabled="")  # fmt: skip
    response = browser.post(_url("team-mcp-server-edit", team), remote, **HX)
    assert response.status_code == 200, response.content.decode()
    server.refresh_from_db()
    assert (server.transport, server.url, server.enabled) == (
        "http", "https://mcp.example.com/mcp", False,
    )  # fmt: skip
    assert server.headers == {"Authorization": {"secret": "GH_TOKEN"}}

    response = browser.post(_url("team-mcp-server-delete", team), {"name": "git"}, **HX)
    assert response.status_code == 200 and not McpServer.objects.exists()
    assert AuditRecord.objects.filter(kind__startswith="mcp_server.").count() == 3


def test_a_refusal_comes_back_in_the_services_words(browser, team):
    bad = _server(secret_env="GITHUB_TOKEN=MISSING")
    response = browser.post(_url("team-mcp-server-create", team), bad, **HX)
    assert response.status_code == 400
    assert "no secret named &#x27;MISSING&#x27;" in response.content.decode()
    assert not McpServer.objects.exists()


def test_members_see_servers_without_controls_and_viewers_cannot_write(
    user, team, django_user_model, other_user
):
    mcp_server_create(by=user, team=team, name="git", transport="stdio", command="git-mcp")
    viewer = django_user_model.objects.create_user("vic", password="vic-password-1")
    member_add(by=user, team=team, username="vic", role=Role.VIEWER)
    as_viewer = Client()
    as_viewer.force_login(viewer)
    page = as_viewer.get(_url("team-mcp-servers", team)).content.decode()
    assert 'data-mcp-server="git"' in page and 'id="mcp-server-add"' not in page
    refused = as_viewer.post(_url("team-mcp-server-delete", team), {"name": "git"}, **HX)
    assert refused.status_code == 403 and McpServer.objects.exists()
    stranger = Client()
    stranger.force_login(other_user)
    assert stranger.get(_url("team-mcp-servers", team)).status_code == 404
