"""Teams and memberships: creating teams, inviting and removing people, changing roles.

Rules: admins manage members; only owners make or unmake admins and owners; a team always
keeps at least one owner; nobody joins a team without accepting an invitation. Every change
is audited in the same transaction.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Q

from common.errors import Conflict, Forbidden, InvalidInput, NotFound

from .audit import audit_record
from .models import Membership, Role, Team, TeamInvitation
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


def team_settings_update(*, by, team: Team, model_titles: bool) -> Team:
    """The team's own settings (admins and owners): whether new conversations get a title
    from their model. Audited with what changed."""
    if not role_allows(team_role(by, team.pk), Action.ADMINISTER):
        raise Forbidden("only the team's admins and owners change its settings.")
    with transaction.atomic():
        row = Team.objects.select_for_update().get(pk=team.pk)
        if row.model_titles != model_titles:
            row.model_titles = model_titles
            row.save(update_fields=["model_titles"])
            audit_record(
                actor=by, kind="team.settings_changed", team=row, target=row.name,
                data={"model_titles": model_titles},
            )  # fmt: skip
    return row


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


def _join(*, team: Team, user, role: str) -> Membership:
    """Create the membership; the unique constraint decides, also under a race."""
    first = not Membership.objects.filter(user=user).exists()
    try:
        with transaction.atomic():
            return Membership.objects.create(team=team, user=user, role=role, is_default=first)
    except IntegrityError:
        raise Conflict(f"{user.get_username()} is already a member.") from None


def member_add(*, by, team: Team, username: str, role: str = Role.MEMBER) -> Membership:
    """Add a person at once, without their consent, and saying whether the name exists: for
    site administrators and test setup only. The API and the pages invite (invitation_create)."""
    _check_role(role)
    _require(by, team, role)
    user = _user_by_name(username)
    with transaction.atomic():
        membership = _join(team=team, user=user, role=role)
        audit_record(
            actor=by, kind="member.added", team=team, target=user.get_username(),
            data={"role": role},
        )  # fmt: skip
    return membership


# ---- Invitations -------------------------------------------------------------------------------


def _addressed_to(user) -> Q:
    """Invitations naming the user by username, or by email (any case) when they have one."""
    match = Q(username=user.get_username())
    if getattr(user, "email", ""):
        match |= Q(username__iexact=user.email)
    return match


def invitation_list_for_user(user) -> list[TeamInvitation]:
    """The user's pending invitations, oldest first."""
    return list(
        TeamInvitation.objects.filter(_addressed_to(user)).select_related("team", "invited_by")
    )


def invitation_list_for_team(team: Team) -> list[TeamInvitation]:
    """A team's pending invitations; the caller has checked that its user administers it."""
    return list(team.invitations.select_related("invited_by"))


def invitation_create(*, by, team: Team, username: str, role: str = Role.MEMBER) -> TeamInvitation:
    """Invite a username or email in a role. The answer is the same whether or not anyone has
    that name (the invitation waits for the name), so inviting cannot probe for accounts.
    Inviting an existing member, or a name already invited, is a 409: both are visible to an
    admin anyway."""
    _check_role(role)
    _require(by, team, role)
    username = (username or "").strip()
    if not username:
        raise InvalidInput("name a username or email to invite.")
    with transaction.atomic():
        members = Membership.objects.filter(team=team)
        if members.filter(Q(user__username=username) | Q(user__email__iexact=username)).exists():
            raise Conflict(f"{username} is already a member.")
        try:
            with transaction.atomic():
                invitation = TeamInvitation.objects.create(
                    team=team, username=username, role=role, invited_by=by
                )
        except IntegrityError:
            raise Conflict(f"{username} is already invited.") from None
        audit_record(
            actor=by, kind="member.invited", team=team, target=username, data={"role": role}
        )
    return invitation


def _locked_invitation_for(user, invitation_id) -> TeamInvitation:
    """The user's own invitation, locked; anyone else's looks exactly like a missing one."""
    invitation = (
        TeamInvitation.objects.select_for_update(of=("self",))
        .filter(_addressed_to(user), pk=invitation_id)
        .select_related("team")
        .first()
    )
    if invitation is None:
        raise NotFound("no such invitation.")
    return invitation


def invitation_accept(*, user, invitation_id: int) -> Membership:
    """Join the team in the invited role; the invitation is used up."""
    with transaction.atomic():
        invitation = _locked_invitation_for(user, invitation_id)
        team, role = invitation.team, invitation.role
        invitation.delete()
        membership = _join(team=team, user=user, role=role)
        audit_record(
            actor=user, kind="member.invitation_accepted", team=team,
            target=user.get_username(), data={"role": role, "invited_as": invitation.username},
        )  # fmt: skip
    return membership


def invitation_decline(*, user, invitation_id: int) -> None:
    with transaction.atomic():
        invitation = _locked_invitation_for(user, invitation_id)
        invitation.delete()
        audit_record(
            actor=user, kind="member.invitation_declined", team=invitation.team,
            target=user.get_username(), data={"role": invitation.role},
        )  # fmt: skip


def invitation_cancel(*, by, team: Team, invitation_id) -> None:
    """Withdraw a pending invitation. Admins may cancel those in member and viewer roles;
    owner and admin invitations need an owner, as granting those roles does."""
    with transaction.atomic():
        invitation = (
            TeamInvitation.objects.select_for_update().filter(team=team, pk=invitation_id).first()
        )
        if invitation is None:
            raise NotFound("no such invitation.")
        _require(by, team, invitation.role)
        invitation.delete()
        audit_record(
            actor=by, kind="member.invitation_cancelled", team=team,
            target=invitation.username, data={"role": invitation.role},
        )  # fmt: skip


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
