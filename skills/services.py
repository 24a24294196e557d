"""A team's own skills: every member reads them (their agents load them); admins and owners
create, change and delete them, audited ("skill.created", "skill.updated", "skill.deleted").
The value rules are a SKILL.md file's (skills.catalog), so a skill means the same wherever it
was written."""

from __future__ import annotations

from functools import partial
from typing import Any

from django.db import IntegrityError, transaction

from common.errors import Conflict, InvalidInput, NotFound
from teams.audit import audit_record
from teams.models import Team
from teams.permissions import acting_user, require_admin

from . import catalog
from .models import TeamSkill

FIELDS = ("description", "triggers", "body")
"""What an update may change; the name stays (agents may have loaded it by name)."""


_require_admin = partial(require_admin, what="manage skills")


def _cleaned(**given: Any) -> dict[str, Any]:
    cleaners = {"description": catalog.clean_description, "body": catalog.clean_body,
                "triggers": lambda v: list(catalog.clean_triggers(v))}  # fmt: skip
    try:
        return {key: cleaners[key](value) for key, value in given.items()}
    except catalog.SkillError as exc:
        raise InvalidInput(str(exc)) from None


def _describe(skill: TeamSkill) -> dict[str, Any]:
    return {"name": skill.name, "description": skill.description, "triggers": skill.triggers,
            "body_chars": len(skill.body)}  # fmt: skip


def skill_list(*, team: Team) -> list[TeamSkill]:
    return list(TeamSkill.objects.filter(team=team).order_by("name"))


def skill_get(*, team: Team, name: str) -> TeamSkill:
    skill = TeamSkill.objects.filter(team=team, name=name).first()
    if skill is None:
        raise NotFound(f"the team has no skill named {name!r}.")
    return skill


def skill_create(*, by, team: Team, name: str, description: str, body: str,
                 triggers: list[str] | None = None) -> TeamSkill:  # fmt: skip
    _require_admin(by, team)
    try:
        name = catalog.clean_name(name)
    except catalog.SkillError as exc:
        raise InvalidInput(str(exc)) from None
    values = _cleaned(description=description, body=body, triggers=triggers or [])
    skill = TeamSkill(team=team, name=name, updated_by=acting_user(by), **values)
    try:
        with transaction.atomic():
            skill.save()
            audit_record(actor=by, kind="skill.created", team=team, target=name,
                         data=_describe(skill))  # fmt: skip
    except IntegrityError:
        raise Conflict(f"the team already has a skill named {name!r}.") from None
    return skill


def skill_update(*, by, team: Team, name: str, **given: Any) -> TeamSkill:
    """Change some FIELDS; one left out (or None) keeps its value."""
    _require_admin(by, team)
    unknown = sorted(set(given) - set(FIELDS))
    if unknown:
        raise InvalidInput(f"unknown skill fields: {', '.join(unknown)}.")
    values = _cleaned(**{k: v for k, v in given.items() if v is not None})
    with transaction.atomic():
        skill = TeamSkill.objects.select_for_update().filter(team=team, name=name).first()
        if skill is None:
            raise NotFound(f"the team has no skill named {name!r}.")
        before = _describe(skill)
        for key, value in values.items():
            setattr(skill, key, value)
        skill.updated_by = acting_user(by)
        skill.save()
        audit_record(actor=by, kind="skill.updated", team=team, target=name,
                     data={"before": before, "after": _describe(skill)})  # fmt: skip
    return skill


def skill_delete(*, by, team: Team, name: str) -> None:
    _require_admin(by, team)
    with transaction.atomic():
        skill = TeamSkill.objects.select_for_update().filter(team=team, name=name).first()
        if skill is None:
            raise NotFound(f"the team has no skill named {name!r}.")
        data = _describe(skill)
        skill.delete()
        audit_record(actor=by, kind="skill.deleted", team=team, target=name, data=data)
