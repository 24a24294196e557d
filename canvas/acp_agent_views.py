"""The team's External agents page: the ACP agents (Claude Code, Codex, Gemini CLI, the site's
and the team's own) its conversations can start with. Every member sees them; admins and owners
add, change and delete the team's own through acp_bridge.team_profiles, which checks and audits
each write, as the API's /api/teams/{id}/acp-agents does. Presets and site profiles are shown
read-only.

The forms turn lines into lists and maps and check shape only; the rules (name, command, secret
names and their existence, bounds) are the service's, so a refusal comes back in its words and
status. Environment values are typed in two boxes: literal text, and references to team secrets
by name, so a secret value never has a field to be typed into here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_POST

from acp_bridge import team_profiles
from acp_bridge.profiles import (
    DEFAULT_IDLE_TIMEOUT_SECONDS,
    DEFAULT_TURN_TIMEOUT_SECONDS,
    MAX_COMMAND_CHARS,
    team_default_network,
)
from common.errors import ServiceError
from teams.models import AcpAgentProfile, Team
from teams.permissions import Action
from teams.secrets import secret_list

from .settings_pages import SettingsPage, administers, edit_rows, posted_name, settings_team

TEMPLATE = "canvas/team_acp_agents.html"
NETWORK_CHOICES = [
    ("outbound", "Outbound (guarded internet)"),
    ("none", "None"),
    ("host", "The host's network"),
]


def _pairs(text: str, what: str) -> dict[str, str]:
    """NAME=value lines; an error names the line, never its value (it may be a pasted key)."""
    pairs: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise forms.ValidationError(f"{what} line {number} is not NAME=value.")
        pairs[key.strip()] = value.strip() if what == "Secret" else value
    return pairs


class AcpAgentForm(forms.Form):
    """A team profile's fields as acp_bridge.team_profiles takes them, typed as lines."""

    command = forms.CharField(
        max_length=MAX_COMMAND_CHARS,
        widget=forms.TextInput(
            attrs={"placeholder": "e.g. claude-agent-acp", "spellcheck": "false"}
        ),
        help_text="A program on the worker's PATH or an absolute path; it runs without a shell.",
    )
    args = forms.CharField(
        required=False, max_length=20_000, label="Arguments",
        widget=forms.Textarea(attrs={"rows": 2, "spellcheck": "false"}),
        help_text="One per line.",
    )  # fmt: skip
    env = forms.CharField(
        required=False, max_length=50_000, label="Environment",
        widget=forms.Textarea(attrs={"rows": 2, "spellcheck": "false",
                                     "placeholder": "LOG_LEVEL=debug"}),
        help_text="NAME=value lines of text that is not secret: it is stored and shown as typed.",
    )  # fmt: skip
    secret_env = forms.CharField(
        required=False, max_length=10_000, label="Environment from secrets",
        widget=forms.Textarea(attrs={"rows": 2, "spellcheck": "false",
                                     "placeholder": "ANTHROPIC_API_KEY=ANTHROPIC_KEY"}),
        help_text="NAME=SECRET lines: the variable gets the value of the team secret SECRET "
        "when the agent starts; only the secret's name is stored.",
    )  # fmt: skip
    allowed_secrets = forms.CharField(
        required=False, max_length=5000, label="Secrets it may see",
        widget=forms.TextInput(attrs={"spellcheck": "false"}),
        help_text="Team secret names separated by commas or spaces, passed by their own names.",
    )  # fmt: skip
    default_mode = forms.CharField(
        required=False, max_length=64, label="Default mode",
        widget=forms.TextInput(attrs={"placeholder": "the agent's", "spellcheck": "false"}),
    )  # fmt: skip
    idle_timeout_seconds = forms.IntegerField(
        initial=DEFAULT_IDLE_TIMEOUT_SECONDS, label="Idle timeout (s)"
    )
    turn_timeout_seconds = forms.IntegerField(
        initial=DEFAULT_TURN_TIMEOUT_SECONDS, label="Turn timeout (s)"
    )
    network = forms.ChoiceField(
        choices=NETWORK_CHOICES, initial=team_default_network, label="Network", required=False,
        help_text="Outbound: the internet through the outbound guard (its model's API), never "
        "the host's loopback or private ranges unless the site lists them. What a team may pick "
        "is the site's choice.",
    )  # fmt: skip
    readonly = forms.CharField(
        required=False, max_length=20_000, label="Read-only host paths",
        widget=forms.Textarea(attrs={"rows": 2, "spellcheck": "false",
                                     "placeholder": "/opt/agents/node_modules"}),
        help_text="One per line: where the agent is installed, if not under /usr. Only inside "
        "the folders the site lets teams show (CANVAS_ACP_TEAM_READONLY_PATHS).",
    )  # fmt: skip

    def clean_network(self) -> str | None:
        return self.cleaned_data.get("network") or None  # the service's default

    def clean_readonly(self) -> list[str]:
        text = self.cleaned_data.get("readonly", "")
        return [line.strip() for line in text.splitlines() if line.strip()]

    def clean_args(self) -> list[str]:
        return [line for line in self.cleaned_data.get("args", "").splitlines() if line.strip()]

    def clean_env(self) -> dict[str, str]:
        return _pairs(self.cleaned_data.get("env", ""), "Environment")

    def clean_secret_env(self) -> dict[str, str]:
        return _pairs(self.cleaned_data.get("secret_env", ""), "Secret")

    def clean_allowed_secrets(self) -> list[str]:
        text = self.cleaned_data.get("allowed_secrets", "")
        return [name for name in re.split(r"[\s,]+", text) if name]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        both = set(data.get("env") or {}) & set(data.get("secret_env") or {})
        if both:
            raise forms.ValidationError(f"{', '.join(sorted(both))}: given as text and secret.")
        return data


