"""The invitations addressed to the caller: list, accept (join the team), decline."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Router, Status

from teams import services

from . import ERRORS
from .teams import InvitationOut, TeamOut, invitation_out

router = Router(tags=["teams"])


@router.get("", response={200: list[InvitationOut], **ERRORS})
def invitation_list(request: HttpRequest):
    return [invitation_out(i) for i in services.invitation_list_for_user(request.user)]


@router.post("/{invitation_id}/accept", response={200: TeamOut, **ERRORS})
def invitation_accept(request: HttpRequest, invitation_id: int):
    """Join the team in the invited role; answers the team with your role in it."""
    membership = services.invitation_accept(user=request.user, invitation_id=invitation_id)
    return {"id": membership.team_id, "name": membership.team.name, "role": membership.role}


@router.post("/{invitation_id}/decline", response={204: None, **ERRORS})
def invitation_decline(request: HttpRequest, invitation_id: int):
    services.invitation_decline(user=request.user, invitation_id=invitation_id)
    return Status(204, None)
