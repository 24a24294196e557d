"""Joining a team takes an invitation the invitee accepts; inviting reveals no account."""

import pytest
from django.contrib.auth import get_user_model

from teams.models import AuditRecord, Membership, TeamInvitation
from tests.api import call, client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", email="Bob@Example.com", password="x" * 12)


def _invite(client, team_id: int, username: str, role: str = "member"):
    return call(
        client, "post", f"/api/teams/{team_id}/invitations", {"username": username, "role": role}
    )


def test_inviting_answers_the_same_whether_or_not_the_name_exists(user, bob, team_id):
    alice = client_for(user)
    real_status, real = _invite(alice, team_id, "bob")
    ghost_status, ghost = _invite(alice, team_id, "nobody-by-this-name")
    assert real_status == ghost_status == 201
    assert set(real) == set(ghost)
    shape = {k: v for k, v in real.items() if k not in {"id", "username", "created_at"}}
    assert shape == {k: v for k, v in ghost.items() if k not in {"id", "username", "created_at"}}
    # The pending list and the audit log treat both alike too.
    pending = call(alice, "get", f"/api/teams/{team_id}/invitations")[1]
    assert [(p["username"], p["role"], p["invited_by"]) for p in pending] == [
        ("bob", "member", "alice"), ("nobody-by-this-name", "member", "alice"),
    ]  # fmt: skip
    invited = AuditRecord.objects.filter(team_id=team_id, kind="member.invited")
    assert sorted(invited.values_list("target", flat=True)) == ["bob", "nobody-by-this-name"]
    assert not Membership.objects.filter(user=bob).exists()  # nobody joins without consent


def test_the_invitee_sees_accepts_and_joins_in_the_invited_role(user, bob, team_id):
    alice, as_bob = client_for(user), client_for(bob)
    _, invitation = _invite(alice, team_id, "bob@example.com", "viewer")  # email, any case
    mine = call(as_bob, "get", "/api/invitations")[1]
    assert [(i["id"], i["team"], i["team_name"], i["role"]) for i in mine] == [
        (invitation["id"], team_id, "alice's team", "viewer")
    ]
    assert call(alice, "get", "/api/invitations")[1] == []  # not addressed to alice
    status, joined = call(as_bob, "post", f"/api/invitations/{invitation['id']}/accept")
    assert status == 200 and joined == {
        "id": team_id,
        "name": "alice's team",
        "role": "viewer",
        "model_titles": False,
    }
    membership = Membership.objects.get(user=bob, team_id=team_id)
    assert membership.role == "viewer" and membership.is_default  # his first team
    assert call(as_bob, "get", "/api/invitations")[1] == []
    assert call(alice, "get", f"/api/teams/{team_id}/invitations")[1] == []
    # Used up: a second accept finds nothing.
    assert call(as_bob, "post", f"/api/invitations/{invitation['id']}/accept")[0] == 404
    record = AuditRecord.objects.get(kind="member.invitation_accepted")
    assert (record.actor_name, record.target, record.data["role"]) == ("bob", "bob", "viewer")


def test_declining_leaves_the_team_unchanged_and_is_audited(user, bob, team_id):
    alice, as_bob = client_for(user), client_for(bob)
    _, invitation = _invite(alice, team_id, "bob")
    assert call(as_bob, "post", f"/api/invitations/{invitation['id']}/decline")[0] == 204
    assert not Membership.objects.filter(user=bob).exists()
    assert not TeamInvitation.objects.exists()
    assert AuditRecord.objects.filter(kind="member.invitation_declined", actor_name="bob").exists()
    assert _invite(alice, team_id, "bob")[0] == 201  # may be invited again


def test_only_the_invitee_can_accept_or_decline(user, bob, other_user, team_id):
    _, invitation = _invite(client_for(user), team_id, "bob")
    mallory = client_for(other_user)
    for verb in ("accept", "decline"):
        status, error = call(mallory, "post", f"/api/invitations/{invitation['id']}/{verb}")
        assert status == 404 and error["error"] == "not_found"
    assert call(mallory, "post", "/api/invitations/999999/accept")[0] == 404
    assert TeamInvitation.objects.filter(pk=invitation["id"]).exists()
    assert not Membership.objects.filter(user=other_user, team_id=team_id).exists()


def test_admins_list_and_cancel_and_only_owners_handle_privileged_invitations(user, bob, team_id):
    alice, as_bob = client_for(user), client_for(bob)
    _, as_admin = _invite(alice, team_id, "bob", "admin")
    call(as_bob, "post", f"/api/invitations/{as_admin['id']}/accept")
    base = f"/api/teams/{team_id}/invitations"
    status, error = _invite(as_bob, team_id, "carol", "owner")
    assert status == 403 and "owner" in error["detail"]
    _, for_dave = _invite(as_bob, team_id, "dave", "member")
    _, for_erin = _invite(alice, team_id, "erin", "admin")
    assert {i["username"] for i in call(as_bob, "get", base)[1]} == {"dave", "erin"}
    assert call(as_bob, "delete", f"{base}/{for_erin['id']}")[0] == 403  # an owner's to undo
    assert call(as_bob, "delete", f"{base}/{for_dave['id']}")[0] == 204
    assert call(as_bob, "delete", f"{base}/{for_dave['id']}")[0] == 404
    assert call(alice, "delete", f"{base}/{for_erin['id']}")[0] == 204
    assert call(alice, "get", base)[1] == []
    cancelled = AuditRecord.objects.filter(kind="member.invitation_cancelled")
    assert sorted(cancelled.values_list("actor_name", "target")) == [
        ("alice", "erin"), ("bob", "dave"),
    ]  # fmt: skip


def test_a_second_invitation_to_the_same_name_is_a_conflict(user, team_id):
    alice = client_for(user)
    assert _invite(alice, team_id, "zoe")[0] == 201
    status, error = _invite(alice, team_id, "zoe", "viewer")
    assert status == 409 and "already invited" in error["detail"]
    assert _invite(alice, team_id, "  ")[0] == 400


def test_accepting_into_a_team_you_already_joined_is_a_conflict(user, bob, team_id):
    """Invited by email and by name, bob accepts one; the other cannot add him twice."""
    alice, as_bob = client_for(user), client_for(bob)
    _, by_name = _invite(alice, team_id, "bob")
    _, by_email = _invite(alice, team_id, "bob@example.com")
    assert call(as_bob, "post", f"/api/invitations/{by_name['id']}/accept")[0] == 200
    status, error = call(as_bob, "post", f"/api/invitations/{by_email['id']}/accept")
    assert status == 409 and "already a member" in error["detail"]
    assert Membership.objects.filter(user=bob, team_id=team_id).count() == 1
    # The refused accept changed nothing: the invitation is still there to decline.
    assert call(as_bob, "post", f"/api/invitations/{by_email['id']}/decline")[0] == 204


def test_an_invitation_does_not_outlive_its_team(user, team_id):
    get_user_model().objects.create_user("bob", password="x" * 12)
    _invite(client_for(user), team_id, "bob")
    Membership.objects.get(user=user).team.delete()
    assert not TeamInvitation.objects.exists()
