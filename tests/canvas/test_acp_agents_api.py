"""/api/teams/{id}/acp-agents: every member lists presets, site profiles and the team's own
(marked by source), admins write the team's own; refusals are JSON in the service's words,
and no answer ever holds a secret value."""

from __future__ import annotations

import json

import pytest

from teams.models import AcpAgentProfile, AuditRecord, Role
from teams.secrets import secret_create
from teams.services import member_add
from tests.api import call, client_for
from tests.conftest import owner_of_own_team

pytestmark = pytest.mark.django_db

KEY_VALUE = "sk-ant-api-secret-value-0123456789"
CLAUDE = {
    "name": "claude", "command": "claude-agent-acp", "args": ["--verbose"],
    "env": {"ANTHROPIC_API_KEY": {"secret": "ANTHROPIC_KEY"}, "LOG_LEVEL": "debug"},
    "allowed_secrets": ["ANTHROPIC_KEY"], "default_mode": "plan",
    "idle_timeout_seconds": 60, "turn_timeout_seconds": 600,
}  # fmt: skip


@pytest.fixture(autouse=True)
def _secret(user, team):
    secret_create(by=user, team=team, name="ANTHROPIC_KEY", value=KEY_VALUE)


def _url(team, name: str = "") -> str:
    return f"/api/teams/{team.pk}/acp-agents" + (f"/{name}" if name else "")


def test_the_list_holds_presets_and_site_profiles_read_only(api, team, settings):
    settings.CANVAS_ACP_AGENTS = {"opencode": {"command": "opencode", "args": ["acp"]}}
    status, body = call(api, "get", _url(team))
    assert status == 200, body
    by_name = {p["name"]: p for p in body}
    assert list(by_name) == ["claude-code", "codex", "gemini", "opencode"]
    assert by_name["gemini"]["args"] == ["--acp"] and by_name["gemini"]["source"] == "preset"
    assert by_name["opencode"]["source"] == "site" and by_name["opencode"]["read_only"]
    assert by_name["codex"]["created_at"] is None
    status, one = call(api, "get", _url(team, "codex"))
    assert status == 200 and one["command"] == "codex-acp"
    # Read-only: no team row to change or delete.
    for method, body in (("put", {"command": "x"}), ("delete", None)):
        status, answer = call(api, method, _url(team, "codex"), body)
        assert (status, answer["error"]) == (404, "not_found"), method


def test_admin_round_trip(api, team):
    status, body = call(api, "post", _url(team), CLAUDE)
    assert status == 201, body
    assert {k: body[k] for k in CLAUDE} == CLAUDE
    assert (body["source"], body["read_only"], body["replaces"]) == ("team", False, None)
    assert body["created_at"] and body["updated_at"]
    assert KEY_VALUE not in json.dumps(body)

    status, body = call(api, "get", _url(team, "claude"))
    assert status == 200 and body["env"]["ANTHROPIC_API_KEY"] == {"secret": "ANTHROPIC_KEY"}

    # PUT replaces every field: left out, they take their defaults.
    status, body = call(api, "put", _url(team, "claude"), {"command": "/usr/bin/claude-acp"})
    assert status == 200, body
    assert (body["command"], body["args"], body["env"], body["default_mode"]) == (
        "/usr/bin/claude-acp", [], {}, None,
    )  # fmt: skip
    assert (body["idle_timeout_seconds"], body["turn_timeout_seconds"]) == (300, 1800)

    status, body = call(api, "delete", _url(team, "claude"))
    assert (status, body) == (204, None)
    status, body = call(api, "get", _url(team, "claude"))
    assert status == 404 and "Available: claude-code, codex, gemini." in body["detail"]
    kinds = AuditRecord.objects.filter(team=team, kind__startswith="acp_agent.").order_by("id")
    assert list(kinds.values_list("kind", flat=True)) == [
        "acp_agent.created", "acp_agent.updated", "acp_agent.deleted",
    ]  # fmt: skip


