"""The team's External agents page: presets shown read-only, admins add, change and delete the
team's own through htmx forms, each refusal in the service's words and status; members see
them without controls; a secret is only ever shown by its name."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from acp_bridge.team_profiles import acp_agent_create
from teams.models import AcpAgentProfile, AuditRecord, Role
from teams.secrets import secret_create
from teams.services import member_add
from tests.conftest import owner_of_own_team

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
KEY_VALUE = "sk-ant-page-secret-value-0123456789"


@pytest.fixture(autouse=True)
def _secret(user, team):
    secret_create(by=user, team=team, name="ANTHROPIC_KEY", value=KEY_VALUE)


def _url(name: str, team) -> str:
    return reverse(name, args=[team.pk])


def _agent(**fields) -> dict:
    return {
        "name": "claude", "command": "claude-agent-acp", "args": "--verbose\n--x",
        "env": "LOG_LEVEL=debug", "secret_env": "ANTHROPIC_API_KEY=ANTHROPIC_KEY",
        "allowed_secrets": "", "default_mode": "", "idle_timeout_seconds": "300",
        "turn_timeout_seconds": "1800", **fields,
    }  # fmt: skip


def test_the_page_lists_the_presets_and_the_tab_is_current(browser, team):
    page = browser.get(_url("team-acp-agents", team)).content.decode()
    for name in ("claude-code", "codex", "gemini"):
        assert f'data-acp-agent="{name}"' in page
    assert "<code>gemini --acp</code>" in page and '<span class="badge">preset</span>' in page
    here = _url("team-acp-agents", team)
    assert f'href="{here}" aria-current="page">External agents</a>' in page
    assert 'id="acp-agent-add"' in page
    assert "Edit claude-code" not in page  # presets are read-only


def test_admin_round_trip(browser, team):
    response = browser.post(_url("team-acp-agent-create", team), _agent(), **HX)
    assert response.status_code == 200, response.content.decode()
    page = response.content.decode()
    assert page.strip().startswith('<section id="acp-agents"')
    assert (
        'data-acp-agent="claude"' in page and "<code>claude-agent-acp --verbose --x</code>" in page
    )
    assert "secret <code>ANTHROPIC_KEY</code>" in page and KEY_VALUE not in page
    row = AcpAgentProfile.objects.get(team=team)
    assert (row.args, row.env) == (
        ["--verbose", "--x"],
        {"LOG_LEVEL": "debug", "ANTHROPIC_API_KEY": {"secret": "ANTHROPIC_KEY"}},
    )
    assert "ANTHROPIC_API_KEY=ANTHROPIC_KEY</textarea>" in page  # the edit form, as typed

    edit = _agent(args="", env="", secret_env="", allowed_secrets="ANTHROPIC_KEY",
                  default_mode="plan", turn_timeout_seconds="60")  # fmt: skip
    response = browser.post(_url("team-acp-agent-edit", team), edit, **HX)
    assert response.status_code == 200
    row.refresh_from_db()
    assert (row.args, row.env, row.allowed_secrets, row.default_mode, row.turn_timeout_seconds) == (
        [], {}, ["ANTHROPIC_KEY"], "plan", 60,
    )  # fmt: skip

    # The service's refusal, in its words; the edit form stays open with what was typed.
    bad = _agent(secret_env="ANTHROPIC_API_KEY=GONE")
    response = browser.post(_url("team-acp-agent-edit", team), bad, **HX)
    assert response.status_code == 400
    page = response.content.decode()
    assert "the team has no secret named &#x27;GONE&#x27;" in page
    assert "ANTHROPIC_API_KEY=GONE</textarea>" in page and "<details open>" in page
    assert browser.post(_url("team-acp-agent-create", team), _agent(), **HX).status_code == 409
    response = browser.post(_url("team-acp-agent-create", team), _agent(command="a | b"), **HX)
    assert (
        response.status_code == 400
        and "command must be a program name" in response.content.decode()
    )
    response = browser.post(_url("team-acp-agent-create", team), _agent(env=KEY_VALUE), **HX)
    page = response.content.decode()
    assert response.status_code == 400 and "Environment line 1 is not NAME=value" in page
    assert page.count(KEY_VALUE) == 1  # only in the textarea it was typed into

    response = browser.post(_url("team-acp-agent-delete", team), {"name": "claude"}, **HX)
    assert response.status_code == 200
    assert not AcpAgentProfile.objects.filter(team=team).exists()
    kinds = AuditRecord.objects.filter(team=team, kind__startswith="acp_agent.").order_by("id")
    assert list(kinds.values_list("kind", flat=True)) == [
        "acp_agent.created", "acp_agent.updated", "acp_agent.deleted",
    ]  # fmt: skip


def test_a_team_profile_replacing_a_preset_is_marked(browser, team):
    response = browser.post(_url("team-acp-agent-create", team), _agent(name="codex"), **HX)
    assert response.status_code == 200
    assert "replaces the preset one" in response.content.decode()


def test_a_plain_post_redirects_to_the_page(browser, team):
    response = browser.post(_url("team-acp-agent-create", team), _agent())
    assert response.status_code == 302 and response["Location"] == _url("team-acp-agents", team)
    response = browser.post(_url("team-acp-agent-delete", team), {"name": "codex"})
    assert response.status_code == 404
    assert "no ACP agent profile of its own named" in response.content.decode()


def test_the_audit_log_links_to_the_row(browser, team):
    browser.post(_url("team-acp-agent-create", team), _agent())
    page = browser.get(_url("team-audit", team)).content.decode()
    assert f'href="{_url("team-acp-agents", team)}#acp-agent-claude"' in page


def test_a_member_sees_agents_without_controls_and_every_write_is_refused(
    team, user, django_user_model
):
    acp_agent_create(by=user, team=team, name="claude", command="claude-agent-acp")
    mia = django_user_model.objects.create_user("mia", password="mia-pw-12345")
    member_add(by=user, team=team, username="mia", role=Role.MEMBER)
    client = Client()
    client.force_login(mia)
    page = client.get(_url("team-acp-agents", team)).content.decode()
    assert 'data-acp-agent="claude"' in page
    assert 'id="acp-agent-add"' not in page and "Delete" not in page
    for name in ("team-acp-agent-create", "team-acp-agent-edit", "team-acp-agent-delete"):
        assert client.post(_url(name, team), _agent(), **HX).status_code == 403, name
    assert AcpAgentProfile.objects.get(team=team).command == "claude-agent-acp"


def test_another_team_is_not_found(browser, django_user_model):
    bob = owner_of_own_team(django_user_model, "bob")
    bobs_team = bob.memberships.get().team
    assert browser.get(_url("team-acp-agents", bobs_team)).status_code == 404
    response = browser.post(_url("team-acp-agent-create", bobs_team), _agent(), **HX)
    assert response.status_code == 404 and not AcpAgentProfile.objects.exists()
