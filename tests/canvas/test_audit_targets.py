"""The audit page links each record's target to its page while it still exists in the team."""

from __future__ import annotations

import re
import uuid

import pytest
from django.test import Client
from django.urls import reverse

from orchestration.services import conversation_create
from teams.audit import audit_record
from teams.models import Role
from teams.secrets import secret_create
from teams.services import member_add, member_remove, team_create

pytestmark = pytest.mark.django_db

CELL = re.compile(r'<td class="title">(.*?)</td>')


def _target_cells(user, team) -> list[str]:
    client = Client()
    client.force_login(user)
    page = client.get(reverse("team-audit", args=[team.pk])).content.decode()
    return CELL.findall(page)


def test_targets_link_to_what_still_exists(user, team, django_user_model):
    conversation = conversation_create(owner=user, team=team, prompt="audit me", model="demo")
    gone = uuid.uuid4()
    audit_record(actor=user, kind="conversation.deleted", team=team, target=str(gone))
    secret_create(by=user, team=team, name="KEPT_KEY", value="sk-kept-0123456789")
    audit_record(actor=user, kind="secret.deleted", team=team, target="GONE_KEY")
    django_user_model.objects.create_user("mia", password="mia-pw-12345")
    django_user_model.objects.create_user("ola", password="ola-pw-12345")
    member_add(by=user, team=team, username="mia", role=Role.MEMBER)
    member_add(by=user, team=team, username="ola", role=Role.MEMBER)
    member_remove(by=user, team=team, username="ola")

    cells = _target_cells(user, team)
    detail = reverse("conversation-detail", args=[conversation.pk])
    assert f'<a href="{detail}" title="{conversation.pk}">audit me</a>' in cells
    assert str(gone) in cells  # deleted: the id, as recorded, not a link
    secrets = reverse("team-secrets", args=[team.pk])
    assert f'<a href="{secrets}#secret-KEPT_KEY">KEPT_KEY</a>' in cells
    assert "GONE_KEY" in cells
    members = reverse("team-detail", args=[team.pk])
    assert cells.count(f'<a href="{members}#member-mia">mia</a>') == 1
    assert "ola" in cells and not any("#member-ola" in cell for cell in cells)


def test_another_teams_conversation_is_not_linked(user, team, django_user_model):
    bob = django_user_model.objects.create_user("bob", password="bob-pw-12345")
    bobs_team = team_create(user=bob, name="bob's team")
    theirs = conversation_create(owner=bob, team=bobs_team, prompt="not yours", model="demo")
    audit_record(actor=user, kind="conversation.archived", team=team, target=str(theirs.pk))
    assert str(theirs.pk) in _target_cells(user, team)


def test_a_team_agent_links_to_the_agents_page(user, team):
    from orchestration.subagents.team_agents import team_agent_create

    team_agent_create(by=user, team=team, name="reviewer", description="Reviews diffs.")
    audit_record(actor=user, kind="agent.deleted", team=team, target="gone-agent")
    cells = _target_cells(user, team)
    agents = reverse("team-agents", args=[team.pk])
    assert f'<a href="{agents}">reviewer</a>' in cells
    assert "gone-agent" in cells


def test_an_automation_links_to_the_automations_page(user, team):
    from automations.services import automation_create

    automation_create(by=user, team=team, name="nightly", trigger="webhook", prompt_template="p")
    audit_record(actor=user, kind="automation.deleted", team=team, target="gone-automation")
    cells = _target_cells(user, team)
    page = reverse("team-automations", args=[team.pk])
    assert f'<a href="{page}">nightly</a>' in cells
    assert "gone-automation" in cells
