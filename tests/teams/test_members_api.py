"""Teams and members over the API: roles, the last-owner rule, audit, 404 across teams.
People join by invitation only (tests/teams/test_invitations_api.py covers invitations)."""

import pytest
from django.contrib.auth import get_user_model

from teams.models import AuditRecord, Membership
from tests.api import call, client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", email="bob@example.com", password="x" * 12)


def test_create_team_makes_the_creator_owner_and_lists_it(user):
    alice = client_for(user)
    status, team = call(alice, "post", "/api/teams", {"name": "Platform"})
    assert status == 201 and team["name"] == "Platform" and team["role"] == "owner"
    names = {t["name"]: t["role"] for t in call(alice, "get", "/api/teams")[1]}
    assert names == {"alice's team": "owner", "Platform": "owner"}
    status, error = call(alice, "post", "/api/teams", {"name": "Platform"})
    assert status == 409 and error["error"] == "conflict"


def join(team_id: int, person, username: str, role: str = "member", *, by) -> None:
    """Invite `username` as `by`, then accept as `person`: the only way into a team."""
    status, invitation = call(
        by, "post", f"/api/teams/{team_id}/invitations", {"username": username, "role": role}
    )
    assert status == 201, invitation
    status, joined = call(person, "post", f"/api/invitations/{invitation['id']}/accept")
    assert status == 200 and joined == {
        "id": team_id,
        "name": joined["name"],
        "role": role,
        "model_titles": False,
    }


def test_owner_invites_by_username_or_email_changes_roles_and_removes(user, bob, team_id):
    alice, as_bob = client_for(user), client_for(bob)
    base = f"/api/teams/{team_id}/members"
    join(team_id, as_bob, "bob@example.com", "viewer", by=alice)
    assert {m["username"]: m["role"] for m in call(alice, "get", base)[1]}["bob"] == "viewer"
    invite = f"/api/teams/{team_id}/invitations"
    status, error = call(alice, "post", invite, {"username": "bob"})
    assert status == 409 and "already a member" in error["detail"]
    assert call(alice, "post", invite, {"username": "bob", "role": "emperor"})[0] == 400
    assert call(alice, "patch", f"{base}/bob", {"role": "admin"})[1]["role"] == "admin"
    assert call(alice, "delete", f"{base}/bob")[0] == 204
    assert [m["username"] for m in call(alice, "get", base)[1]] == ["alice"]
    kinds = list(
        AuditRecord.objects.filter(team_id=team_id).order_by("id").values_list("kind", flat=True)
    )
    assert kinds == [
        "team.created", "member.invited", "member.invitation_accepted", "member.role_changed",
        "member.removed",
    ]  # fmt: skip
    audit = call(alice, "get", f"/api/teams/{team_id}/audit?kind=member.")[1]
    assert {a["actor"] for a in audit} == {"alice", "bob"}  # bob accepted himself


def test_the_members_route_no_longer_adds_anyone(user, bob, team_id):
    alice = client_for(user)
    response = alice.post(
        f"/api/teams/{team_id}/members", {"username": "bob"}, content_type="application/json"
    )
    assert response.status_code == 405
    assert not Membership.objects.filter(user=bob).exists()


def test_admins_manage_members_but_only_owners_grant_privilege(user, bob, team_id):
    carol = get_user_model().objects.create_user("carol", password="x" * 12)
    alice, as_bob, as_carol = client_for(user), client_for(bob), client_for(carol)
    base = f"/api/teams/{team_id}/members"
    invite = f"/api/teams/{team_id}/invitations"
    join(team_id, as_bob, "bob", "admin", by=alice)
    status, error = call(as_bob, "post", invite, {"username": "carol", "role": "admin"})
    assert status == 403 and "owner" in error["detail"]
    join(team_id, as_carol, "carol", "member", by=as_bob)
    status, error = call(as_bob, "patch", f"{base}/carol", {"role": "owner"})
    assert status == 403 and "owner" in error["detail"]
    assert call(as_bob, "delete", f"{base}/alice")[0] == 403
    assert call(as_bob, "get", f"/api/teams/{team_id}/audit")[0] == 200
    assert call(as_carol, "get", base)[0] == 200
    assert call(as_carol, "post", invite, {"username": "mallory"})[0] == 403
    assert call(as_carol, "get", invite)[0] == 403
    assert call(as_carol, "get", f"/api/teams/{team_id}/audit")[0] == 403


def test_a_team_keeps_at_least_one_owner(user, team_id):
    alice = client_for(user)
    status, error = call(alice, "delete", f"/api/teams/{team_id}/members/alice")
    assert status == 409 and "owner" in error["detail"]
    status, _ = call(alice, "patch", f"/api/teams/{team_id}/members/alice", {"role": "member"})
    assert status == 409
    assert Membership.objects.get(user=user).role == "owner"


def test_members_of_another_team_get_404_and_change_nothing(user, other_user, team_id):
    mallory = client_for(other_user)
    base = f"/api/teams/{team_id}"
    assert call(mallory, "get", f"{base}/members")[0] == 404
    assert call(mallory, "get", f"{base}/audit")[0] == 404
    assert call(mallory, "post", f"{base}/invitations", {"username": "mallory"})[0] == 404
    assert call(mallory, "get", f"{base}/invitations")[0] == 404
    assert call(mallory, "delete", f"{base}/members/alice")[0] == 404
    assert Membership.objects.filter(team_id=team_id).count() == 1


def test_conversations_go_to_the_named_or_default_team(user, other_user, team_id, dispatched):
    alice = client_for(user)
    status, conversation = call(alice, "post", "/api/conversations", {"prompt": "hi"})
    assert status == 201 and conversation["team"] == team_id
    foreign = Membership.objects.get(user=other_user).team_id
    status, error = call(alice, "post", "/api/conversations", {"prompt": "hi", "team": foreign})
    assert status == 404
    listed = call(alice, "get", f"/api/conversations?team={team_id}")[1]
    assert [c["id"] for c in listed] == [conversation["id"]]


def test_viewers_read_but_cannot_write(user, bob, team_id, dispatched):
    alice = client_for(user)
    _, conversation = call(alice, "post", "/api/conversations", {"prompt": "hi"})
    as_bob = client_for(bob)
    join(team_id, as_bob, "bob", "viewer", by=alice)
    url = f"/api/conversations/{conversation['id']}"
    assert call(as_bob, "get", url)[0] == 200
    assert call(as_bob, "get", f"{url}/events")[0] == 200
    for action, body in (("messages", {"text": "x"}), ("pause", {}), ("run", {})):
        status, error = call(as_bob, "post", f"{url}/{action}", body)
        assert status == 403 and error["error"] == "forbidden"
    status, _ = call(as_bob, "post", "/api/conversations", {"prompt": "x", "team": team_id})
    assert status == 403
