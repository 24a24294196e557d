"""A team's own agent definitions: sub-agent kinds its admins write (UI and API), stored as
teams.models.TeamAgent rows and handed to the runner as AgentDefinitions (source "team").

Here rather than in teams because checking one needs what only orchestration knows: which
tools exist (orchestration.tools.registry) and which model names resolve
(orchestration.step.profiles); teams never imports orchestration. The value rules are those
of a workspace file (orchestration.subagents.definitions: NAME, TOOL_NAME and the limits), so
a definition means the same wherever it was written. Values are checked when saved; a tool or
profile removed later is the runner's to meet (a child's tools are narrowed to its parent's
anyway, and an unknown model stops the child with a model error).

Every member may read a team's definitions; only admins and owners change them, audited
("agent.created", "agent.updated", "agent.deleted").
"""

from __future__ import annotations

from functools import partial
from typing import Any

from django.db import IntegrityError, transaction

from common.errors import Conflict, InvalidInput, NotFound
from teams.audit import audit_record
from teams.models import Team, TeamAgent
from teams.permissions import require_admin

from ..step.profiles import UnknownProfileError, profile_get
from ..tools.registry import get_tool
from .definitions import (
    BUILTINS,
    MAX_DESCRIPTION_CHARS,
    MAX_FILE_BYTES,
    MAX_ITERATIONS,
    MAX_MODEL_CHARS,
    MCP_PREFIX,
    NAME,
    TOOL_NAME,
    AgentDefinition,
)

FIELDS = ("description", "tools", "model", "max_iterations", "instructions")
"""What an update may change; the name stays (conversations record it as their type)."""
MAX_INSTRUCTIONS_BYTES = MAX_FILE_BYTES
"""A workspace file holds at most this much in all, so team instructions get no more."""
MAX_TOOLS = 100


_require_admin = partial(require_admin, what="manage agent definitions")


def _no_nul(key: str, value: str) -> str:
    # Postgres text cannot hold NUL: refused here, not as a database error.
    if "\x00" in value:
        raise InvalidInput(f"{key} must not contain NUL characters.")
    return value


def _clean_name(name: Any) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise InvalidInput(
            "an agent name is 1 to 64 lowercase letters, digits, '-' or '_', starting with a "
            "letter or digit."
        )
    if any(builtin.name == name for builtin in BUILTINS):
        raise InvalidInput(f"{name!r} is a built-in agent; pick another name.")
    return name


def _clean_description(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput("description must not be empty: the parent's model chooses by it.")
    value = _no_nul("description", value.strip())
    if len(value) > MAX_DESCRIPTION_CHARS:
        raise InvalidInput(f"description is longer than {MAX_DESCRIPTION_CHARS} characters.")
    return value


def _clean_tools(value: Any) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list | tuple):
        raise InvalidInput("tools must be a list of tool names, or null for the parent's tools.")
    if len(value) > MAX_TOOLS:
        raise InvalidInput(f"tools lists more than {MAX_TOOLS} names.")
    for index, tool in enumerate(value, start=1):
        if not isinstance(tool, str) or not TOOL_NAME.fullmatch(tool):
            raise InvalidInput(f"tools entry {index} is not a tool name.")
        if not tool.startswith(MCP_PREFIX) and get_tool(tool) is None:
            raise InvalidInput(f"tools entry {index}: there is no tool named {tool!r}.")
    return list(dict.fromkeys(value))


def _clean_model(value: Any, team: Team) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput("model must be a model profile name, or empty for the parent's.")
    value = _no_nul("model", value.strip())
    if len(value) > MAX_MODEL_CHARS:
        raise InvalidInput(f"model is longer than {MAX_MODEL_CHARS} characters.")
    if value:
        try:
            profile_get(value, team.pk)
        except UnknownProfileError:
            raise InvalidInput(f"there is no model profile named {value!r}.") from None
    return value


