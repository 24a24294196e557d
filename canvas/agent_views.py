"""The team's Agents page: the sub-agent types its agents may spawn. Every member sees them
(their agents pick by these names); admins and owners add, change and delete them through
orchestration.subagents.team_agents, which checks and audits each write, as the API's
/api/teams/{id}/agents does.

The forms check shape and size only; the rules (name pattern, built-in names, which tools and
models exist, ranges) are the service's, so a refusal comes back in its words and status.
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
from orchestration.step.agent import DEFAULT_TOOLS
from orchestration.subagents import team_agents
from orchestration.subagents.definitions import (
    BUILTINS,
    MAX_DESCRIPTION_CHARS,
    MAX_MODEL_CHARS,
)
from teams.models import Team, TeamAgent
from teams.permissions import Action

from .settings_pages import SettingsPage, administers, edit_rows, posted_name, settings_team

TEMPLATE = "canvas/team_agents.html"


class AgentForm(forms.Form):
    """A definition's fields as team_agents takes them; a blank tools field is None (the
    parent's tools), which a list can never mean."""

    description = forms.CharField(
        max_length=MAX_DESCRIPTION_CHARS,
        widget=forms.Textarea(
            attrs={"rows": 2, "placeholder": "e.g. Reviews a diff and reports problems."}
        ),
        help_text="What the parent's model reads when it picks a type.",
    )
    tools = forms.CharField(
        max_length=2000, required=False, label="Tools",
        widget=forms.TextInput(attrs={"placeholder": "the parent's", "spellcheck": "false"}),
        help_text=f"Names separated by commas or spaces, e.g. {', '.join(DEFAULT_TOOLS[:4])}. "
        "Blank: the parent's. Never more than the parent's and the policy's.",
    )  # fmt: skip
    model = forms.CharField(
        max_length=MAX_MODEL_CHARS, required=False, label="Model profile",
        widget=forms.TextInput(attrs={"placeholder": "the parent's", "spellcheck": "false"}),
    )  # fmt: skip
    max_iterations = forms.IntegerField(
        required=False, label="Max iterations",
        widget=forms.NumberInput(attrs={"placeholder": "its share of the parent's"}),
    )  # fmt: skip
    instructions = forms.CharField(
        max_length=team_agents.MAX_INSTRUCTIONS_BYTES, required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="Appended to the child's system prompt.",
    )  # fmt: skip

    def clean_tools(self) -> list[str] | None:
        text = self.cleaned_data.get("tools", "")
        names = [name for name in re.split(r"[\s,]+", text) if name]
        return names or None


class AgentCreateForm(AgentForm):
    name = forms.CharField(
        max_length=64, widget=forms.TextInput(attrs={"placeholder": "e.g. reviewer"})
    )
    field_order = ["name"]


class AgentEditForm(AgentForm):
    name = forms.CharField(max_length=64, widget=forms.HiddenInput)


def _edit_form(agent: TeamAgent, index: int) -> AgentEditForm:
    initial = {key: getattr(agent, key) for key in team_agents.FIELDS}
    initial |= {"name": agent.name, "tools": ", ".join(agent.tools or [])}
    # Every row has its form on the page: ids differ, names stay plain.
    return AgentEditForm(initial=initial, auto_id=f"id_agent{index}_%s")


def _context(
    request: HttpRequest, team: Team, *, add_form: AgentCreateForm | None = None,
    edited: tuple[str, AgentEditForm] | None = None, notice: ServiceError | None = None,
) -> dict[str, Any]:  # fmt: skip
    rows = edit_rows(
        team_agents.team_agent_list(team=team), key=lambda agent: agent.name, edited=edited,
        row_id=lambda _, index: f"agent-{index}", form_for=_edit_form,
    )  # fmt: skip
    return {
        "team": team,
        "rows": rows,
        "builtins": BUILTINS,
        "can_administer": administers(request, team),
        "add_form": add_form or AgentCreateForm(),
        "notice": notice,
    }


PAGE = SettingsPage(TEMPLATE, "team-agents", _context, "Agents")


team_agents_page = PAGE.view()


@login_required
@require_POST
def agent_create(request: HttpRequest, team_id: int) -> HttpResponse:
    team = settings_team(request, team_id, Action.ADMINISTER)
    form = AgentCreateForm(request.POST)
    create = partial(team_agents.team_agent_create, by=request.user, team=team)
    return PAGE.submit(request, team, "agents", form, create, add_form=form)


@login_required
@require_POST
def agent_edit(request: HttpRequest, team_id: int) -> HttpResponse:
    team = settings_team(request, team_id, Action.ADMINISTER)
    names = [agent.name for agent in team_agents.team_agent_list(team=team)]
    name = posted_name(request)
    index = names.index(name) + 1 if name in names else 0
    form = AgentEditForm(request.POST, auto_id=f"id_agent{index}_%s")
    update = partial(team_agents.team_agent_update, by=request.user, team=team, name=name)
    return PAGE.submit(
        request, team, "agents", form,
        lambda **data: update(**{key: data[key] for key in team_agents.FIELDS}),
        edited=(name, form),
    )  # fmt: skip


@login_required
@require_POST
def agent_delete(request: HttpRequest, team_id: int) -> HttpResponse:
    team = settings_team(request, team_id, Action.ADMINISTER)
    delete = partial(
        team_agents.team_agent_delete, by=request.user, team=team, name=posted_name(request)
    )
    return PAGE.write(request, team, "agents", delete)
