"""The team's Skills page: instructions its agents load with `invoke_skill` or by a trigger
word. Every member sees them; admins and owners add, change and delete them through
skills.services, which checks and audits each write, as /api/teams/{id}/skills does.

The forms check shape and size only; the rules are the service's (skills.catalog), so a
refusal comes back in its words and status.
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_POST

from common.errors import ServiceError
from skills import catalog, services
from skills.models import TeamSkill
from teams.models import Team
from teams.permissions import Action

from .settings_pages import SettingsPage, administers, edit_rows, posted_name, settings_team

TEMPLATE = "canvas/team_skills.html"


class SkillForm(forms.Form):
    description = forms.CharField(
        max_length=catalog.MAX_DESCRIPTION_CHARS,
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "e.g. How we deploy to staging."}),
        help_text="What the model reads when it decides whether to load the skill.",
    )
    triggers = forms.CharField(
        max_length=2000, required=False,
        widget=forms.TextInput(attrs={"placeholder": "e.g. deploy, staging", "spellcheck": "false"}),
        help_text="Words or phrases, separated by commas: a person's message holding one loads "
        "the skill at once. Blank: only the agent loads it.",
    )  # fmt: skip
    body = forms.CharField(
        max_length=catalog.MAX_BODY_BYTES, label="Instructions",
        widget=forms.Textarea(attrs={"rows": 8}),
    )  # fmt: skip

    def clean_triggers(self) -> list[str]:
        text = self.cleaned_data.get("triggers", "")
        return [part.strip() for part in re.split(r",", text) if part.strip()]


class SkillCreateForm(SkillForm):
    name = forms.CharField(
        max_length=64, widget=forms.TextInput(attrs={"placeholder": "e.g. deploy-staging"})
    )
    field_order = ["name"]


class SkillEditForm(SkillForm):
    name = forms.CharField(max_length=64, widget=forms.HiddenInput)


def _edit_form(skill: TeamSkill, index: int) -> SkillEditForm:
    initial = {"name": skill.name, "description": skill.description, "body": skill.body,
               "triggers": ", ".join(skill.triggers or [])}  # fmt: skip
    return SkillEditForm(initial=initial, auto_id=f"id_skill{index}_%s")


def _context(
    request: HttpRequest, team: Team, *, add_form: SkillCreateForm | None = None,
    edited: tuple[str, SkillEditForm] | None = None, notice: ServiceError | None = None,
) -> dict[str, Any]:  # fmt: skip
    rows = edit_rows(
        services.skill_list(team=team), key=lambda skill: skill.name, edited=edited,
        row_id=lambda _, index: f"skill-{index}", form_for=_edit_form,
    )  # fmt: skip
    return {
        "team": team,
        "rows": rows,
        "can_administer": administers(request, team),
        "add_form": add_form or SkillCreateForm(),
        "notice": notice,
    }


PAGE = SettingsPage(TEMPLATE, "team-skills", _context, "Skills")

team_skills_page = PAGE.view()


@login_required
@require_POST
def skill_create(request: HttpRequest, team_id: int) -> HttpResponse:
    team = settings_team(request, team_id, Action.ADMINISTER)
    form = SkillCreateForm(request.POST)
    create = partial(services.skill_create, by=request.user, team=team)
    return PAGE.submit(request, team, "skills", form, create, add_form=form)


@login_required
@require_POST
def skill_edit(request: HttpRequest, team_id: int) -> HttpResponse:
    team = settings_team(request, team_id, Action.ADMINISTER)
    names = [skill.name for skill in services.skill_list(team=team)]
    name = posted_name(request)
    index = names.index(name) + 1 if name in names else 0
    form = SkillEditForm(request.POST, auto_id=f"id_skill{index}_%s")
    update = partial(services.skill_update, by=request.user, team=team, name=name)
    return PAGE.submit(
        request, team, "skills", form,
        lambda **data: update(**{key: data[key] for key in services.FIELDS}),
        edited=(name, form),
    )  # fmt: skip


@login_required
@require_POST
def skill_delete(request: HttpRequest, team_id: int) -> HttpResponse:
    team = settings_team(request, team_id, Action.ADMINISTER)
    delete = partial(services.skill_delete, by=request.user, team=team, name=posted_name(request))
    return PAGE.write(request, team, "skills", delete)
