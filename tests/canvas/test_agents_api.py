"""/api/teams/{id}/agents: every member lists and reads the team's agent definitions, admins
write them; refusals are JSON with the service's words and the status that fits."""

from __future__ import annotations

import pytest

from teams.models import AuditRecord, Role, TeamAgent
from teams.services import member_add
from tests.api import call, client_for
from tests.conftest import owner_of_own_team

pytestmark = pytest.mark.django_db

REVIEWER = {
    "name": "reviewer", "description": "Reviews a diff and reports problems.",
    "tools": ["terminal", "think"], "model": "scripted", "max_iterations": 20,
    "instructions": "Name the file and line of each problem.",
}  # fmt: skip


def _url(team, name: str = "") -> str:
    return f"/api/teams/{team.pk}/agents" + (f"/{name}" if name else "")


def test_admin_round_trip(api, team):
    status, body = call(api, "get", _url(team))
    assert (status, body) == (200, [])

    status, body = call(api, "post", _url(team), REVIEWER)
    assert status == 201, body
    assert {k: body[k] for k in REVIEWER} == REVIEWER
    assert body["created_at"] and body["updated_at"]

    status, body = call(api, "get", _url(team, "reviewer"))
    assert status == 200 and body["tools"] == ["terminal", "think"]
    assert [a["name"] for a in call(api, "get", _url(team))[1]] == ["reviewer"]

    # PUT replaces every field: left out, tools and model go back to the parent's.
    status, body = call(api, "put", _url(team, "reviewer"), {"description": "Reviews."})
    assert status == 200, body
    assert (body["description"], body["tools"], body["model"], body["max_iterations"]) == (
        "Reviews.", None, "", None,
    )  # fmt: skip

    status, body = call(api, "delete", _url(team, "reviewer"))
    assert (status, body) == (204, None)
    assert call(api, "get", _url(team, "reviewer"))[0] == 404
    kinds = AuditRecord.objects.filter(team=team, kind__startswith="agent.").order_by("id")
    assert list(kinds.values_list("kind", flat=True)) == [
        "agent.created", "agent.updated", "agent.deleted",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({**REVIEWER, "name": "general"}, "'general' is a built-in agent"),
        ({**REVIEWER, "name": "Has Spaces"}, "an agent name is 1 to 64 lowercase letters"),
        ({**REVIEWER, "tools": ["teleport"]}, "there is no tool named 'teleport'"),
        ({**REVIEWER, "model": "nope"}, "there is no model profile named 'nope'"),
        ({**REVIEWER, "description": " "}, "description must not be empty"),
    ],
)
def test_bad_values_are_a_400_in_the_services_words(api, team, body, says):
    status, answer = call(api, "post", _url(team), body)
    assert status == 400, answer
    assert answer["error"] == "invalid_input" and says in answer["detail"]
    assert not TeamAgent.objects.exists()


def test_schema_refusals_name_the_field(api, team):
    status, answer = call(api, "post", _url(team), {**REVIEWER, "max_iterations": 0})
    assert status == 400 and answer["detail"][0]["field"] == "max_iterations"
    status, answer = call(api, "post", _url(team), {"name": "x"})
    assert status == 400 and answer["detail"][0]["field"] == "description"


def test_a_duplicate_is_a_409_and_a_missing_one_a_404(api, team):
    assert call(api, "post", _url(team), REVIEWER)[0] == 201
    status, answer = call(api, "post", _url(team), REVIEWER)
    assert (status, answer["error"]) == (409, "conflict")
    for method, body in (("get", None), ("put", {"description": "x"}), ("delete", None)):
        status, answer = call(api, method, _url(team, "nobody"), body)
        assert (status, answer["error"]) == (404, "not_found"), method


def test_members_read_and_only_admins_write(api, user, team, django_user_model):
    call(api, "post", _url(team), REVIEWER)
    for role in (Role.MEMBER, Role.VIEWER):
        person = django_user_model.objects.create_user(f"p-{role}", password="pw-12345678")
        member_add(by=user, team=team, username=person.username, role=role)
        client = client_for(person)
        assert call(client, "get", _url(team))[1][0]["name"] == "reviewer"
        assert call(client, "get", _url(team, "reviewer"))[0] == 200
        assert call(client, "post", _url(team), {**REVIEWER, "name": "mine"})[0] == 403
        assert call(client, "put", _url(team, "reviewer"), {"description": "x"})[0] == 403
        assert call(client, "delete", _url(team, "reviewer"))[0] == 403
    assert TeamAgent.objects.get().description == REVIEWER["description"]


def test_another_team_is_not_found(api, team, django_user_model):
    bob = owner_of_own_team(django_user_model, "bob")
    bobs_team = bob.memberships.get().team
    call(client_for(bob), "post", _url(bobs_team), REVIEWER)
    for method, body in (
        ("get", None), ("post", REVIEWER), ("put", {"description": "x"}), ("delete", None),
    ):  # fmt: skip
        url = _url(bobs_team, "" if method == "post" else "reviewer")
        status, answer = call(api, method, url, body)
        assert (status, answer["error"]) == (404, "not_found"), method
    assert TeamAgent.objects.get(team=bobs_team).description == REVIEWER["description"]
