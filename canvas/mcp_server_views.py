"""The team's MCP servers page: the servers whose tools the team's own agent gets. Every member
sees them; admins and owners add, change, enable or disable and delete them through
orchestration.mcp.servers, which checks and audits each write, as the API's
/api/teams/{id}/mcp-servers does.

The forms turn lines into lists and maps and check shape only; the rules are the service's, so
a refusal comes back in its words and status. Environment values and headers are typed in two
boxes each: literal text, and references to team secrets by name, so a secret value never has
a field to be typed into here.
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_POST

from orchestration.mcp import servers
from teams.models import McpServer, Team
from teams.permissions import Action
from teams.secrets import secret_list

from .acp_agent_views import _pairs
from .settings_pages import SettingsPage, administers, edit_rows, posted_name, settings_team

TEMPLATE = "canvas/team_mcp_servers.html"
LINES = {"rows": 2, "spellcheck": "false"}


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


class McpServerForm(forms.Form):
    transport = forms.ChoiceField(
        choices=[("stdio", "stdio: a command on the worker"), ("http", "Streamable HTTP")]
    )
    command = forms.CharField(
        required=False, max_length=255,
        widget=forms.TextInput(attrs={"placeholder": "e.g. mcp-server-git", "spellcheck": "false"}),
        help_text="stdio: a program on the worker's PATH or an absolute path; no shell.",
    )  # fmt: skip
    args = forms.CharField(
        required=False, max_length=20_000, label="Arguments",
        widget=forms.Textarea(attrs=LINES), help_text="One per line.",
    )  # fmt: skip
    url = forms.CharField(
        required=False, max_length=2000, label="URL",
        widget=forms.TextInput(attrs={"placeholder": "https://mcp.example.com/mcp",
                                      "spellcheck": "false"}),
        help_text="Streamable HTTP: the endpoint; public addresses only, unless the site allows.",
    )  # fmt: skip
    env = forms.CharField(
        required=False, max_length=50_000, label="Environment",
        widget=forms.Textarea(attrs=LINES),
        help_text="stdio: NAME=value lines of text that is not secret.",
    )  # fmt: skip
    secret_env = forms.CharField(
        required=False, max_length=10_000, label="Environment from secrets",
        widget=forms.Textarea(attrs=LINES),
        help_text="stdio: NAME=SECRET lines: the variable gets the team secret's value when the "
        "server starts; only the name is stored.",
    )  # fmt: skip
    headers = forms.CharField(
        required=False, max_length=50_000, label="Headers",
        widget=forms.Textarea(attrs=LINES), help_text="HTTP: Name=value lines, not secret.",
    )  # fmt: skip
    secret_headers = forms.CharField(
        required=False, max_length=10_000, label="Headers from secrets",
        widget=forms.Textarea(attrs=LINES),
        help_text="HTTP: Name=SECRET lines (Authorization=GITHUB_TOKEN, say).",
    )  # fmt: skip
    model_profiles = forms.CharField(
        required=False, max_length=5000, label="Model profiles",
        widget=forms.TextInput(attrs={"placeholder": "all of them", "spellcheck": "false"}),
        help_text="The model profiles whose conversations get its tools, separated by commas "
        "or spaces; empty: every one.",
    )  # fmt: skip
    enabled = forms.BooleanField(required=False, initial=True)

    def clean_args(self) -> list[str]:
        return _lines(self.cleaned_data.get("args", ""))

    def clean_env(self) -> dict[str, str]:
        return _pairs(self.cleaned_data.get("env", ""), "Environment")

    def clean_secret_env(self) -> dict[str, str]:
        return _pairs(self.cleaned_data.get("secret_env", ""), "Secret")

    def clean_headers(self) -> dict[str, str]:
        return _pairs(self.cleaned_data.get("headers", ""), "Header")

    def clean_secret_headers(self) -> dict[str, str]:
        return _pairs(self.cleaned_data.get("secret_headers", ""), "Secret")

    def clean_model_profiles(self) -> list[str]:
        text = self.cleaned_data.get("model_profiles", "")
        return [name for name in re.split(r"[\s,]+", text) if name]


def _service_fields(data: dict[str, Any]) -> dict[str, Any]:
    env = dict(data["env"]) | {k: {"secret": s} for k, s in data["secret_env"].items()}
    headers = dict(data["headers"]) | {k: {"secret": s} for k, s in data["secret_headers"].items()}
    return {
        "transport": data["transport"], "command": data["command"], "args": data["args"],
        "url": data["url"], "env": env, "headers": headers,
        "model_profiles": data["model_profiles"], "enabled": data["enabled"],
    }  # fmt: skip


class McpServerCreateForm(McpServerForm):
    name = forms.CharField(
        max_length=32, widget=forms.TextInput(attrs={"placeholder": "e.g. github"}),
        help_text="Its tools are offered as mcp__NAME__TOOL.",
    )  # fmt: skip
    field_order = ["name"]


class McpServerEditForm(McpServerForm):
    name = forms.CharField(max_length=32, widget=forms.HiddenInput)


def _split(values: dict[str, Any]) -> tuple[str, str]:
    text = "\n".join(f"{k}={v}" for k, v in values.items() if isinstance(v, str))
    refs = "\n".join(f"{k}={v['secret']}" for k, v in values.items() if isinstance(v, dict))
    return text, refs


def _edit_form(server: McpServer, index: int) -> McpServerEditForm:
    env, secret_env = _split(server.env or {})
    headers, secret_headers = _split(server.headers or {})
    initial = {
        "name": server.name, "transport": server.transport, "command": server.command,
        "args": "\n".join(server.args or []), "url": server.url, "env": env,
        "secret_env": secret_env, "headers": headers, "secret_headers": secret_headers,
        "model_profiles": ", ".join(server.model_profiles or []), "enabled": server.enabled,
    }  # fmt: skip
    # Every row has its form on the page: ids differ, names stay plain.
    return McpServerEditForm(initial=initial, auto_id=f"id_mcp{index}_%s")


def _context(
    request: HttpRequest, team: Team, *, add_form: McpServerCreateForm | None = None,
    edited: tuple[str, McpServerEditForm] | None = None, notice: Exception | None = None,
) -> dict[str, Any]:  # fmt: skip
    rows = edit_rows(
        servers.mcp_server_list(team=team), key=lambda server: server.name, edited=edited,
        row_id=lambda server, _index: f"mcp-server-{server.name}", form_for=_edit_form,
    )  # fmt: skip
    return {
        "team": team,
        "rows": rows,
        "secret_names": [secret.name for secret in secret_list(team)],
        "can_administer": administers(request, team),
        "add_form": add_form or McpServerCreateForm(),
        "notice": notice,
    }


PAGE = SettingsPage(TEMPLATE, "team-mcp-servers", _context, "MCP servers")


team_mcp_servers_page = PAGE.view()


@login_required
@require_POST
def mcp_server_create(request: HttpRequest, team_id: int) -> HttpResponse:
    team = settings_team(request, team_id, Action.ADMINISTER)
    form = McpServerCreateForm(request.POST)
    create = partial(servers.mcp_server_create, by=request.user, team=team)
    return PAGE.submit(
        request, team, "mcp-servers", form,
        lambda **data: create(name=data["name"], **_service_fields(data)), add_form=form,
    )  # fmt: skip


@login_required
@require_POST
def mcp_server_edit(request: HttpRequest, team_id: int) -> HttpResponse:
    team = settings_team(request, team_id, Action.ADMINISTER)
    names = [server.name for server in servers.mcp_server_list(team=team)]
    name = posted_name(request)
    index = names.index(name) + 1 if name in names else 0
    form = McpServerEditForm(request.POST, auto_id=f"id_mcp{index}_%s")
    update = partial(servers.mcp_server_update, by=request.user, team=team, name=name)
    return PAGE.submit(
        request, team, "mcp-servers", form, lambda **data: update(**_service_fields(data)),
        edited=(name, form),
    )  # fmt: skip


@login_required
@require_POST
def mcp_server_delete(request: HttpRequest, team_id: int) -> HttpResponse:
    team = settings_team(request, team_id, Action.ADMINISTER)
    delete = partial(
        servers.mcp_server_delete, by=request.user, team=team, name=posted_name(request)
    )
    return PAGE.write(request, team, "mcp-servers", delete)
