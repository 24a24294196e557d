"""What the team settings pages (members, secrets, policy, model profiles, hooks) share: finding
the team for a role, and answering a write with the section it changed.

A team the user is not in answers 404 and a role too weak 403 (canvas.access.http_errors). A
write refused by its service re-renders the section that made it, with the service's words and
status; a success re-renders the section for htmx and redirects a plain post, so a reload never
repeats the write.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from common.errors import ServiceError
from teams.models import Team
from teams.permissions import Action, role_allows, team_role
from teams.services import team_get_for

from .access import http_errors

T = TypeVar("T")


def settings_team(request: HttpRequest, team_id: int, action: Action) -> Team:
    """The team if the user may do `action` in it; Http404 / PermissionDenied otherwise."""
    with http_errors():
        return team_get_for(request.user, team_id, action)


def administers(request: HttpRequest, team: Team) -> bool:
    """Whether the page shows its write controls (the services check again on every write)."""
    return role_allows(team_role(request.user, team.pk), Action.ADMINISTER)


def posted_name(request: HttpRequest) -> str:
    """The `name` a row's button posts (a secret's, a profile's): the services look it up in
    the URL's team and say when there is none."""
    return request.POST.get("name", "")[:200]


def section_response(
    request: HttpRequest,
    *,
    template: str,
    partial: str,
    page: str,
    team: Team,
    context: Callable[[], dict[str, Any]],
    status: int = 200,
    shows_once: bool = False,
) -> HttpResponse:
    """After a write: `template#partial` for htmx; without htmx a success redirects to the page
    named `page` and anything else renders the whole page. `shows_once`: the answer holds
    something shown only this once (a signing secret), so even a success renders instead."""
    if status == 200 and not request.htmx and not shows_once:
        return redirect(page, team_id=team.pk)
    chosen = f"{template}#{partial}" if request.htmx else template
    return render(request, chosen, context(), status=status)


def edit_rows(
    items: Iterable[T],
    *,
    key: Callable[[T], Hashable],
    row_id: Callable[[T, int], str],
    form_for: Callable[[T, int], Any],
    edited: tuple[Hashable, Any] | None = None,
) -> list[dict[str, Any]]:
    """A table's rows, each with its item, its element id and its folded edit form (numbered
    from 1: every form is on the page at once, so ids must differ). The item whose edit was
    just refused gets that form back, open, with what was typed and its errors."""
    rows = []
    for index, item in enumerate(items, start=1):
        is_edited = edited is not None and edited[0] == key(item)
        form = edited[1] if edited is not None and is_edited else form_for(item, index)
        rows.append({"item": item, "id": row_id(item, index), "form": form, "open": is_edited})
    return rows


@dataclass(frozen=True, slots=True)
class SettingsPage:
    """One settings page: its template, its url name, how it builds its context from the
    request, the team and what a write adds (a refused form, a notice), and who may see it."""

    template: str
    page: str
    context: Callable[..., dict[str, Any]]
    title: str
    """The page's heading (canvas/team_settings_page.html)."""
    shown_to: Action = Action.VIEW

    def _context(self, request: HttpRequest, team: Team, **extra: Any) -> dict[str, Any]:
        context = self.context(request, team, **extra)
        return {**context, "page_title": self.title, "settings_page": self.page}

    def team(self, request: HttpRequest, team_id: int, action: Action | None = None) -> Team:
        """The page's team for `action` (default: seeing the page)."""
        return settings_team(request, team_id, action or self.shown_to)

    def view(self) -> Callable[..., HttpResponse]:
        """The page's GET view: the whole page."""

        @login_required
        @require_GET
        def show(request: HttpRequest, team_id: int) -> HttpResponse:
            team = self.team(request, team_id)
            return render(request, self.template, self._context(request, team))

        return show

    def answer(
        self, request: HttpRequest, team: Team, partial: str, *, status: int = 200,
        shows_once: bool = False, **extra: Any,
    ) -> HttpResponse:  # fmt: skip
        """The answer to a write that changed `partial` (see `section_response`)."""
        return section_response(
            request, template=self.template, partial=partial, page=self.page, team=team,
            context=lambda: self._context(request, team, **extra), status=status,
            shows_once=shows_once,
        )  # fmt: skip

    def write(
        self, request: HttpRequest, team: Team, partial: str, service: Callable[[], object],
        /, *, notice_as: str = "notice", done: dict[str, Any] | None = None, **refused: Any,
    ) -> HttpResponse:  # fmt: skip
        """Call `service` (one write); answer with `partial` (plus `done`), or, when the service
        refuses, with its status and words (as `notice_as`, the section's notice) plus the
        `refused` context (the form as typed)."""
        try:
            service()
        except ServiceError as exc:
            refused[notice_as] = exc
            return self.answer(request, team, partial, status=exc.status, **refused)
        return self.answer(request, team, partial, **(done or {}))

    def submit(
        self, request: HttpRequest, team: Team, partial: str, posted: forms.Form,
        service: Callable[..., object], /, **options: Any,
    ) -> HttpResponse:  # fmt: skip
        """`write` for a posted form: one that does not hold answers 400 with its own
        errors; one that does calls `service(**form.cleaned_data)`. `options` as for `write`,
        the refused context included (it should hold the form)."""
        if not posted.is_valid():
            refused = {k: v for k, v in options.items() if k not in ("notice_as", "done")}
            return self.answer(request, team, partial, status=400, **refused)
        data = posted.cleaned_data
        return self.write(request, team, partial, lambda: service(**data), **options)
