"""The team's Automations page: its webhook and schedule automations, each with its webhook URL
and its last run. Every member sees them (as /api/teams/{id}/automations shows them); admins and
owners add, change, enable, delete them and rotate a webhook secret through
automations.services, which checks the role again and audits each write.

The webhook secret is rendered straight into the one answer that made it (creation or a
rotation), never cached, and never readable again: like the notification signing secret on the
Hooks page. A refused write comes back inline with the service's words and status.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from automations import selectors, services
from automations.fields import FIELDS
from automations.models import Automation
from common.errors import InvalidInput, ServiceError
from teams.models import Team
from teams.permissions import Action

from .automation_forms import AutomationForm, Menus, edit_initial
from .settings_pages import SettingsPage, administers, edit_rows, settings_team

TEMPLATE = "canvas/team_automations.html"


def webhook_url(request: HttpRequest, automation: Automation) -> str:
    return request.build_absolute_uri(reverse("automation-webhook", args=[automation.pk]))


def _form_id(automation_id: int) -> str:
    # Every row's form is on the page at once: ids must differ, names stay plain.
    return f"id_automation{automation_id}_%s"


def _edit_form(automation: Automation, menus: Menus) -> AutomationForm:
    return AutomationForm(
        initial=edit_initial(automation), menus=menus, current=automation,
        auto_id=_form_id(automation.pk),
    )  # fmt: skip


def _service_fields(data: dict[str, Any], *, edit: bool = False) -> dict[str, Any]:
    """The form's values the service takes. An edit form starts with the budget filled in,
    so a blank one there was emptied: "" removes it (None would keep it)."""
    fields = {key: value for key, value in data.items() if key in FIELDS}
    if edit and fields.get("max_cost_usd") is None:
        fields["max_cost_usd"] = ""
    return fields


def _context(
    request: HttpRequest, team: Team, *, add_form: AutomationForm | None = None,
    edited: tuple[int, AutomationForm] | None = None, notice: ServiceError | None = None,
    new_secret: services.WithSecret | None = None,
) -> dict[str, Any]:  # fmt: skip
    automations = list(selectors.automation_list(team=team))
    can_administer = administers(request, team)
    menus = Menus.of(team) if can_administer else None
    rows = edit_rows(
        automations, key=lambda automation: automation.pk, edited=edited,
        row_id=lambda automation, _: f"automation-{automation.pk}",
        form_for=lambda automation, _: _edit_form(automation, menus) if menus else None,
    )  # fmt: skip
    last = selectors.last_runs(automations=automations)
    for row in rows:
        row["webhook_url"] = webhook_url(request, row["item"])
        row["last_run"] = last.get(row["item"].pk)
    shown = None
    if new_secret is not None:
        automation = new_secret.automation
        shown = {"name": automation.name, "secret": new_secret.secret,
                 "url": webhook_url(request, automation)}  # fmt: skip
    return {
        "team": team,
        "rows": rows,
        "can_administer": can_administer,
        "add_form": add_form or (AutomationForm(menus=menus) if menus else None),
        "notice": notice,
        "new_secret": shown,
    }


PAGE = SettingsPage(TEMPLATE, "team-automations", _context, "Automations")

team_automations = PAGE.view()


def _shows_secret(
    request: HttpRequest, team: Team, make: Callable[[], services.WithSecret], **refused: Any
) -> HttpResponse:
    """The answer to a write that made a webhook secret: the section with the secret in it,
    even without htmx (a redirect would lose the one copy), or the refusal with `refused`."""
    try:
        made = make()
    except ServiceError as exc:
        return PAGE.answer(request, team, "automations", status=exc.status, notice=exc, **refused)
    return PAGE.answer(request, team, "automations", shows_once=True, new_secret=made)


@never_cache  # the answer holds the new webhook secret: no cache may keep it
@login_required
@require_POST
def automation_create(request: HttpRequest, team_id: int) -> HttpResponse:
    team = settings_team(request, team_id, Action.ADMINISTER)
    form = AutomationForm(request.POST, menus=Menus.of(team))
    if not form.is_valid():
        return PAGE.answer(request, team, "automations", status=400, add_form=form)
    create = partial(
        services.automation_create, by=request.user, team=team,
        **_service_fields(form.cleaned_data),
    )  # fmt: skip
    return _shows_secret(request, team, create, add_form=form)


@login_required
@require_POST
def automation_edit(request: HttpRequest, team_id: int, automation_id: int) -> HttpResponse:
    team = settings_team(request, team_id, Action.ADMINISTER)
    form = AutomationForm(request.POST, menus=Menus.of(team), auto_id=_form_id(automation_id))
    update = partial(
        services.automation_update, by=request.user, team=team, automation_id=automation_id
    )
    return PAGE.submit(
        request, team, "automations", form,
        lambda **data: update(**_service_fields(data, edit=True)), edited=(automation_id, form),
    )  # fmt: skip


def _enable(*, enabled: str | None, **target: Any) -> None:
    if enabled not in ("true", "false"):
        raise InvalidInput("enabled must be true or false.")
    services.automation_update(enabled=enabled == "true", **target)


@login_required
@require_POST
def automation_enable(request: HttpRequest, team_id: int, automation_id: int) -> HttpResponse:
    """Sets `enabled` to the posted value (not a toggle), so a repeated click is harmless."""
    team = settings_team(request, team_id, Action.ADMINISTER)
    enable = partial(
        _enable, enabled=request.POST.get("enabled"), by=request.user, team=team,
        automation_id=automation_id,
    )  # fmt: skip
    return PAGE.write(request, team, "automations", enable)


@login_required
@require_POST
def automation_delete(request: HttpRequest, team_id: int, automation_id: int) -> HttpResponse:
    team = settings_team(request, team_id, Action.ADMINISTER)
    delete = partial(
        services.automation_delete, by=request.user, team=team, automation_id=automation_id
    )
    return PAGE.write(request, team, "automations", delete)


@never_cache  # the answer holds the new webhook secret: no cache may keep it
@login_required
@require_POST
def automation_rotate_secret(
    request: HttpRequest, team_id: int, automation_id: int
) -> HttpResponse:
    """A new webhook secret, shown in this answer only; the old one stops working."""
    team = settings_team(request, team_id, Action.ADMINISTER)
    rotate = partial(
        services.automation_rotate_secret, by=request.user, team=team,
        automation_id=automation_id,
    )  # fmt: skip
    return _shows_secret(request, team, rotate)
