"""The team's Agents page: admins add, change and delete definitions through htmx forms, each
refusal in the service's words and status; members see them without controls."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from orchestration.subagents.team_agents import team_agent_create
from teams.models import AuditRecord, Role, TeamAgent
from teams.services import member_add
from tests.conftest import owner_of_own_team

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


def _url(name: str, team) -> str:
    return reverse(name, args=[team.pk])


def _agent(**fields) -> dict:
    return {
        "name": "reviewer", "description": "Reviews a diff.", "tools": "terminal, think",
        "model": "", "max_iterations": "", "instructions": "Name the line.", **fields,
    }  # fmt: skip


def test_the_page_lists_the_builtin_and_the_tab_is_current(browser, team):
    page = browser.get(_url("team-agents", team)).content.decode()
    assert 'data-agent="general"' in page and "built-in" in page
    assert f'href="{_url("team-agents", team)}" aria-current="page">Agents</a>' in page
    assert 'id="agent-add"' in page


def test_admin_round_trip(browser, team):
    response = browser.post(_url("team-agent-create", team), _agent(), **HX)
    assert response.status_code == 200
    page = response.content.decode()
    assert page.strip().startswith('<section id="agents"')
    assert 'data-agent="reviewer"' in page and "<code>terminal</code>, <code>think</code>" in page
    agent = TeamAgent.objects.get(team=team)
    assert (agent.tools, agent.model, agent.max_iterations, agent.instructions) == (
        ["terminal", "think"], "", None, "Name the line.",
    )  # fmt: skip
    assert 'value="terminal, think"' in page  # the edit form shows the list as typed

    # Blank tools: the parent's (None), which no list means.
    edit = _agent(tools="", model="scripted", max_iterations="12")
    response = browser.post(_url("team-agent-edit", team), edit, **HX)
    assert response.status_code == 200
    agent.refresh_from_db()
    assert (agent.tools, agent.model, agent.max_iterations) == (None, "scripted", 12)

    # The service's refusal, in its words; the edit form stays open with what was typed.
    response = browser.post(_url("team-agent-edit", team), _agent(tools="teleport"), **HX)
    assert response.status_code == 400
    page = response.content.decode()
    assert "there is no tool named &#x27;teleport&#x27;" in page
    assert 'value="teleport"' in page and "<details open>" in page
    response = browser.post(_url("team-agent-create", team), _agent(), **HX)
    assert response.status_code == 409
    response = browser.post(_url("team-agent-create", team), _agent(name="general"), **HX)
    assert response.status_code == 400 and "is a built-in agent" in response.content.decode()
    response = browser.post(_url("team-agent-create", team), _agent(description=""), **HX)
    assert response.status_code == 400 and "field-error" in response.content.decode()

    response = browser.post(_url("team-agent-delete", team), {"name": "reviewer"}, **HX)
    assert response.status_code == 200
    assert not TeamAgent.objects.filter(team=team).exists()
    kinds = AuditRecord.objects.filter(team=team, kind__startswith="agent.").order_by("id")
    assert list(kinds.values_list("kind", flat=True)) == [
        "agent.created", "agent.updated", "agent.deleted",
    ]  # fmt: skip


def test_a_plain_post_redirects_to_the_page(browser, team):
    response = browser.post(_url("team-agent-create", team), _agent())
    assert response.status_code == 302 and response["Location"] == _url("team-agents", team)
    response = browser.post(_url("team-agent-delete", team), {"name": "nobody"})
    assert response.status_code == 404 and "no agent definition named" in response.content.decode()


def test_a_member_sees_agents_without_controls_and_every_write_is_refused(
    team, user, django_user_model
):
    team_agent_create(
        by=user, team=team, name="reviewer", description="Reviews a diff.",
        instructions="Name the line.",
    )  # fmt: skip
    mia = django_user_model.objects.create_user("mia", password="mia-pw-12345")
    member_add(by=user, team=team, username="mia", role=Role.MEMBER)
    client = Client()
    client.force_login(mia)
    page = client.get(_url("team-agents", team)).content.decode()
    assert 'data-agent="reviewer"' in page and "Name the line." in page
    assert 'id="agent-add"' not in page and "Delete" not in page
    for name in ("team-agent-create", "team-agent-edit", "team-agent-delete"):
        assert client.post(_url(name, team), _agent(), **HX).status_code == 403, name
    assert TeamAgent.objects.get(team=team).description == "Reviews a diff."


def test_another_team_is_not_found(browser, django_user_model):
    bob = owner_of_own_team(django_user_model, "bob")
    bobs_team = bob.memberships.get().team
    assert browser.get(_url("team-agents", bobs_team)).status_code == 404
    response = browser.post(_url("team-agent-create", bobs_team), _agent(), **HX)
    assert response.status_code == 404 and not TeamAgent.objects.exists()
