"""The team's Model profiles page: every member sees the profiles (which secret holds each key,
never a key); admins and owners add, change and delete them (teams.profiles, audited there, as
the API's /api/teams/{id}/profiles) and test one.

"Test connection" makes one tiny call on a worker (orchestration.profile_checks): this process
never loads LiteLLM nor reads the key. The button's answer is a pending notice that polls its
check until the worker's verdict arrives.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from common.errors import ServiceError
from orchestration.profile_checks import profile_check_get, profile_check_start
from teams import profiles, secrets
from teams.models import ModelProfile, Team
from teams.permissions import Action
from teams.services import team_settings_update

from .access import http_errors
from .settings_pages import SettingsPage, administers, edit_rows, posted_name, settings_team
from .team_forms import ProfileCreateForm, ProfileEditForm, TitlesForm, provider_split

TEMPLATE = "canvas/team_profiles.html"
FIELDS = ("model", "api_base", "api_key_secret", "max_input_tokens", "temperature")


def _secret_names(team: Team) -> list[str]:
    return [info.name for info in secrets.secret_list(team)]


def _edit_form(profile: ModelProfile, index: int, names: list[str]) -> ProfileEditForm:
    provider, model = provider_split(profile.model)
    initial = {key: getattr(profile, key) for key in FIELDS}
    initial |= {"name": profile.name, "provider": provider, "model": model}
    # Every row has its form on the page: ids differ, names stay plain.
    return ProfileEditForm(initial=initial, secret_names=names, auto_id=f"id_profile{index}_%s")


def _context(
    request: HttpRequest, team: Team, *, add_form: ProfileCreateForm | None = None,
    edited: tuple[str, ProfileEditForm] | None = None, notice: ServiceError | None = None,
    titles_form: TitlesForm | None = None, titles_notice: ServiceError | None = None,
    titles_saved: bool = False,
) -> dict[str, Any]:  # fmt: skip
    names = _secret_names(team)
    rows = edit_rows(
        profiles.profile_list(team=team), key=lambda profile: profile.name, edited=edited,
        row_id=lambda _, index: f"profile-{index}",
        form_for=lambda profile, index: _edit_form(profile, index, names),
    )  # fmt: skip
    for row in rows:
        key = row["item"].api_key_secret
        row["key_missing"] = bool(key) and key not in names
    return {
        "team": team,
        "rows": rows,
        "can_administer": administers(request, team),
        "add_form": add_form or ProfileCreateForm(secret_names=names),
        "notice": notice,
        "titles_form": titles_form or TitlesForm(initial={"model_titles": team.model_titles}),
        "titles_notice": titles_notice,
        "titles_saved": titles_saved,
    }


PAGE = SettingsPage(TEMPLATE, "team-profiles", _context, "Model profiles")


team_profiles = PAGE.view()


@login_required
@require_POST
def profile_create(request: HttpRequest, team_id: int) -> HttpResponse:
    team = settings_team(request, team_id, Action.ADMINISTER)
    form = ProfileCreateForm(request.POST, secret_names=_secret_names(team))
    create = partial(profiles.profile_create, by=request.user, team=team)
    return PAGE.submit(request, team, "profiles", form, create, add_form=form)


@login_required
@require_POST
def profile_edit(request: HttpRequest, team_id: int) -> HttpResponse:
    team = settings_team(request, team_id, Action.ADMINISTER)
    names = [p.name for p in profiles.profile_list(team=team)]
    name = posted_name(request)
    index = names.index(name) + 1 if name in names else 0
    form = ProfileEditForm(
        request.POST, secret_names=_secret_names(team), auto_id=f"id_profile{index}_%s"
    )
    update = partial(profiles.profile_update, by=request.user, team=team, name=name)
    return PAGE.submit(
        request, team, "profiles", form, lambda **data: update(**{key: data[key] for key in FIELDS}),
        edited=(name, form),
    )  # fmt: skip


@login_required
@require_POST
def profile_delete(request: HttpRequest, team_id: int) -> HttpResponse:
    team = settings_team(request, team_id, Action.ADMINISTER)
    name = posted_name(request)
    return PAGE.write(
        request,
        team,
        "profiles",
        partial(profiles.profile_delete, by=request.user, team=team, name=name),
    )


@login_required
@require_POST
def profile_titles(request: HttpRequest, team_id: int) -> HttpResponse:
    """Whether new conversations get a short title from their own model."""
    team = settings_team(request, team_id, Action.ADMINISTER)
    form = TitlesForm(request.POST)
    update = partial(team_settings_update, by=request.user, team=team)
    return PAGE.submit(
        request, team, "titles", form, update, notice_as="titles_notice",
        done={"titles_saved": True}, titles_form=form,
    )  # fmt: skip


def _check(request: HttpRequest, team: Team, check_id: str) -> HttpResponse:
    check = profile_check_get(team=team, check_id=check_id)
    if check is None:
        raise Http404("this check is over; test again.")
    context = {"team": team, "check": check, "check_id": check_id}
    return render(request, f"{TEMPLATE}#profile-check", context)


@never_cache
@login_required
@require_POST
def profile_test(request: HttpRequest, team_id: int) -> HttpResponse:
    """Starts a check and answers its pending notice, which polls `profile_check`."""
    team = settings_team(request, team_id, Action.ADMINISTER)
    with http_errors():
        check_id = profile_check_start(team=team, name=posted_name(request))
    return _check(request, team, check_id)


@never_cache
@login_required
@require_GET
def profile_check(request: HttpRequest, team_id: int, check_id: str) -> HttpResponse:
    team = settings_team(request, team_id, Action.ADMINISTER)
    return _check(request, team, check_id)
