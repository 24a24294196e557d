"""A team's skills through the API and the page: members read, admins write, all audited."""

from __future__ import annotations

import pytest
from django.test import Client

from skills.models import TeamSkill
from teams.models import AuditRecord
from teams.services import member_add

pytestmark = pytest.mark.django_db

SKILL = {"name": "deploy", "description": "How we deploy.", "body": "make deploy",
         "triggers": ["deploy"]}  # fmt: skip


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_admins_create_change_and_delete_skills(user, team):
    client = _client(user)
    base = f"/api/teams/{team.pk}/skills"
    made = client.post(base, SKILL, content_type="application/json")
    assert made.status_code == 201, made.content
    assert made.json()["triggers"] == ["deploy"]
    again = client.post(base, SKILL, content_type="application/json")
    assert again.status_code == 409
    bad = client.post(base, {**SKILL, "name": "Deploy Now"}, content_type="application/json")
    assert bad.status_code == 400 and "lowercase" in bad.json()["detail"]
    changed = client.patch(f"{base}/deploy", {"body": "make deploy ENV=staging"},
                           content_type="application/json")  # fmt: skip
    assert changed.status_code == 200 and changed.json()["description"] == "How we deploy."
    assert client.get(base).json()[0]["body"] == "make deploy ENV=staging"
    assert client.delete(f"{base}/deploy").status_code == 204
    assert client.get(f"{base}/deploy").status_code == 404
    kinds = list(AuditRecord.objects.filter(kind__startswith="skill.").values_list("kind",
                                                                                 flat=True))  # fmt: skip
    assert sorted(kinds) == ["skill.created", "skill.deleted", "skill.updated"]


def test_members_read_but_cannot_write(user, team, django_user_model):
    _client(user).post(f"/api/teams/{team.pk}/skills", SKILL, content_type="application/json")
    member = django_user_model.objects.create_user("mia", password="mia-password-1")
    member_add(by=user, team=team, username="mia", role="member")
    client = _client(member)
    assert [s["name"] for s in client.get(f"/api/teams/{team.pk}/skills").json()] == ["deploy"]
    refused = client.delete(f"/api/teams/{team.pk}/skills/deploy")
    assert refused.status_code == 403
    page = client.get(f"/teams/{team.pk}/skills/").content.decode()
    assert "deploy" in page and "Only team admins" in page
    assert TeamSkill.objects.count() == 1


def test_the_page_adds_a_skill_and_shows_a_refusal_inline(user, team):
    client = _client(user)
    added = client.post(f"/teams/{team.pk}/skills/new",
                        {"name": "review", "description": "How we review.", "body": "tests first",
                         "triggers": "review, code review"}, headers={"HX-Request": "true"})  # fmt: skip
    assert added.status_code == 200
    assert TeamSkill.objects.get().triggers == ["review", "code review"]
    refused = client.post(f"/teams/{team.pk}/skills/new",
                          {"name": "review", "description": "x", "body": "y"},
                          headers={"HX-Request": "true"})  # fmt: skip
    assert refused.status_code == 409 and "already has a skill" in refused.content.decode()
    assert TeamSkill.objects.count() == 1
