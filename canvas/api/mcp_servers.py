"""/api/teams/{id}/mcp-servers: the MCP servers whose tools the team's own agent runs get.
Every member lists and reads them; admins and owners add, replace and delete them
(orchestration.mcp.servers checks and audits each change).

`env` (stdio) and `headers` (http) map a name to text or to {"secret": NAME}, a team
secret's name: no answer ever holds a secret value, because no server row holds one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from django.http import HttpRequest
from ninja import Router, Schema, Status
from pydantic import Field

from acp_bridge.profiles import MAX_ARG_CHARS, MAX_COMMAND_CHARS
from common.inputs import Text
from orchestration.mcp import servers
from orchestration.mcp.rules import MAX_URL_CHARS
from teams.models import McpServer
from teams.permissions import Action
from teams.services import team_get_for

from . import ERRORS

router = Router(tags=["mcp-servers"])


class McpServerFields(Schema):
    """A server's fields; PUT replaces them all (a field left out takes its default)."""

    transport: Literal["stdio", "http"] = Field(
        default="stdio",
        description='"stdio": the worker starts `command args` in the sandbox; "http": '
        "Streamable HTTP to `url`.",
    )
    command: Text(MAX_COMMAND_CHARS) = Field(
        default="", description="stdio: a program on the worker's PATH or an absolute path."
    )
    args: list[Text(MAX_ARG_CHARS)] = Field(default_factory=list)
    url: Text(MAX_URL_CHARS) = Field(default="", description="http: the server's endpoint.")
    env: dict[Text(64), Any] = Field(
        default_factory=dict,
        description='stdio: NAME: text (not secret), or NAME: {"secret": TEAM_SECRET_NAME}.',
    )
    headers: dict[Text(64), Any] = Field(
        default_factory=dict,
        description='http: Header: text (not secret), or Header: {"secret": TEAM_SECRET_NAME}.',
    )
    model_profiles: list[Text(100)] = Field(
        default_factory=list, description="The model profiles it serves; empty: all of them."
    )
    enabled: bool = True


class McpServerIn(McpServerFields):
    name: Text(32, min_length=1) = Field(
        description="Letters, digits, - and single _; its tools are named mcp__NAME__TOOL."
    )


class McpServerOut(Schema):
    name: str
    transport: str
    command: str
    args: list[str]
    url: str
    env: dict[str, Any]
    headers: dict[str, Any]
    model_profiles: list[str]
    enabled: bool
    created_at: datetime
    updated_at: datetime


def _out(server: McpServer) -> dict[str, Any]:
    fields = ("name", "created_at", "updated_at", *servers.FIELDS)
    return {key: getattr(server, key) for key in fields}


@router.get("/{team_id}/mcp-servers", response={200: list[McpServerOut], **ERRORS})
def mcp_server_list(request: HttpRequest, team_id: int):
    team = team_get_for(request.user, team_id, Action.VIEW)
    return [_out(server) for server in servers.mcp_server_list(team=team)]


@router.post("/{team_id}/mcp-servers", response={201: McpServerOut, **ERRORS})
def mcp_server_create(request: HttpRequest, team_id: int, body: McpServerIn):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    server = servers.mcp_server_create(by=request.user, team=team, **body.model_dump())
    return Status(201, _out(server))


@router.get("/{team_id}/mcp-servers/{name}", response={200: McpServerOut, **ERRORS})
def mcp_server_get(request: HttpRequest, team_id: int, name: Text(32)):
    team = team_get_for(request.user, team_id, Action.VIEW)
    return _out(servers.mcp_server_get(team=team, name=name))


@router.put("/{team_id}/mcp-servers/{name}", response={200: McpServerOut, **ERRORS})
def mcp_server_update(request: HttpRequest, team_id: int, name: Text(32), body: McpServerFields):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    server = servers.mcp_server_update(by=request.user, team=team, name=name, **body.model_dump())
    return _out(server)


@router.delete("/{team_id}/mcp-servers/{name}", response={204: None, **ERRORS})
def mcp_server_delete(request: HttpRequest, team_id: int, name: Text(32)):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    servers.mcp_server_delete(by=request.user, team=team, name=name)
    return Status(204, None)
