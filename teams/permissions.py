"""The one permission helper: who may do what in which team.

Every page, htmx endpoint, API route and websocket asks `role_allows` (through the object
lookups in canvas.access). Not being in a team at all is indistinguishable from the object not
existing (404); being in it with too weak a role is a 403.
"""

from __future__ import annotations

from enum import StrEnum

from django.db.models import QuerySet

from common.errors import Forbidden

from .models import Membership, Role, Team


class Action(StrEnum):
    VIEW = "view"
    """Read conversations, events, automations, secret names."""
    ACT = "act"
    """Create conversations, send messages, pause, approve."""
    ADMINISTER = "administer"
    """Manage members, secrets, policies, model profiles; read the audit log."""
    OWN = "own"
    """Make or remove owners and admins."""


ALLOWED: dict[str, frozenset[Action]] = {
    Role.VIEWER: frozenset({Action.VIEW}),
    Role.MEMBER: frozenset({Action.VIEW, Action.ACT}),
    Role.ADMIN: frozenset({Action.VIEW, Action.ACT, Action.ADMINISTER}),
    Role.OWNER: frozenset(Action),
}


def role_allows(role: str | None, action: Action) -> bool:
    return role is not None and action in ALLOWED.get(role, frozenset())


def team_role(user, team_id: int) -> str | None:
    """The user's role in the team; site admins act as owners everywhere."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return None
    if user.is_superuser:
        return Role.OWNER
    return (
        Membership.objects.filter(user=user, team_id=team_id).values_list("role", flat=True).first()
    )


def require_admin(by, team: Team, *, what: str) -> None:
    """Forbidden unless `by` administers `team`; `what` is what they tried ("manage hooks")."""
    if not role_allows(team_role(by, team.pk), Action.ADMINISTER):
        raise Forbidden(f"only team admins and owners can {what}.")


def acting_user(by):
    """The person a service records as acting (created_by, audit), None for anonymous callers."""
    return by if getattr(by, "is_authenticated", False) else None


def team_roles(user, team_ids) -> dict[int, str | None]:
    """`team_role` for many teams in one query: team id -> role (None where not a member)."""
    roles: dict[int, str | None] = dict.fromkeys(team_ids)
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return roles
    if user.is_superuser:
        return dict.fromkeys(roles, Role.OWNER)
    memberships = Membership.objects.filter(user=user, team_id__in=list(roles))
    roles.update(memberships.values_list("team_id", "role"))
    return roles


async def ateam_role(user, team_id: int) -> str | None:
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return None
    if user.is_superuser:
        return Role.OWNER
    return await (
        Membership.objects.filter(user=user, team_id=team_id)
        .values_list("role", flat=True)
        .afirst()
    )


def teams_for(user) -> QuerySet[Team]:
    """Teams the user can see at all."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return Team.objects.none()
    if user.is_superuser:
        return Team.objects.all()
    return Team.objects.filter(memberships__user=user)
