"""A team's skills (instructions its agents load): every member lists and reads them; admins
and owners add, change and delete them (skills.services checks and audits each change)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema, Status
from pydantic import Field

from common.inputs import Text
from skills import catalog, services
from skills.models import TeamSkill
from teams.permissions import Action
from teams.services import team_get_for

from . import ERRORS

router = Router(tags=["skills"])


class SkillFields(Schema):
    """Fields to change; one left out (or null) keeps its value."""

    description: Text(catalog.MAX_DESCRIPTION_CHARS) | None = Field(
        default=None, description="What the model reads when it decides to load the skill."
    )
    triggers: list[Text(64)] | None = Field(
        default=None, max_length=catalog.MAX_TRIGGERS,
        description="Words or phrases: a person's message holding one loads the skill.",
    )  # fmt: skip
    body: Text(catalog.MAX_BODY_BYTES) | None = Field(
        default=None, description="The instructions the agent reads."
    )


class SkillIn(SkillFields):
    name: Text(64, min_length=1) = Field(description="Lowercase letters, digits, - and _.")
    description: Text(catalog.MAX_DESCRIPTION_CHARS, min_length=1)
    body: Text(catalog.MAX_BODY_BYTES, min_length=1)


class SkillOut(Schema):
    name: str
    description: str
    triggers: list[str]
    body: str
    created_at: datetime
    updated_at: datetime


def _skill(skill: TeamSkill) -> dict[str, Any]:
    return {"name": skill.name, "description": skill.description,
            "triggers": list(skill.triggers or []), "body": skill.body,
            "created_at": skill.created_at, "updated_at": skill.updated_at}  # fmt: skip


@router.get("/{team_id}/skills", response={200: list[SkillOut], **ERRORS})
def skill_list(request: HttpRequest, team_id: int):
    team = team_get_for(request.user, team_id, Action.VIEW)
    return [_skill(s) for s in services.skill_list(team=team)]


@router.post("/{team_id}/skills", response={201: SkillOut, **ERRORS})
def skill_create(request: HttpRequest, team_id: int, body: SkillIn):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    skill = services.skill_create(by=request.user, team=team, **body.model_dump())
    return Status(201, _skill(skill))


@router.get("/{team_id}/skills/{name}", response={200: SkillOut, **ERRORS})
def skill_get(request: HttpRequest, team_id: int, name: Text(64)):
    team = team_get_for(request.user, team_id, Action.VIEW)
    return _skill(services.skill_get(team=team, name=name))


@router.api_operation(["PUT", "PATCH"], "/{team_id}/skills/{name}",
                      response={200: SkillOut, **ERRORS})  # fmt: skip
def skill_update(request: HttpRequest, team_id: int, name: Text(64), body: SkillFields):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    skill = services.skill_update(by=request.user, team=team, name=name, **body.model_dump())
    return _skill(skill)


@router.delete("/{team_id}/skills/{name}", response={204: None, **ERRORS})
def skill_delete(request: HttpRequest, team_id: int, name: Text(64)):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    services.skill_delete(by=request.user, team=team, name=name)
    return Status(204, None)
