"""The team's Secrets page: names and dates for every member; create, replace and delete for
admins and owners (teams.secrets, as the API's /api/teams/{id}/secrets).

Values are write-only: they arrive in a password field, go to the service, and are never put
in a page again, not even as a mask of their length. The service audits every write.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from common.errors import ServiceError
from teams import secrets
from teams.models import Team
from teams.permissions import Action

from .settings_pages import SettingsPage, administers, edit_rows, posted_name, settings_team
from .team_forms import SecretCreateForm, SecretReplaceForm

TEMPLATE = "canvas/team_secrets.html"


def _replace_form(name: str, description: str, index: int, data=None) -> SecretReplaceForm:
    # Every row has its form on the page: ids differ, names stay plain.
    return SecretReplaceForm(
        data, initial={"name": name, "description": description}, auto_id=f"id_secret{index}_%s"
    )


def _context(
    request: HttpRequest, team: Team, *, add_form: SecretCreateForm | None = None,
    edited: tuple[str, SecretReplaceForm] | None = None, notice: ServiceError | None = None,
) -> dict[str, Any]:  # fmt: skip
    rows = edit_rows(
        secrets.secret_list(team), key=lambda info: info.name, edited=edited,
        row_id=lambda info, _: f"secret-{info.name}",
        form_for=lambda info, index: _replace_form(info.name, info.description, index),
    )  # fmt: skip
    return {
        "team": team,
        "rows": rows,
        "can_administer": administers(request, team),
        "add_form": add_form or SecretCreateForm(),
        "notice": notice,
    }


PAGE = SettingsPage(TEMPLATE, "team-secrets", _context, "Secrets")


team_secrets = never_cache(PAGE.view())


@never_cache
@login_required
@require_POST
def secret_create(request: HttpRequest, team_id: int) -> HttpResponse:
    team = settings_team(request, team_id, Action.ADMINISTER)
    form = SecretCreateForm(request.POST)
    create = partial(secrets.secret_create, by=request.user, team=team)
    return PAGE.submit(request, team, "secrets", form, create, add_form=form)


@never_cache
@login_required
@require_POST
def secret_replace(request: HttpRequest, team_id: int) -> HttpResponse:
    team = settings_team(request, team_id, Action.ADMINISTER)
    name = posted_name(request)
    rows = enumerate(secrets.secret_list(team), start=1)
    # A name the team does not have gets a blank form; the service then says it is missing.
    index, description = next(((i, s.description) for i, s in rows if s.name == name), (0, ""))
    form = _replace_form(name, description, index, request.POST)
    if not form.is_valid():
        return PAGE.answer(request, team, "secrets", status=400, edited=(name, form))
    value = form.cleaned_data["value"] or None
    description = form.cleaned_data["description"] if "description" in form.changed_data else None
    update = partial(
        secrets.secret_update, by=request.user, team=team, name=name, value=value,
        description=description,
    )  # fmt: skip
    return PAGE.write(request, team, "secrets", update, edited=(name, form))


@login_required
@require_POST
def secret_delete(request: HttpRequest, team_id: int) -> HttpResponse:
    team = settings_team(request, team_id, Action.ADMINISTER)
    delete = partial(secrets.secret_delete, by=request.user, team=team, name=posted_name(request))
    return PAGE.write(request, team, "secrets", delete)
