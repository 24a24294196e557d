"""Team, member, invitation and audit pages (API tokens: canvas.token_views): parse, call one service, choose a template.

A team the user is not in answers 404; a role too weak for the page answers 403. A service
refusing a write (400, 403, 409) is shown inline in the fragment that made the request, in its
words (no HTTP code on the page), and the response carries that status.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode, urlsplit

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import Resolver404, resolve, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseClientRedirect

from common.errors import InvalidInput, NotFound, ServiceError
from teams import services
from teams.audit import audit_records
from teams.models import AuditRecord, Membership, Role, Team, TeamInvitation
from teams.permissions import Action, role_allows, team_role, team_roles

from .access import http_errors
from .audit_targets import audit_targets
from .team_context import current_team_set, team_context
from .team_forms import (
    AuditFilterForm,
    MemberForm,
    MemberInviteForm,
    MemberRoleForm,
    TeamCreateForm,
    TeamSwitchForm,
)

INDEX_TEMPLATE = "canvas/team_index.html"
DETAIL_TEMPLATE = "canvas/team_detail.html"
AUDIT_TEMPLATE = "canvas/audit.html"
AUDIT_PAGE_SIZE = 100


def _team_or_error(request: HttpRequest, team_id: int, action: Action) -> Team:
    with http_errors():
        return services.team_get_for(request.user, team_id, action)


def _go(request: HttpRequest, url: str) -> HttpResponse:
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _fragment(request: HttpRequest, template: str, partial: str) -> str:
    """The partial for htmx, the whole page otherwise (a history restore wants the page)."""
    if request.htmx and not request.htmx.history_restore_request:
        return f"{template}#{partial}"
    return template


def _form_problem(form) -> InvalidInput:
    """A form's errors as the notice a service would have raised."""
    return InvalidInput(" ".join(str(e) for errors in form.errors.values() for e in errors))


# ---- Teams index, creating and switching ------------------------------------------------------


def _index_context(request: HttpRequest, **extra: Any) -> dict[str, Any]:
    ctx = team_context(request)
    default = services.team_default_for(request.user)
    roles = team_roles(request.user, [team.pk for team in ctx.teams])
    rows = [
        {
            "team": team,
            "role": roles[team.pk],
            "is_current": team == ctx.current_team,
            "is_default": team == default,
        }
        for team in ctx.teams
    ]
    return {
        "rows": rows,
        "form": TeamCreateForm(),
        "invitations": services.invitation_list_for_user(request.user),
        **extra,
    }


@login_required
@require_GET
def team_index(request: HttpRequest) -> HttpResponse:
    return render(request, INDEX_TEMPLATE, _index_context(request))


@login_required
@require_POST
def team_create(request: HttpRequest) -> HttpResponse:
    form = TeamCreateForm(request.POST)
    notice: ServiceError | None = None
    if form.is_valid():
        try:
            team = services.team_create(user=request.user, name=form.cleaned_data["name"])
        except ServiceError as exc:
            notice = exc
        else:
            messages.success(request, f"Team “{team.name}” created. You are its owner.")
            return _go(request, reverse("team-detail", args=[team.pk]))
    context = _index_context(request, form=form, notice=notice)
    status = notice.status if notice else 400
    return render(
        request, _fragment(request, INDEX_TEMPLATE, "team-create"), context, status=status
    )


@login_required
@require_POST
def team_set_default(request: HttpRequest, team_id: int) -> HttpResponse:
    team = _team_or_error(request, team_id, Action.VIEW)
    services.member_set_default(user=request.user, team=team)
    if request.htmx:
        return render(request, f"{INDEX_TEMPLATE}#team-rows", _index_context(request))
    return redirect("team-index")