def _clean_iterations(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ITERATIONS:
        raise InvalidInput(
            f"max_iterations must be a whole number from 1 to {MAX_ITERATIONS}, or null."
        )
    return value


def _clean_instructions(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput("instructions must be text.")
    value = _no_nul("instructions", value.strip())
    if len(value.encode("utf-8", "surrogatepass")) > MAX_INSTRUCTIONS_BYTES:
        raise InvalidInput(f"instructions are larger than {MAX_INSTRUCTIONS_BYTES // 1024} KB.")
    return value


def _clean(team: Team, fields: dict[str, Any]) -> dict[str, Any]:
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise InvalidInput(f"unknown agent fields: {', '.join(sorted(unknown))}.")
    cleaners = {
        "description": _clean_description,
        "tools": _clean_tools,
        "model": lambda value: _clean_model(value, team),
        "max_iterations": _clean_iterations,
        "instructions": _clean_instructions,
    }
    return {key: cleaners[key](value) for key, value in fields.items()}


def _describe(agent: TeamAgent) -> dict[str, Any]:
    return {"name": agent.name, **{key: getattr(agent, key) for key in FIELDS}}


def _get(team: Team, name: str, *, lock: bool = False) -> TeamAgent:
    rows = TeamAgent.objects.select_for_update() if lock else TeamAgent.objects
    agent = rows.filter(team=team, name=name).first()
    if agent is None:
        raise NotFound(f"no agent definition named {name!r}.")
    return agent


def team_agent_list(*, team: Team) -> list[TeamAgent]:
    """The team's definitions by name. The caller has checked that its user is a member."""
    return list(TeamAgent.objects.filter(team=team).order_by("name"))


def team_agent_get(*, team: Team, name: str) -> TeamAgent:
    """One definition by name (NotFound otherwise); the caller has checked membership."""
    return _get(team, name)


def team_agent_create(
    *, by, team: Team, name: str, description: str, tools: list[str] | None = None,
    model: str = "", max_iterations: int | None = None, instructions: str = "",
) -> TeamAgent:  # fmt: skip
    """Add a definition; its name is unique within the team (Conflict otherwise) and never a
    built-in's."""
    _require_admin(by, team)
    name = _clean_name(name)
    cleaned = _clean(
        team,
        {
            "description": description, "tools": tools, "model": model,
            "max_iterations": max_iterations, "instructions": instructions,
        },
    )  # fmt: skip
    with transaction.atomic():
        try:
            with transaction.atomic():
                agent = TeamAgent.objects.create(team=team, name=name, **cleaned)
        except IntegrityError:
            raise Conflict(f"an agent definition named {name!r} already exists.") from None
        audit_record(actor=by, kind="agent.created", team=team, target=name, data=_describe(agent))
    return agent


def team_agent_update(*, by, team: Team, name: str, **fields: Any) -> TeamAgent:
    """Change some of a definition's fields (FIELDS); the name stays. Children already
    running keep what they were spawned with; new children get the new values."""
    _require_admin(by, team)
    cleaned = _clean(team, fields)
    with transaction.atomic():
        agent = _get(team, name, lock=True)
        before = _describe(agent)
        for key, value in cleaned.items():
            setattr(agent, key, value)
        agent.save()
        audit_record(
            actor=by, kind="agent.updated", team=team, target=name,
            data={"before": before, "after": _describe(agent)},
        )  # fmt: skip
    return agent


def team_agent_delete(*, by, team: Team, name: str) -> None:
    """Remove a definition. A parent asking for it afterwards gets an error observation
    naming the types that remain; children already running are not stopped."""
    _require_admin(by, team)
    with transaction.atomic():
        agent = _get(team, name, lock=True)
        data = _describe(agent)
        agent.delete()
        audit_record(actor=by, kind="agent.deleted", team=team, target=name, data=data)


def team_agent_definitions(team_id: int) -> tuple[AgentDefinition, ...]:
    """The team's definitions as the runner merges them (definitions.available_definitions
    `team=`), by name. One query; no permission check: the runner acts for the team."""
    rows = TeamAgent.objects.filter(team_id=team_id).order_by("name")
    return tuple(
        AgentDefinition(
            name=row.name,
            description=row.description,
            tools=None if row.tools is None else tuple(row.tools),
            model=row.model or None,
            max_iterations=row.max_iterations,
            instructions=row.instructions,
            source="team",
        )
        for row in rows
    )
