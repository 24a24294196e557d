"""Teams and memberships: creating teams, adding and removing people, changing roles.

Rules: admins manage members; only owners make or unmake admins and owners; a team always
keeps at least one owner. Every change is audited in the same transaction.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Q

from common.errors import Conflict, Forbidden, InvalidInput, NotFound

from .audit import audit_record
from .models import Membership, Role, Team
from .permissions import Action, role_allows, team_role

PRIVILEGED = {Role.OWNER, Role.ADMIN}


def team_get_for(user, team_id, action: Action) -> Team:
    """The team if the user may do `action` in it: NotFound when not a member, Forbidden when
    the role is too weak."""
    try:
        pk = int(team_id)
    except (TypeError, ValueError):
        raise NotFound("no such team.") from None
    role = team_role(user, pk)
    team = Team.objects.filter(pk=pk).first() if role else None
    if team is None:
        raise NotFound("no such team.")
    if not role_allows(role, action):
        raise Forbidden(f"your role ({role}) does not allow this.")
    return team


def team_create(*, user, name: str) -> Team:
    name = (name or "").strip()
    if not name:
        raise InvalidInput("the team name must not be empty.")
    with transaction.atomic():
        try:
            with transaction.atomic():
                team = Team.objects.create(name=name[:100])
        except IntegrityError:
            raise Conflict(f"a team named {name!r} already exists.") from None
        first = not Membership.objects.filter(user=user).exists()
        Membership.objects.create(team=team, user=user, role=Role.OWNER, is_default=first)
        audit_record(actor=user, kind="team.created", team=team, target=team.name)
    return team


def team_default_for(user) -> Team | None:
    """The team a request that names none goes to: the default membership, else the only one."""
    memberships = Membership.objects.filter(user=user).select_related("team")
    chosen = memberships.filter(is_default=True).first()
    if chosen is None and memberships.count() == 1:
        chosen = memberships.first()
    return chosen.team if chosen else None


def team_ensure_personal(user) -> Team:
    """A team for a user who has none, so a first conversation never fails for lack of one."""
    existing = team_default_for(user)
    if existing is not None:
        return existing
    if Membership.objects.filter(user=user).exists():
        raise InvalidInput("you belong to several teams: name one with `team`.")
    base = f"{user.get_username()}'s team"
    name, n = base, 1
    while Team.objects.filter(name=name).exists():
        n += 1
        name = f"{base} {n}"
    return team_create(user=user, name=name)


def _user_by_name(username: str):
    User = get_user_model()
    user = User.objects.filter(Q(username=username) | Q(email__iexact=username)).first()
    if user is None or not username:
        raise InvalidInput(f"no user named {username!r}.")
    return user


def _check_role(role: str) -> str:
    if role not in Role.values:
        raise InvalidInput(f"role must be one of {', '.join(Role.values)}.")
    return role


def _require(by, team: Team, *roles: str) -> None:
    """Changing privileged memberships needs an owner."""
    need = Action.OWN if PRIVILEGED.intersection(roles) else Action.ADMINISTER
    if not role_allows(team_role(by, team.pk), need):
        raise Forbidden("only an owner can grant, change or remove owner and admin roles.")


def _owners_left(team: Team, excluding: Membership) -> int:
    """Other owners, locked: two owners demoting each other at once must not both pass."""
    others = Membership.objects.select_for_update().filter(team=team, role=Role.OWNER)
    return len(others.exclude(pk=excluding.pk).values_list("pk", flat=True))


def member_add(*, by, team: Team, username: str, role: str = Role.MEMBER) -> Membership:
    _check_role(role)
    _require(by, team, role)
    user = _user_by_name(username)
    with transaction.atomic():
        first = not Membership.objects.filter(user=user).exists()
        try:
            with transaction.atomic():  # the unique constraint decides, also under a race
                membership = Membership.objects.create(
                    team=team, user=user, role=role, is_default=first
                )
        except IntegrityError:
            raise Conflict(f"{user.get_username()} is already a member.") from None
        audit_record(
            actor=by, kind="member.added", team=team, target=user.get_username(),
            data={"role": role},
        )  # fmt: skip
    return membership


def _locked_membership(team: Team, username: str) -> Membership:
    """The member's row, locked for the rest of the caller's transaction."""
    membership = (
        Membership.objects.select_for_update().filter(team=team, user__username=username).first()
    )
    if membership is None:
        raise NotFound(f"{username} is not a member.")
    return membership


def member_set_role(*, by, team: Team, username: str, role: str) -> Membership:
    _check_role(role)
    with transaction.atomic():
        membership = _locked_membership(team, username)
        _require(by, team, role, membership.role)
        if (
            membership.role == Role.OWNER
            and role != Role.OWNER
            and not _owners_left(team, membership)
        ):
            raise Conflict("a team must keep at least one owner.")
        previous, membership.role = membership.role, role
        membership.save(update_fields=["role"])
        audit_record(
            actor=by, kind="member.role_changed", team=team, target=username,
            data={"from": previous, "to": role},
        )  # fmt: skip
    return membership


def member_remove(*, by, team: Team, username: str) -> None:
    with transaction.atomic():
        membership = _locked_membership(team, username)
        if membership.user_id != getattr(by, "pk", None):
            _require(by, team, membership.role)
        if membership.role == Role.OWNER and not _owners_left(team, membership):
            raise Conflict("a team must keep at least one owner.")
        membership.delete()
        audit_record(
            actor=by, kind="member.removed", team=team, target=username,
            data={"role": membership.role},
        )  # fmt: skip


def member_set_default(*, user, team: Team) -> None:
    with transaction.atomic():
        Membership.objects.filter(user=user).update(is_default=False)
        Membership.objects.filter(user=user, team=team).update(is_default=True)
