"""A team's MCP servers (teams.models.McpServer): every member lists them; only admins and
owners add, change and delete them, audited ("mcp_server.created", "mcp_server.updated",
"mcp_server.deleted").

The value rules are orchestration.mcp.rules'. What only the team knows is checked here: a
secret a server names must exist in the team when it is saved (one deleted later is the
worker's to meet: the server is skipped with a warning naming it), and an HTTP server's URL
must pass the outbound-address guard (checked again before every connection). A literal
`env` or `headers` value is shown to every member, so one holding a team secret's value is
refused (teams.secret_literals); secret values are read for that comparison only, and the
audit log and every error hold names only.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from django.db import IntegrityError, transaction

from common.errors import Conflict, InvalidInput, NotFound
from teams.audit import audit_record
from teams.models import McpServer, Team
from teams.outbound import outbound_url_check
from teams.permissions import require_admin
from teams.secret_literals import literals_hold_no_secret
from teams.secrets import secrets_required

from .rules import McpServerConfig, McpValueError, clean_name, clean_server, config_from_row

FIELDS = ("transport", "command", "args", "url", "env", "headers", "model_profiles", "enabled")
"""What a write sets; the name stays (its tools are named after it in conversations' logs)."""


_require_admin = partial(require_admin, what="manage MCP servers")


def _check_secrets(team: Team, cleaned: dict[str, Any]) -> None:
    """Every secret named exists; no literal holds a secret's value."""
    wanted: dict[str, str] = {}
    literals: dict[str, str] = {}
    for what in ("env", "headers"):
        for key, value in cleaned[what].items():
            if isinstance(value, dict):
                wanted.setdefault(value["secret"], f"{what} {key}")
            else:
                literals[f"{what} {key}"] = value
    secrets_required(team, wanted)
    literals_hold_no_secret(team, literals, what="MCP server")


def _clean(team: Team, fields: dict[str, Any]) -> dict[str, Any]:
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise InvalidInput(f"unknown MCP server fields: {', '.join(sorted(unknown))}.")
    try:
        cleaned = clean_server(fields)
    except McpValueError as exc:
        raise InvalidInput(str(exc)) from None
    if cleaned["transport"] == "http":
        outbound_url_check(cleaned["url"], what="the MCP server's url")
    _check_secrets(team, cleaned)
    return cleaned


def _describe(server: McpServer) -> dict[str, Any]:
    """What the audit log keeps: literals as typed (they are not secret) and secret names."""
    return {"name": server.name, **{key: getattr(server, key) for key in FIELDS}}


def _get(team: Team, name: str, *, lock: bool = False) -> McpServer:
    rows = McpServer.objects.select_for_update() if lock else McpServer.objects
    server = rows.filter(team=team, name=name).first()
    if server is None:
        raise NotFound(f"the team has no MCP server named {name!r}.")
    return server


def mcp_server_list(*, team: Team) -> list[McpServer]:
    """The team's servers by name; the caller has checked that its user is a member."""
    return list(McpServer.objects.filter(team=team).order_by("name"))


def mcp_server_get(*, team: Team, name: str) -> McpServer:
    """One of the team's servers (NotFound otherwise); the caller has checked membership."""
    return _get(team, name)


def mcp_server_create(*, by, team: Team, name: str, **fields: Any) -> McpServer:
    """Add a server; its name is unique within the team (Conflict otherwise)."""
    _require_admin(by, team)
    try:
        name = clean_name(name)
    except McpValueError as exc:
        raise InvalidInput(str(exc)) from None
    cleaned = _clean(team, fields)
    with transaction.atomic():
        try:
            with transaction.atomic():
                server = McpServer.objects.create(team=team, name=name, **cleaned)
        except IntegrityError:
            raise Conflict(f"an MCP server named {name!r} already exists.") from None
        audit_record(
            actor=by, kind="mcp_server.created", team=team, target=name, data=_describe(server)
        )
    return server


def mcp_server_update(*, by, team: Team, name: str, **fields: Any) -> McpServer:
    """Replace a server's fields (FIELDS; one left out takes its default). Runs already going
    keep what their slice connected to; their next slice gets the new values."""
    _require_admin(by, team)
    cleaned = _clean(team, fields)
    with transaction.atomic():
        server = _get(team, name, lock=True)
        before = _describe(server)
        for key, value in cleaned.items():
            setattr(server, key, value)
        server.save()
        audit_record(
            actor=by, kind="mcp_server.updated", team=team, target=name,
            data={"before": before, "after": _describe(server)},
        )  # fmt: skip
    return server


def mcp_server_delete(*, by, team: Team, name: str) -> None:
    _require_admin(by, team)
    with transaction.atomic():
        server = _get(team, name, lock=True)
        data = _describe(server)
        server.delete()
        audit_record(actor=by, kind="mcp_server.deleted", team=team, target=name, data=data)


def mcp_servers_for_run(*, team_id: int, model_profile: str) -> list[McpServerConfig]:
    """The enabled servers that serve `model_profile`, for a worker's slice."""
    rows = McpServer.objects.filter(team_id=team_id, enabled=True).order_by("name")
    configs = [config_from_row(row) for row in rows]
    return [config for config in configs if config.serves(model_profile)]
