"""ACP agent profiles: presets, the site's CANVAS_ACP_AGENTS (checked at startup, naming the
bad key), a team's own rows first, an unknown name listing the ones there are, and secret
references kept as names (acp_bridge.profiles; team rows through acp_bridge.team_profiles)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from acp_bridge.profiles import (
    PRESETS,
    AcpProfile,
    SecretRef,
    UnknownAcpProfileError,
    acp_profile_get,
    acp_profiles_for,
    site_profiles_parse,
)
from acp_bridge.team_profiles import (
    acp_agent_create,
    acp_agent_delete,
    acp_agent_list,
    acp_agent_update,
)
from common.errors import Conflict, Forbidden, InvalidInput, NotFound
from teams.models import AcpAgentProfile, AuditRecord, Role
from teams.secrets import secret_create
from teams.services import member_add, team_create
from tests.conftest import REPO

SITE = {
    "claude-code": {
        "command": "/opt/acp/bin/claude-agent-acp",
        "env": {"ANTHROPIC_API_KEY": {"secret": "SITE_KEY"}, "LOG": "debug"},
    },
    "opencode": {"command": "opencode", "args": ["acp"], "turn_timeout_seconds": 60},
}
KEY_VALUE = "sk-ant-very-secret-value-0123456789"


def test_presets():
    assert set(PRESETS) == {"claude-code", "codex", "gemini"}
    assert (PRESETS["claude-code"].command, PRESETS["claude-code"].args) == ("claude-agent-acp", ())
    assert PRESETS["codex"].command == "codex-acp"
    assert (PRESETS["gemini"].command, PRESETS["gemini"].args) == ("gemini", ("--acp",))
    for profile in PRESETS.values():
        assert profile.source == "preset" and profile.team_id is None
        assert (profile.idle_timeout_seconds, profile.turn_timeout_seconds) == (300, 1800)
    with pytest.raises(AttributeError):
        PRESETS["codex"].command = "sh"  # frozen


def test_site_setting_is_parsed_with_defaults(settings):
    settings.CANVAS_ACP_AGENTS = SITE
    claude = acp_profile_get("claude-code")
    assert claude.source == "site" and claude.command == "/opt/acp/bin/claude-agent-acp"
    assert claude.env == {"ANTHROPIC_API_KEY": SecretRef("SITE_KEY"), "LOG": "debug"}
    assert claude.secret_names == ("SITE_KEY",)
    opencode = acp_profile_get("opencode")
    assert (opencode.args, opencode.turn_timeout_seconds, opencode.idle_timeout_seconds) == (
        ("acp",), 60, 300,
    )  # fmt: skip
    assert [p.name for p in acp_profiles_for(None)] == [
        "claude-code",
        "codex",
        "gemini",
        "opencode",
    ]
    assert site_profiles_parse(json.dumps(SITE)) == site_profiles_parse(SITE)
    assert site_profiles_parse("") == {} and site_profiles_parse(None) == {}


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("{not json", "CANVAS_ACP_AGENTS is not valid JSON"),
        ("[1, 2]", "CANVAS_ACP_AGENTS must be a JSON object"),
        ('{"x": "codex-acp"}', "CANVAS_ACP_AGENTS['x']: its value must be an object"),
        ('{"x": {"args": []}}', "CANVAS_ACP_AGENTS['x']: \"command\" is missing"),
        ('{"x": {"command": "rm -rf /"}}', "CANVAS_ACP_AGENTS['x']: command must be a program"),
        ('{"x": {"command": "a;b"}}', "CANVAS_ACP_AGENTS['x']: command must be a program"),
        ('{"x": {"command": "a", "args": "b"}}', "CANVAS_ACP_AGENTS['x']: args must be a list"),
        ('{"x": {"command": "a", "argz": []}}', "CANVAS_ACP_AGENTS['x']: unknown fields: argz"),
        ('{"bad name": {"command": "a"}}', "CANVAS_ACP_AGENTS['bad name']: an ACP agent name"),
        ('{"x": {"command": "a", "turn_timeout_seconds": 0}}', "turn_timeout_seconds must be"),
        ('{"x": {"command": "a", "env": {"K": {"secret": "lower"}}}}', "env K's secret must"),
        ('{"x": {"command": "a", "env": {"K": 5}}}', 'env K: a value is text or {"secret"'),
    ],
)
def test_a_malformed_site_setting_names_the_key(raw, says):
    with pytest.raises(ImproperlyConfigured) as caught:
        site_profiles_parse(raw)
    assert says in str(caught.value)


def test_a_malformed_literal_env_value_is_never_quoted():
    raw = {"x": {"command": "a", "env": {"K": KEY_VALUE + "\x00"}}}
    with pytest.raises(ImproperlyConfigured) as caught:
        site_profiles_parse(raw)
    assert "env K" in str(caught.value) and KEY_VALUE not in str(caught.value)


def test_the_server_refuses_to_start_with_a_malformed_setting(tmp_path):
    env = {**os.environ, "CANVAS_VAR_DIR": str(tmp_path),
           "CANVAS_ACP_AGENTS": '{"broken": {"command": "x | y"}}'}  # fmt: skip
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "CANVAS_ACP_AGENTS['broken']: command must be" in result.stderr


def test_profiles_are_frozen_and_env_is_read_only():
    profile = site_profiles_parse(SITE)["claude-code"]
    assert isinstance(profile, AcpProfile)
    with pytest.raises(TypeError):
        profile.env["LOG"] = "x"  # type: ignore[index]
    assert profile.env_json() == {"ANTHROPIC_API_KEY": {"secret": "SITE_KEY"}, "LOG": "debug"}


@pytest.mark.django_db
def test_team_rows_come_first_then_site_then_presets(settings, user, team, django_user_model):
    settings.CANVAS_ACP_AGENTS = SITE
    secret_create(by=user, team=team, name="ANTHROPIC_KEY", value=KEY_VALUE)
    acp_agent_create(
        by=user, team=team, name="claude-code", command="claude-agent-acp",
        env={"ANTHROPIC_API_KEY": {"secret": "ANTHROPIC_KEY"}}, default_mode="plan",
    )  # fmt: skip
    mine = acp_profile_get("claude-code", team.pk)
    assert (mine.source, mine.team_id, mine.default_mode) == ("team", team.pk, "plan")
    assert mine.env == {"ANTHROPIC_API_KEY": SecretRef("ANTHROPIC_KEY")}
    assert acp_profile_get("claude-code").source == "site"  # no team: the site's
    assert acp_profile_get("codex", team.pk).source == "preset"
    sources = {p.name: p.source for p in acp_profiles_for(team.pk)}
    assert sources == {
        "claude-code": "team",
        "codex": "preset",
        "gemini": "preset",
        "opencode": "site",
    }

    other = django_user_model.objects.create_user("other-owner", password="pw-12345678")
    their_team = team_create(user=other, name="Others")
    assert acp_profile_get("claude-code", their_team.pk).source == "site"

    acp_agent_delete(by=user, team=team, name="claude-code")
    assert acp_profile_get("claude-code", team.pk).source == "site"


@pytest.mark.django_db
def test_an_unknown_name_lists_the_available_ones(user, team):
    acp_agent_create(by=user, team=team, name="mine", command="my-acp")
    with pytest.raises(UnknownAcpProfileError) as caught:
        acp_profile_get("nope", team.pk)
    assert isinstance(caught.value, LookupError)
    assert str(caught.value) == (
        "No ACP agent profile named 'nope'. Available: claude-code, codex, gemini, mine."
    )


@pytest.mark.django_db
def test_secret_references_are_stored_as_names_never_values(user, team):
    secret_create(by=user, team=team, name="ANTHROPIC_KEY", value=KEY_VALUE)
    acp_agent_create(
        by=user, team=team, name="claude", command="claude-agent-acp",
        env={"ANTHROPIC_API_KEY": {"secret": "ANTHROPIC_KEY"}, "LOG_LEVEL": "debug"},
        allowed_secrets=["ANTHROPIC_KEY"],
    )  # fmt: skip
    row = AcpAgentProfile.objects.get()
    assert row.env == {"ANTHROPIC_API_KEY": {"secret": "ANTHROPIC_KEY"}, "LOG_LEVEL": "debug"}
    stored = json.dumps([row.env, row.allowed_secrets, row.args, row.command])
    audited = json.dumps(list(AuditRecord.objects.values_list("data", flat=True)))
    assert KEY_VALUE not in stored and KEY_VALUE not in audited
    profile = acp_profile_get("claude", team.pk)
    assert KEY_VALUE not in repr(profile)
    assert profile.secret_names == ("ANTHROPIC_KEY",)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"name": "no/slash"}, "an ACP agent name is 1 to 64"),
        ({"command": "claude-agent-acp --flag"}, "command must be a program name"),
        ({"command": "$(evil)"}, "command must be a program name"),
        ({"command": "/opt/../bin/sh"}, "command must be a program name"),
        ({"args": ["ok", 3]}, "args entry 2 must be text"),
        ({"env": {"K": {"secret": "MISSING"}}}, "env K: the team has no secret named 'MISSING'"),
        ({"env": {"K": {"secret": "A", "x": 1}}}, 'a reference is {"secret": NAME}'),
        ({"env": {"1BAD": "x"}}, "env names are environment variable names"),
        ({"allowed_secrets": ["NOPE"]}, "allowed_secrets: the team has no secret named 'NOPE'"),
        ({"idle_timeout_seconds": 0}, "idle_timeout_seconds must be a whole number"),
        ({"turn_timeout_seconds": 86_401}, "turn_timeout_seconds must be a whole number"),
        ({"turn_timeout_seconds": True}, "turn_timeout_seconds must be a whole number"),
        ({"default_mode": "has space"}, "default_mode must be a mode id"),
    ],
)
def test_bad_values_are_refused_precisely(user, team, fields, says):
    fields = {"name": "x", "command": "an-acp", **fields}
    with pytest.raises(InvalidInput) as caught:
        acp_agent_create(by=user, team=team, **fields)
    assert says in str(caught.value.detail)
    assert not AcpAgentProfile.objects.exists()


@pytest.mark.django_db
def test_a_literal_that_looks_like_a_key_is_allowed_but_never_echoed(user, team):
    acp_agent_create(by=user, team=team, name="x", command="a", env={"TOKEN": KEY_VALUE})
    assert AcpAgentProfile.objects.get().env == {"TOKEN": KEY_VALUE}
    with pytest.raises(InvalidInput) as caught:
        acp_agent_update(by=user, team=team, name="x", env={"TOKEN": KEY_VALUE * 200})
    assert "env TOKEN" in str(caught.value.detail)
    assert KEY_VALUE not in str(caught.value.detail)


@pytest.mark.django_db
def test_only_admins_write_and_each_write_is_audited(user, team, django_user_model):
    acp_agent_create(by=user, team=team, name="x", command="a", args=["--acp"])
    with pytest.raises(Conflict):
        acp_agent_create(by=user, team=team, name="x", command="a")
    acp_agent_update(by=user, team=team, name="x", command="/usr/local/bin/b", args=[])
    row = AcpAgentProfile.objects.get()
    assert (row.command, row.args) == ("/usr/local/bin/b", [])
    with pytest.raises(InvalidInput, match="unknown ACP agent fields: colour"):
        acp_agent_update(by=user, team=team, name="x", colour="red")
    mia = django_user_model.objects.create_user("mia", password="mia-pw-12345")
    member_add(by=user, team=team, username="mia", role=Role.MEMBER)
    with pytest.raises(Forbidden):
        acp_agent_create(by=mia, team=team, name="y", command="a")
    with pytest.raises(Forbidden):
        acp_agent_update(by=mia, team=team, name="x", command="a")
    with pytest.raises(Forbidden):
        acp_agent_delete(by=mia, team=team, name="x")
    acp_agent_delete(by=user, team=team, name="x")
    with pytest.raises(NotFound):
        acp_agent_delete(by=user, team=team, name="x")
    assert acp_agent_list(team=team) == []
    kinds = AuditRecord.objects.filter(team=team, kind__startswith="acp_agent.").order_by("id")
    assert list(kinds.values_list("kind", flat=True)) == [
        "acp_agent.created", "acp_agent.updated", "acp_agent.deleted",
    ]  # fmt: skip
    assert kinds.first().data["args"] == ["--acp"]