def test_a_team_profile_replaces_a_preset(api, team):
    status, body = call(api, "post", _url(team), {**CLAUDE, "name": "claude-code"})
    assert status == 201, body
    assert (body["source"], body["replaces"]) == ("team", "preset")
    listed = {p["name"]: p for p in call(api, "get", _url(team))[1]}
    assert listed["claude-code"]["source"] == "team" and listed["claude-code"]["args"] == [
        "--verbose"
    ]
    assert call(api, "delete", _url(team, "claude-code"))[0] == 204
    assert call(api, "get", _url(team, "claude-code"))[1]["source"] == "preset"


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({**CLAUDE, "name": "a/b"}, "an ACP agent name is 1 to 64"),
        ({**CLAUDE, "command": "claude; rm -rf ~"}, "command must be a program name"),
        ({**CLAUDE, "env": {"K": {"secret": "GONE"}}}, "the team has no secret named 'GONE'"),
        ({**CLAUDE, "allowed_secrets": ["lower"]}, "secrets entry 1 must be a team secret name"),
        ({**CLAUDE, "env": {"K": 7}}, 'env K: a value is text or {"secret": NAME}'),
    ],
)
def test_bad_values_are_a_400_in_the_services_words(api, team, body, says):
    status, answer = call(api, "post", _url(team), body)
    assert status == 400, answer
    detail = answer["detail"]
    if isinstance(detail, list):  # a value the profile rules refuse: named as its field
        [detail] = detail
        assert detail["field"] in body, detail
        detail = detail["message"]
    assert answer["error"] == "invalid_input" and says in detail
    assert not AcpAgentProfile.objects.exists()


def test_a_key_typed_as_a_literal_is_not_echoed_in_a_refusal(api, team):
    body = {**CLAUDE, "env": {"ANTHROPIC_API_KEY": KEY_VALUE + "x" * 5000}}
    status, answer = call(api, "post", _url(team), body)
    assert status == 400 and KEY_VALUE not in json.dumps(answer)


def test_schema_refusals_name_the_field(api, team):
    status, answer = call(api, "post", _url(team), {**CLAUDE, "turn_timeout_seconds": 0})
    assert status == 400 and answer["detail"][0]["field"] == "turn_timeout_seconds"
    status, answer = call(api, "post", _url(team), {"name": "x"})
    assert status == 400 and answer["detail"][0]["field"] == "command"


def test_a_duplicate_is_a_409(api, team):
    assert call(api, "post", _url(team), CLAUDE)[0] == 201
    status, answer = call(api, "post", _url(team), CLAUDE)
    assert (status, answer["error"]) == (409, "conflict")


def test_members_read_and_only_admins_write(api, user, team, django_user_model):
    call(api, "post", _url(team), CLAUDE)
    for role in (Role.MEMBER, Role.VIEWER):
        person = django_user_model.objects.create_user(f"p-{role}", password="pw-12345678")
        member_add(by=user, team=team, username=person.username, role=role)
        client = client_for(person)
        assert "claude" in [p["name"] for p in call(client, "get", _url(team))[1]]
        assert call(client, "get", _url(team, "claude"))[0] == 200
        assert call(client, "post", _url(team), {**CLAUDE, "name": "mine"})[0] == 403
        assert call(client, "put", _url(team, "claude"), {"command": "x"})[0] == 403
        assert call(client, "delete", _url(team, "claude"))[0] == 403
    assert AcpAgentProfile.objects.get().command == "claude-agent-acp"


def test_another_team_is_not_found(api, team, django_user_model):
    bob = owner_of_own_team(django_user_model, "bob")
    bobs_team = bob.memberships.get().team
    call(client_for(bob), "post", _url(bobs_team), {**CLAUDE, "env": {}, "allowed_secrets": []})
    for method, body in (
        ("get", None), ("post", CLAUDE), ("put", {"command": "x"}), ("delete", None),
    ):  # fmt: skip
        url = _url(bobs_team, "" if method == "post" else "claude")
        status, answer = call(api, method, url, body)
        assert (status, answer["error"]) == (404, "not_found"), method
    assert AcpAgentProfile.objects.get(team=bobs_team).command == "claude-agent-acp"
