"""/api/teams/{id}/mcp-servers: admins add, replace and delete a team's MCP servers (audited),
every member reads them, a viewer's writes answer 403 and another team's 404; refusals are
JSON in the service's words, and no answer ever holds a secret value."""

from __future__ import annotations

import json

import pytest

from teams.models import AuditRecord, McpServer, Role
from teams.secrets import secret_create
from teams.services import member_add
from tests.api import call, client_for

pytestmark = pytest.mark.django_db

TOKEN_VALUE = "ghp-mcp-api-secret-value-0123456789"
GIT = {
    "name": "git", "transport": "stdio", "command": "mcp-server-git", "args": ["--repo", "."],
    "url": "", "env": {"GITHUB_TOKEN": {"secret": "GH_TOKEN"}, "LOG_LEVEL": "debug"},
    "headers": {}, "model_profiles": ["scripted"], "enabled": True,
}  # fmt: skip


@pytest.fixture(autouse=True)
def _secret(user, team):
    secret_create(by=user, team=team, name="GH_TOKEN", value=TOKEN_VALUE)


def _url(team, name: str = "") -> str:
    return f"/api/teams/{team.pk}/mcp-servers" + (f"/{name}" if name else "")


def test_admin_round_trip(api, team):
    status, body = call(api, "post", _url(team), GIT)
    assert status == 201, body
    assert {k: body[k] for k in GIT} == GIT
    assert TOKEN_VALUE not in json.dumps(body)
    status, listed = call(api, "get", _url(team))
    assert status == 200 and [s["name"] for s in listed] == ["git"]

    remote = {"transport": "http", "url": "https://mcp.example.com/mcp",
              "headers": {"Authorization": {"secret": "GH_TOKEN"}}, "enabled": False}  # fmt: skip
    status, body = call(api, "put", _url(team, "git"), remote)
    assert status == 200, body
    assert (body["command"], body["args"], body["env"], body["model_profiles"]) == ("", [], {}, [])
    assert body["headers"] == {"Authorization": {"secret": "GH_TOKEN"}} and not body["enabled"]

    status, body = call(api, "delete", _url(team, "git"))
    assert (status, body) == (204, None)
    status, body = call(api, "get", _url(team, "git"))
    assert status == 404
    kinds = AuditRecord.objects.filter(team=team, kind__startswith="mcp_server.").order_by("id")
    assert list(kinds.values_list("kind", flat=True)) == [
        "mcp_server.created", "mcp_server.updated", "mcp_server.deleted",
    ]  # fmt: skip
    assert TOKEN_VALUE not in json.dumps(list(kinds.values_list("data", flat=True)))


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"env": {"X": {"secret": "NOPE"}}}, "no secret named 'NOPE'"),
        ({"command": "rm -rf /"}, "command must be a program name"),
        ({"name": "a__b"}, "an MCP server name"),
        ({"url": "http://x"}, "takes command, args and env, not url"),
        ({"transport": "http", "command": "", "args": [], "env": {},
          "url": "http://127.0.0.1:8000/mcp"}, "loopback"),
        ({"transport": "http", "command": "", "args": [], "env": {},
          "url": "https://mcp.example.com/", "headers": {"Host": "x"}}, "set by the MCP client"),
    ],
)  # fmt: skip
def test_refusals_name_the_field(api, team, fields, words):
    status, body = call(api, "post", _url(team), {**GIT, **fields})
    assert status == 400, body
    assert words in body["detail"]
    assert not McpServer.objects.exists()


def test_a_duplicate_name_conflicts(api, team):
    assert call(api, "post", _url(team), GIT)[0] == 201
    status, body = call(api, "post", _url(team), GIT)
    assert status == 409 and "already exists" in body["detail"]


def test_viewers_read_but_cannot_write_and_other_teams_see_nothing(
    api, user, team, django_user_model, other_user
):
    assert call(api, "post", _url(team), GIT)[0] == 201
    viewer = django_user_model.objects.create_user("vic", password="vic-password-1")
    member_add(by=user, team=team, username="vic", role=Role.VIEWER)
    as_viewer = client_for(viewer)
    assert call(as_viewer, "get", _url(team, "git"))[0] == 200
    for method, url, body in (
        ("post", _url(team), {**GIT, "name": "other"}),
        ("put", _url(team, "git"), {"transport": "stdio", "command": "x"}),
        ("delete", _url(team, "git"), None),
    ):
        assert call(as_viewer, method, url, body)[0] == 403, method
    stranger = client_for(other_user)
    for method, url, body in (("get", _url(team), None), ("get", _url(team, "git"), None),
                              ("delete", _url(team, "git"), None)):  # fmt: skip
        assert call(stranger, method, url, body)[0] == 404, (method, url)
    assert McpServer.objects.get().command == "mcp-server-git"
