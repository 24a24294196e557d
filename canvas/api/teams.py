"""Teams, members, invitations and the audit log."""

from __future__ import annotations

from datetime import datetime

from django.http import HttpRequest
from ninja import Router, Schema, Status
from pydantic import Field

from common.inputs import Key, Offset, Text
from teams import services
from teams.audit import audit_records
from teams.models import Membership, Team, TeamInvitation
from teams.permissions import Action, team_role, teams_for

from . import ERRORS

router = Router(tags=["teams"])
AUDIT_PAGE = 500


class TeamIn(Schema):
    name: Text(100, min_length=1)


class TeamOut(Schema):
    id: int
    name: str
    role: str | None = None
    model_titles: bool = Field(
        default=False, description="New conversations get a short title from their model."
    )


class TeamSettingsIn(Schema):
    model_titles: bool


class InvitationIn(Schema):
    username: Text(254, min_length=1) = Field(description="Username or email.")
    role: Text(20) = Field(default="member", description="owner, admin, member or viewer")


class InvitationOut(Schema):
    id: int
    team: int
    team_name: str
    username: str = Field(description="The name or email invited, as typed.")
    role: str
    invited_by: str | None
    created_at: datetime


class RoleIn(Schema):
    role: Text(20)


class MemberOut(Schema):
    username: str
    role: str
    joined_at: datetime


class AuditOut(Schema):
    id: int
    created_at: datetime
    actor: str
    kind: str
    target: str
    data: dict


def _member(m: Membership) -> dict:
    return {"username": m.user.get_username(), "role": m.role, "joined_at": m.created_at}


def invitation_out(i: TeamInvitation) -> dict:
    return {
        "id": i.pk,
        "team": i.team_id,
        "team_name": i.team.name,
        "username": i.username,
        "role": i.role,
        "invited_by": i.invited_by.get_username() if i.invited_by else None,
        "created_at": i.created_at,
    }


@router.post("", response={201: TeamOut, **ERRORS})
def team_create(request: HttpRequest, body: TeamIn):
    team = services.team_create(user=request.user, name=body.name)
    return Status(201, _team(team, "owner"))


def _team(team: Team, role: str | None) -> dict:
    return {"id": team.pk, "name": team.name, "role": role, "model_titles": team.model_titles}


@router.get("", response={200: list[TeamOut], **ERRORS})
def team_list(request: HttpRequest):
    return [_team(t, team_role(request.user, t.pk)) for t in teams_for(request.user)]


@router.get("/{team_id}", response={200: TeamOut, **ERRORS})
def team_get(request: HttpRequest, team_id: int):
    team = services.team_get_for(request.user, team_id, Action.VIEW)
    return _team(team, team_role(request.user, team.pk))


@router.patch("/{team_id}", response={200: TeamOut, **ERRORS})
def team_settings_update(request: HttpRequest, team_id: int, body: TeamSettingsIn):
    """The team's settings (admins and owners; audited)."""
    team = services.team_get_for(request.user, team_id, Action.ADMINISTER)
    team = services.team_settings_update(by=request.user, team=team, **body.model_dump())
    return _team(team, team_role(request.user, team.pk))


@router.get("/{team_id}/members", response={200: list[MemberOut], **ERRORS})
def member_list(request: HttpRequest, team_id: int):
    team = services.team_get_for(request.user, team_id, Action.VIEW)
    return [_member(m) for m in team.memberships.select_related("user").order_by("created_at")]


@router.get("/{team_id}/invitations", response={200: list[InvitationOut], **ERRORS})
def invitation_list(request: HttpRequest, team_id: int):
    team = services.team_get_for(request.user, team_id, Action.ADMINISTER)
    return [invitation_out(i) for i in services.invitation_list_for_team(team)]


@router.post("/{team_id}/invitations", response={201: InvitationOut, **ERRORS})
def invitation_create(request: HttpRequest, team_id: int, body: InvitationIn):
    """People join by accepting (POST /api/invitations/{id}/accept). The answer is the same
    whether or not anyone has the name."""
    team = services.team_get_for(request.user, team_id, Action.ADMINISTER)
    invitation = services.invitation_create(
        by=request.user, team=team, username=body.username, role=body.role
    )
    return Status(201, invitation_out(invitation))


@router.delete("/{team_id}/invitations/{invitation_id}", response={204: None, **ERRORS})
def invitation_cancel(request: HttpRequest, team_id: int, invitation_id: int):
    team = services.team_get_for(request.user, team_id, Action.ADMINISTER)
    services.invitation_cancel(by=request.user, team=team, invitation_id=invitation_id)
    return Status(204, None)


@router.patch("/{team_id}/members/{username}", response={200: MemberOut, **ERRORS})
def member_set_role(request: HttpRequest, team_id: int, username: Key, body: RoleIn):
    team = services.team_get_for(request.user, team_id, Action.ADMINISTER)
    membership = services.member_set_role(
        by=request.user, team=team, username=username, role=body.role
    )
    return _member(membership)


@router.delete("/{team_id}/members/{username}", response={204: None, **ERRORS})
def member_remove(request: HttpRequest, team_id: int, username: Key):
    # Anyone may leave a team; removing someone else needs admin rights (checked inside).
    action = Action.VIEW if username == request.user.get_username() else Action.ADMINISTER
    team = services.team_get_for(request.user, team_id, action)
    services.member_remove(by=request.user, team=team, username=username)
    return Status(204, None)


@router.get("/{team_id}/audit", response={200: list[AuditOut], **ERRORS})
def audit_list(
    request: HttpRequest,
    team_id: int,
    actor: Key | None = None,
    kind: Key | None = None,
    limit: int = 100,
    offset: Offset = 0,
):
    team = services.team_get_for(request.user, team_id, Action.ADMINISTER)
    rows = audit_records(team, actor=actor, kind=kind, kind_prefix=True)
    limit = max(1, min(limit, AUDIT_PAGE))
    return [
        {
            "id": r.pk,
            "created_at": r.created_at,
            "actor": r.actor_name,
            "kind": r.kind,
            "target": r.target,
            "data": r.data,
        }  # fmt: skip
        for r in rows[offset : offset + limit]
    ]
