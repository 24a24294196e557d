"""Team secrets. Values go in and never come out: responses carry names and timestamps only.

Any member (viewers included) may list names; writing needs Action.ADMINISTER.
"""

from __future__ import annotations

from datetime import datetime

from django.http import HttpRequest
from ninja import Router, Schema, Status
from pydantic import Field

from common.inputs import Key, SecretText, Text
from teams import secrets
from teams.models import Secret
from teams.permissions import Action
from teams.services import team_get_for

from . import ERRORS

router = Router(tags=["secrets"])


# SecretStr keeps the value out of reprs, so a logged or echoed request body shows "**********".
class SecretIn(Schema):
    name: Text(200) = Field(description="An environment-variable name, e.g. API_KEY.")
    # Bounds only the request: the service's own limit is in bytes, and it says so.
    value: SecretText(2 * secrets.MAX_VALUE_BYTES) = Field(
        description="Write-only; never returned."
    )
    description: Text(secrets.MAX_DESCRIPTION_CHARS) = ""


class SecretUpdateIn(Schema):
    value: SecretText(2 * secrets.MAX_VALUE_BYTES) | None = Field(
        default=None, description="Write-only; omit to keep."
    )
    description: Text(secrets.MAX_DESCRIPTION_CHARS) | None = None


class SecretOut(Schema):
    name: str
    description: str
    created_at: datetime
    updated_at: datetime
    updated_by: str | None = None


def _out(secret: Secret | secrets.SecretInfo) -> dict:
    updated_by = secret.updated_by
    if updated_by is not None and not isinstance(updated_by, str):
        updated_by = updated_by.get_username()
    return {
        "name": secret.name,
        "description": secret.description,
        "created_at": secret.created_at,
        "updated_at": secret.updated_at,
        "updated_by": updated_by,
    }


@router.post("/{team_id}/secrets", response={201: SecretOut, **ERRORS})
def secret_create(request: HttpRequest, team_id: int, body: SecretIn):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    secret = secrets.secret_create(
        by=request.user, team=team, name=body.name,
        value=body.value.get_secret_value(), description=body.description,
    )  # fmt: skip
    return Status(201, _out(secret))


@router.get("/{team_id}/secrets", response={200: list[SecretOut], **ERRORS})
def secret_list(request: HttpRequest, team_id: int):
    team = team_get_for(request.user, team_id, Action.VIEW)
    return [_out(s) for s in secrets.secret_list(team)]


@router.put("/{team_id}/secrets/{name}", response={200: SecretOut, **ERRORS})
def secret_update(request: HttpRequest, team_id: int, name: Key, body: SecretUpdateIn):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    secret = secrets.secret_update(
        by=request.user, team=team, name=name,
        value=body.value.get_secret_value() if body.value is not None else None,
        description=body.description,
    )  # fmt: skip
    return _out(secret)


@router.delete("/{team_id}/secrets/{name}", response={204: None, **ERRORS})
def secret_delete(request: HttpRequest, team_id: int, name: Key):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    secrets.secret_delete(by=request.user, team=team, name=name)
    return Status(204, None)
