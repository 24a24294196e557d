"""A team secret's value pasted as a literal into a team configuration (issue 23, item 7):
an MCP server's `env` or `headers`, an ACP agent profile's `env`. Literals are shown to every
member, so such a save is refused with a 400 naming the field and the secret, never the value,
and nothing is stored; a reference to the secret is accepted."""

from __future__ import annotations

import json

import pytest

from teams.models import AcpAgentProfile, AuditRecord, McpServer, Role
from teams.secrets import secret_create
from teams.services import member_add
from tests.api import call, client_for

pytestmark = pytest.mark.django_db

VALUE = "ghp-literal-check-secret-0123456789"
SHORT = "s3cr"


@pytest.fixture(autouse=True)
def _secrets(user, team):
    secret_create(by=user, team=team, name="GH_TOKEN", value=VALUE)
    secret_create(by=user, team=team, name="PIN", value=SHORT)


def _mcp(env=None, headers=None, transport="stdio") -> dict:
    server = {"name": "git", "transport": transport, "env": env or {}, "headers": headers or {}}
    if transport == "stdio":
        server["command"] = "mcp-server-git"
    else:
        server["url"] = "https://mcp.example.com/mcp"
    return server


def _acp(env) -> dict:
    return {"name": "mine", "command": "my-agent", "env": env}


def _refused(status: int, body, where: str, secret: str = "GH_TOKEN") -> None:
    assert status == 400, body
    text = json.dumps(body)
    assert VALUE not in text and "literal-check" not in text
    assert where in body["detail"] and f"team secret {secret}" in body["detail"]
    assert f'{{"secret": "{secret}"}}' in body["detail"]


@pytest.mark.parametrize(
    "server",
    [
        _mcp(env={"GITHUB_TOKEN": VALUE}),
        _mcp(env={"GITHUB_TOKEN": f"  {VALUE}\n"}),
        _mcp(headers={"Authorization": f"Bearer {VALUE}"}, transport="http"),
    ],
    ids=["env", "env-with-spaces", "header-bearer"],
)
def test_an_mcp_literal_holding_a_secret_is_refused(api, team, server):
    status, body = call(api, "post", f"/api/teams/{team.pk}/mcp-servers", server)
    where = "env GITHUB_TOKEN" if server["env"] else "headers Authorization"
    _refused(status, body, where)
    assert not McpServer.objects.filter(team=team).exists()
    assert VALUE not in json.dumps(list(AuditRecord.objects.values_list("data", flat=True)))


def test_an_mcp_update_cannot_bring_the_value_in_either(api, team):
    url = f"/api/teams/{team.pk}/mcp-servers"
    status, _ = call(api, "post", url, _mcp(env={"GITHUB_TOKEN": {"secret": "GH_TOKEN"}}))
    assert status == 201
    replace = _mcp(env={"X": VALUE})
    replace.pop("name")  # a replace keeps the name
    status, body = call(api, "put", f"{url}/git", replace)
    _refused(status, body, "env X")
    assert McpServer.objects.get(team=team, name="git").env == {
        "GITHUB_TOKEN": {"secret": "GH_TOKEN"}
    }


def test_viewers_never_see_the_value_and_references_and_ordinary_literals_pass(
    api, user, team, django_user_model
):
    url = f"/api/teams/{team.pk}/mcp-servers"
    server = _mcp(env={"GITHUB_TOKEN": {"secret": "GH_TOKEN"}, "LOG_LEVEL": "debug"})
    # A short secret inside longer text is a coincidence, not a paste: only equality counts.
    server["env"]["MODE"] = f"x{SHORT}y"
    status, body = call(api, "post", url, server)
    assert status == 201, body
    viewer = django_user_model.objects.create_user("victor", password="pw-long-enough")
    member_add(by=user, team=team, username="victor", role=Role.VIEWER)
    status, listed = call(client_for(viewer), "get", url)
    assert status == 200 and VALUE not in json.dumps(listed)


def test_a_short_secret_is_refused_when_it_is_the_whole_literal(api, team):
    status, body = call(api, "post", f"/api/teams/{team.pk}/mcp-servers", _mcp(env={"P": SHORT}))
    _refused(status, body, "env P", secret="PIN")


def test_an_acp_profile_literal_holding_a_secret_is_refused(api, team):
    url = f"/api/teams/{team.pk}/acp-agents"
    status, body = call(api, "post", url, _acp({"OPENAI_API_KEY": VALUE}))
    _refused(status, body, "env OPENAI_API_KEY")
    assert not AcpAgentProfile.objects.filter(team=team).exists()

    status, body = call(api, "post", url, _acp({"OPENAI_API_KEY": {"secret": "GH_TOKEN"}}))
    assert status == 201, body
    replace = _acp({"TOKEN": f"token={VALUE}"})
    replace.pop("name")
    status, body = call(api, "put", f"{url}/mine", replace)
    _refused(status, body, "env TOKEN")
    profile = AcpAgentProfile.objects.get(team=team, name="mine")
    assert profile.env == {"OPENAI_API_KEY": {"secret": "GH_TOKEN"}}