def _after_switch(request: HttpRequest, next_url: str, team: Team) -> str:
    """Where to land after switching: the same team page for the new team, the list instead
    of a conversation (which belongs to the old team), else where the user was."""
    fallback = reverse("conversation-list")
    if not next_url or not url_has_allowed_host_and_scheme(
        next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return fallback
    try:
        match = resolve(urlsplit(next_url).path)
    except Resolver404:
        return fallback
    if "team_id" in match.kwargs:
        return reverse(match.view_name, kwargs={**match.kwargs, "team_id": team.pk})
    if "conversation_id" in match.kwargs:
        return fallback
    return next_url


@login_required
@require_POST
def team_switch(request: HttpRequest) -> HttpResponse:
    form = TeamSwitchForm(request.POST)
    if not form.is_valid():
        raise Http404("no such team.")
    team = _team_or_error(request, form.cleaned_data["team_id"], Action.VIEW)
    current_team_set(request, team)
    return _go(request, _after_switch(request, form.cleaned_data["next"], team))


# ---- Invitations addressed to the user -------------------------------------------------------


@login_required
@require_POST
def invitation_accept(request: HttpRequest, invitation_id: int) -> HttpResponse:
    try:
        membership = services.invitation_accept(user=request.user, invitation_id=invitation_id)
    except NotFound as exc:  # someone else's invitation looks exactly like a missing one
        raise Http404(exc.detail) from None
    except ServiceError as exc:
        messages.error(request, exc.detail)
        return _go(request, reverse("team-index"))
    team = membership.team
    messages.success(request, f"You joined “{team.name}” as {membership.get_role_display()}.")
    return _go(request, reverse("team-detail", args=[team.pk]))


@login_required
@require_POST
def invitation_decline(request: HttpRequest, invitation_id: int) -> HttpResponse:
    with http_errors():
        services.invitation_decline(user=request.user, invitation_id=invitation_id)
    messages.info(request, "Invitation declined.")
    return _go(request, reverse("team-index"))


# ---- One team's members ------------------------------------------------------------------------


def _offered_roles(role: str | None) -> list[tuple[str, str]]:
    """Roles the menus offer: owners grant any, admins only member and viewer. The services
    enforce the same rule; this only keeps impossible choices out of sight."""
    if role_allows(role, Action.OWN):
        return list(Role.choices)
    return [(r.value, r.label) for r in (Role.MEMBER, Role.VIEWER)]


def _invite_link(request: HttpRequest) -> str:
    """Where an invitee accepts: their own Teams page. Not a secret: an invitation works only
    for the name it was made for, once that person is logged in."""
    return request.build_absolute_uri(reverse("team-index"))


def _detail_context(
    request: HttpRequest,
    team: Team,
    *,
    invite_form: MemberInviteForm | None = None,
    notice: ServiceError | None = None,
    invited: TeamInvitation | None = None,
) -> dict[str, Any]:
    role = team_role(request.user, team.pk)
    can_administer = role_allows(role, Action.ADMINISTER)
    can_own = role_allows(role, Action.OWN)
    members = team.memberships.select_related("user").order_by("created_at")
    rows = [
        {
            "membership": m,
            "username": m.user.get_username(),
            "is_self": m.user_id == request.user.pk,
            "editable": can_administer and (can_own or m.role not in services.PRIVILEGED),
        }
        for m in members
    ]
    offered = _offered_roles(role)
    return {
        "team": team,
        "rows": rows,
        "role": role,
        "can_administer": can_administer,
        "offered_roles": offered,
        "invite_form": invite_form or MemberInviteForm(offered_roles=offered),
        "invitations": services.invitation_list_for_team(team) if can_administer else [],
        "can_own": can_own,
        "notice": notice,
        "invited": invited,
        "invite_link": _invite_link(request) if invited else None,
        "is_current": team == team_context(request).current_team,
        "is_default": Membership.objects.filter(
            user=request.user, team=team, is_default=True
        ).exists(),
    }


def _members(
    request: HttpRequest,
    team: Team,
    *,
    notice: ServiceError | None = None,
    invite_form: MemberInviteForm | None = None,
    status: int | None = None,
    invited: TeamInvitation | None = None,
) -> HttpResponse:
    """After a member write: the refreshed members section (htmx), or the page. A success
    without htmx redirects, so a reload does not repeat the write (a new invitation's link then
    comes as a message, shown once like the htmx answer's box)."""
    status = status or (notice.status if notice else 200)
    if status == 200 and not request.htmx:
        if invited is not None:
            messages.success(
                request, f"{invited.username} is invited. Send them this link to accept it: "
                f"{_invite_link(request)}",
            )  # fmt: skip
        return redirect("team-detail", team_id=team.pk)
    context = _detail_context(
        request, team, invite_form=invite_form, notice=notice, invited=invited
    )
    template = _fragment(request, DETAIL_TEMPLATE, "members")
    return render(request, template, context, status=status)


@login_required
@require_GET
def team_detail(request: HttpRequest, team_id: int) -> HttpResponse:
    team = _team_or_error(request, team_id, Action.VIEW)
    return render(request, DETAIL_TEMPLATE, _detail_context(request, team))


@login_required
@require_POST
def member_invite(request: HttpRequest, team_id: int) -> HttpResponse:
    """The same answer whether or not the name exists: the invitation waits for the name."""
    team = _team_or_error(request, team_id, Action.VIEW)
    form = MemberInviteForm(
        request.POST, offered_roles=_offered_roles(team_role(request.user, team_id))
    )
    if not form.is_valid():  # the form shows its own field errors
        return _members(request, team, invite_form=form, status=400)
    try:
        invitation = services.invitation_create(by=request.user, team=team, **form.cleaned_data)
    except ServiceError as exc:
        return _members(request, team, notice=exc, invite_form=form)
    return _members(request, team, invited=invitation)


@login_required
@require_POST
def invitation_cancel(request: HttpRequest, team_id: int, invitation_id: int) -> HttpResponse:
    team = _team_or_error(request, team_id, Action.VIEW)
    try:
        services.invitation_cancel(by=request.user, team=team, invitation_id=invitation_id)
    except ServiceError as exc:
        return _members(request, team, notice=exc)
    return _members(request, team)


def _member_change(request: HttpRequest, team_id: int, form_class, service) -> HttpResponse:
    """Validate the row's form, call one service, re-render the members table either way."""
    team = _team_or_error(request, team_id, Action.VIEW)
    form = form_class(request.POST)
    if not form.is_valid():
        return _members(request, team, notice=_form_problem(form))
    try:
        service(by=request.user, team=team, **form.cleaned_data)
    except ServiceError as exc:
        return _members(request, team, notice=exc)
    return _members(request, team)


@login_required
@require_POST
def member_set_role(request: HttpRequest, team_id: int) -> HttpResponse:
    return _member_change(request, team_id, MemberRoleForm, services.member_set_role)


@login_required
@require_POST
def member_remove(request: HttpRequest, team_id: int) -> HttpResponse:
    return _member_change(request, team_id, MemberForm, services.member_remove)


@login_required
@require_POST
def team_leave(request: HttpRequest, team_id: int) -> HttpResponse:
    team = _team_or_error(request, team_id, Action.VIEW)
    try:
        services.member_remove(by=request.user, team=team, username=request.user.get_username())
    except ServiceError as exc:
        return _members(request, team, notice=exc)
    messages.success(request, f"You left “{team.name}”.")
    return _go(request, reverse("team-index"))


# ---- Audit log ---------------------------------------------------------------------------------


def _distinct(records: QuerySet[AuditRecord], field: str) -> list[str]:
    return list(records.order_by(field).values_list(field, flat=True).distinct())


@login_required
@require_GET
@vary_on_headers("HX-Request")  # the same URL answers the page or, when filtering, the table
def team_audit(request: HttpRequest, team_id: int) -> HttpResponse:
    team = _team_or_error(request, team_id, Action.ADMINISTER)
    form = AuditFilterForm(request.GET)
    filters = {k: v for k, v in (form.cleaned_data if form.is_valid() else {}).items() if v}
    records = audit_records(team)
    shown = audit_records(team, actor=filters.get("actor"), kind=filters.get("kind"))
    page = Paginator(shown, AUDIT_PAGE_SIZE).get_page(request.GET.get("page"))
    targets = audit_targets(team, page.object_list)
    context = {
        "team": team,
        "form": form,
        "filters": filters,
        "filter_query": urlencode(filters),
        "page": page,
        "rows": [(record, targets[record.pk]) for record in page.object_list],
        "actors": _distinct(records, "actor_name"),
        "kinds": _distinct(records, "kind"),
    }
    return render(request, _fragment(request, AUDIT_TEMPLATE, "audit-table"), context)