def _service_fields(data: dict[str, Any]) -> dict[str, Any]:
    env: dict[str, Any] = dict(data["env"])
    env |= {key: {"secret": secret} for key, secret in data["secret_env"].items()}
    fields = {key: data[key] for key in team_profiles.FIELDS if key != "env"}
    return {**fields, "env": env, "default_mode": data["default_mode"] or None}


class AcpAgentCreateForm(AcpAgentForm):
    name = forms.CharField(
        max_length=64, widget=forms.TextInput(attrs={"placeholder": "e.g. claude-code"}),
        help_text="A preset's name (claude-code, codex, gemini) replaces it for this team.",
    )  # fmt: skip
    field_order = ["name"]


class AcpAgentEditForm(AcpAgentForm):
    name = forms.CharField(max_length=64, widget=forms.HiddenInput)


def _edit_form(profile: AcpAgentProfile, index: int) -> AcpAgentEditForm:
    env = profile.env or {}
    initial = {
        "name": profile.name,
        "command": profile.command,
        "args": "\n".join(profile.args or []),
        "env": "\n".join(f"{k}={v}" for k, v in env.items() if isinstance(v, str)),
        "secret_env": "\n".join(
            f"{k}={v['secret']}" for k, v in env.items() if isinstance(v, dict)
        ),
        "allowed_secrets": ", ".join(profile.allowed_secrets or []),
        "default_mode": profile.default_mode,
        "idle_timeout_seconds": profile.idle_timeout_seconds,
        "turn_timeout_seconds": profile.turn_timeout_seconds,
        "readonly": "\n".join(profile.readonly or []),
        "network": profile.network,
    }
    # Every row has its form on the page: ids differ, names stay plain.
    return AcpAgentEditForm(initial=initial, auto_id=f"id_acp{index}_%s")


def _naming_fields(form: AcpAgentForm, service: Callable[..., object]) -> Callable[..., object]:
    """`service`, with a refused value also shown under its field of `form`."""

    def call(**data: Any) -> object:
        try:
            return service(**data)
        except team_profiles.AcpFieldError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.detail)
            raise

    return call


def _row_id(entry: team_profiles.CatalogEntry, _index: int) -> str:
    return f"acp-agent-{entry.profile.name}"


def _context(
    request: HttpRequest, team: Team, *, add_form: AcpAgentCreateForm | None = None,
    edited: tuple[str, AcpAgentEditForm] | None = None, notice: ServiceError | None = None,
) -> dict[str, Any]:  # fmt: skip
    entries = team_profiles.acp_agent_catalog(team=team)
    rows = edit_rows(
        entries, key=lambda entry: entry.profile.name, edited=edited, row_id=_row_id,
        form_for=lambda entry, index: _edit_form(entry.row, index) if entry.row else None,
    )  # fmt: skip
    return {
        "team": team,
        "rows": rows,
        "own_count": sum(1 for entry in entries if entry.row is not None),
        "secret_names": [secret.name for secret in secret_list(team)],
        "can_administer": administers(request, team),
        "add_form": add_form or AcpAgentCreateForm(),
        "notice": notice,
    }


PAGE = SettingsPage(TEMPLATE, "team-acp-agents", _context, "External agents")


team_acp_agents_page = PAGE.view()


@login_required
@require_POST
def acp_agent_create(request: HttpRequest, team_id: int) -> HttpResponse:
    team = settings_team(request, team_id, Action.ADMINISTER)
    form = AcpAgentCreateForm(request.POST)
    create = partial(team_profiles.acp_agent_create, by=request.user, team=team)
    service = _naming_fields(
        form, lambda **data: create(name=data["name"], **_service_fields(data))
    )
    return PAGE.submit(request, team, "acp-agents", form, service, add_form=form)


@login_required
@require_POST
def acp_agent_edit(request: HttpRequest, team_id: int) -> HttpResponse:
    team = settings_team(request, team_id, Action.ADMINISTER)
    names = [entry.profile.name for entry in team_profiles.acp_agent_catalog(team=team)]
    name = posted_name(request)
    index = names.index(name) + 1 if name in names else 0
    form = AcpAgentEditForm(request.POST, auto_id=f"id_acp{index}_%s")
    update = partial(team_profiles.acp_agent_update, by=request.user, team=team, name=name)
    service = _naming_fields(form, lambda **data: update(**_service_fields(data)))
    return PAGE.submit(request, team, "acp-agents", form, service, edited=(name, form))


@login_required
@require_POST
def acp_agent_delete(request: HttpRequest, team_id: int) -> HttpResponse:
    team = settings_team(request, team_id, Action.ADMINISTER)
    delete = partial(
        team_profiles.acp_agent_delete, by=request.user, team=team, name=posted_name(request)
    )
    return PAGE.write(request, team, "acp-agents", delete)
