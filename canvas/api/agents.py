"""A team's agent definitions (sub-agent types its admins write): every member lists and
reads them, since their agents spawn by these names; admins and owners add, replace and delete
them (orchestration.subagents.team_agents checks and audits each change)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema, Status
from pydantic import Field

from common.inputs import Int, Text
from orchestration.subagents import team_agents
from orchestration.subagents.definitions import (
    MAX_DESCRIPTION_CHARS,
    MAX_ITERATIONS,
    MAX_MODEL_CHARS,
)
from teams.models import TeamAgent
from teams.permissions import Action
from teams.services import team_get_for

from . import ERRORS

router = Router(tags=["agents"])


class AgentFields(Schema):
    """A definition's fields; PUT replaces them all (a field left out takes its default)."""

    description: Text(MAX_DESCRIPTION_CHARS) = Field(
        description="What the parent's model reads when it picks a sub-agent type."
    )
    tools: list[Text(64)] | None = Field(
        default=None, description="At most these tools (within the parent's); null: the parent's."
    )
    model: Text(MAX_MODEL_CHARS) = Field(
        default="", description="A model profile name; empty: the parent's model."
    )
    max_iterations: Int(ge=1, le=MAX_ITERATIONS) | None = Field(
        default=None, description="null: the child's share of the parent's budget."
    )
    instructions: Text(team_agents.MAX_INSTRUCTIONS_BYTES) = Field(
        default="", description="Appended to the child's system prompt."
    )


class AgentIn(AgentFields):
    name: Text(64, min_length=1) = Field(
        description="The subagent_type: lowercase letters, digits, - and _; not 'general'."
    )


class AgentOut(Schema):
    name: str
    description: str
    tools: list[str] | None
    model: str
    max_iterations: int | None
    instructions: str
    created_at: datetime
    updated_at: datetime


def _agent(agent: TeamAgent) -> dict[str, Any]:
    return {
        "name": agent.name,
        "description": agent.description,
        "tools": agent.tools,
        "model": agent.model,
        "max_iterations": agent.max_iterations,
        "instructions": agent.instructions,
        "created_at": agent.created_at,
        "updated_at": agent.updated_at,
    }


@router.get("/{team_id}/agents", response={200: list[AgentOut], **ERRORS})
def agent_list(request: HttpRequest, team_id: int):
    team = team_get_for(request.user, team_id, Action.VIEW)
    return [_agent(a) for a in team_agents.team_agent_list(team=team)]


@router.post("/{team_id}/agents", response={201: AgentOut, **ERRORS})
def agent_create(request: HttpRequest, team_id: int, body: AgentIn):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    agent = team_agents.team_agent_create(by=request.user, team=team, **body.model_dump())
    return Status(201, _agent(agent))


@router.get("/{team_id}/agents/{name}", response={200: AgentOut, **ERRORS})
def agent_get(request: HttpRequest, team_id: int, name: Text(64)):
    team = team_get_for(request.user, team_id, Action.VIEW)
    return _agent(team_agents.team_agent_get(team=team, name=name))


@router.put("/{team_id}/agents/{name}", response={200: AgentOut, **ERRORS})
def agent_update(request: HttpRequest, team_id: int, name: Text(64), body: AgentFields):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    agent = team_agents.team_agent_update(
        by=request.user, team=team, name=name, **body.model_dump()
    )
    return _agent(agent)


@router.delete("/{team_id}/agents/{name}", response={204: None, **ERRORS})
def agent_delete(request: HttpRequest, team_id: int, name: Text(64)):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    team_agents.team_agent_delete(by=request.user, team=team, name=name)
    return Status(204, None)
