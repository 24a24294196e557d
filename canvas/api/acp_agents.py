"""/api/teams/{id}/acp-agents: the external ACP agents a team's conversations can start with.
Every member lists and reads them (presets, the site's and the team's own, each marked by
`source`); admins and owners add, replace and delete the team's own (acp_bridge.team_profiles
checks and audits each change). Presets and site profiles are read-only here; a team profile
of the same name replaces one for the team.

`env` maps a variable to text or to {"secret": NAME}, a team secret's name: no answer ever
holds a secret value, because no profile holds one.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal

from django.http import HttpRequest
from ninja import Router, Schema, Status
from ninja.errors import ValidationError
from pydantic import Field

from acp_bridge import team_profiles
from acp_bridge.profiles import (
    DEFAULT_IDLE_TIMEOUT_SECONDS,
    DEFAULT_TURN_TIMEOUT_SECONDS,
    MAX_ARG_CHARS,
    MAX_COMMAND_CHARS,
    MAX_READONLY,
    MAX_TIMEOUT_SECONDS,
)
from common.inputs import Int, Text
from teams.permissions import Action
from teams.services import team_get_for

from . import ERRORS

router = Router(tags=["acp-agents"])


class AcpAgentFields(Schema):
    """A team profile's fields; PUT replaces them all (a field left out takes its default)."""

    command: Text(MAX_COMMAND_CHARS, min_length=1) = Field(
        description="A program name on the worker's PATH or an absolute path; no shell."
    )
    args: list[Text(MAX_ARG_CHARS)] = Field(default_factory=list)
    env: dict[Text(64), Any] = Field(
        default_factory=dict,
        description='NAME: text (not secret), or NAME: {"secret": TEAM_SECRET_NAME}.',
    )
    allowed_secrets: list[Text(64)] = Field(
        default_factory=list, description="Team secrets the process sees by their own names."
    )
    default_mode: Text(64) | None = Field(default=None, description="null: the agent's own.")
    idle_timeout_seconds: Int(ge=1, le=MAX_TIMEOUT_SECONDS) = DEFAULT_IDLE_TIMEOUT_SECONDS
    turn_timeout_seconds: Int(ge=1, le=MAX_TIMEOUT_SECONDS) = DEFAULT_TURN_TIMEOUT_SECONDS
    readonly: list[Text(MAX_ARG_CHARS)] = Field(
        default_factory=list, max_length=MAX_READONLY,
        description="Host paths the agent sees read-only (its installation): only inside the "
        "site's CANVAS_ACP_TEAM_READONLY_PATHS, never one the sandbox refuses.",
    )  # fmt: skip
    network: Literal["none", "outbound", "host"] | None = Field(
        default=None,
        description='"outbound": the public internet through the outbound guard (never the '
        'host\'s loopback or private ranges); "none"; "host" where the site allows teams it '
        "(CANVAS_ACP_TEAM_NETWORKS). null: outbound where allowed, else none.",
    )


class AcpAgentIn(AcpAgentFields):
    name: Text(64, min_length=1) = Field(
        description="Letters, digits, _ . -; a preset's or the site's name replaces it."
    )


class AcpAgentOut(Schema):
    name: str
    source: str = Field(description='"preset", "site" or "team".')
    read_only: bool
    replaces: str | None = Field(description="For a team profile: the source it shadows.")
    command: str
    args: list[str]
    env: dict[str, Any]
    allowed_secrets: list[str]
    default_mode: str | None
    idle_timeout_seconds: int
    turn_timeout_seconds: int
    readonly: list[str]
    network: str
    created_at: datetime | None
    updated_at: datetime | None


def _out(entry: team_profiles.CatalogEntry) -> dict[str, Any]:
    profile = entry.profile
    return {
        "name": profile.name,
        "source": profile.source,
        "read_only": entry.read_only,
        "replaces": entry.replaces,
        "command": profile.command,
        "args": list(profile.args),
        "env": profile.env_json(),
        "allowed_secrets": list(profile.secrets),
        "default_mode": profile.default_mode,
        "idle_timeout_seconds": profile.idle_timeout_seconds,
        "turn_timeout_seconds": profile.turn_timeout_seconds,
        "readonly": list(profile.readonly),
        "network": profile.network,
        "created_at": entry.row.created_at if entry.row else None,
        "updated_at": entry.row.updated_at if entry.row else None,
    }


def _written(team, name: str) -> dict[str, Any]:
    return _out(team_profiles.acp_agent_entry(team=team, name=name))


def _write(service: Callable[..., Any], **fields: Any) -> Any:
    """`service(**fields)`; a refused value answers 400 as a field error, like a malformed
    body ({"field": "network", "message": ...})."""
    try:
        return service(**fields)
    except team_profiles.AcpFieldError as exc:
        raise ValidationError([{"loc": ("body", "body", exc.field), "msg": exc.detail}]) from None


@router.get("/{team_id}/acp-agents", response={200: list[AcpAgentOut], **ERRORS})
def acp_agent_list(request: HttpRequest, team_id: int):
    team = team_get_for(request.user, team_id, Action.VIEW)
    return [_out(entry) for entry in team_profiles.acp_agent_catalog(team=team)]


@router.post("/{team_id}/acp-agents", response={201: AcpAgentOut, **ERRORS})
def acp_agent_create(request: HttpRequest, team_id: int, body: AcpAgentIn):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    profile = _write(
        team_profiles.acp_agent_create, by=request.user, team=team, **body.model_dump()
    )
    return Status(201, _written(team, profile.name))


@router.get("/{team_id}/acp-agents/{name}", response={200: AcpAgentOut, **ERRORS})
def acp_agent_get(request: HttpRequest, team_id: int, name: Text(64)):
    team = team_get_for(request.user, team_id, Action.VIEW)
    return _out(team_profiles.acp_agent_entry(team=team, name=name))


@router.put("/{team_id}/acp-agents/{name}", response={200: AcpAgentOut, **ERRORS})
def acp_agent_update(request: HttpRequest, team_id: int, name: Text(64), body: AcpAgentFields):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    _write(
        team_profiles.acp_agent_update, by=request.user, team=team, name=name, **body.model_dump()
    )
    return _written(team, name)


@router.delete("/{team_id}/acp-agents/{name}", response={204: None, **ERRORS})
def acp_agent_delete(request: HttpRequest, team_id: int, name: Text(64)):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    team_profiles.acp_agent_delete(by=request.user, team=team, name=name)
    return Status(204, None)
