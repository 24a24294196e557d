"""Personal API tokens: the plain token appears once, in the creation response."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.http import HttpRequest
from django.utils import timezone
from ninja import Router, Schema, Status
from pydantic import Field

from common.inputs import Text
from teams.models import ApiToken
from teams.tokens import api_token_create, api_token_revoke

from . import ERRORS

router = Router(tags=["tokens"])


class TokenIn(Schema):
    name: Text(100, min_length=1)
    expires_in_days: int | None = Field(default=None, ge=1, le=3650)


class TokenOut(Schema):
    id: int
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime | None
    revoked_at: datetime | None


class NewTokenOut(TokenOut):
    token: str
    """The only time the plain token is shown."""


def _out(t: ApiToken) -> dict:
    return {
        "id": t.pk, "name": t.name, "prefix": t.prefix, "created_at": t.created_at,
        "last_used_at": t.last_used_at, "expires_at": t.expires_at, "revoked_at": t.revoked_at,
    }  # fmt: skip


@router.get("", response={200: list[TokenOut], **ERRORS})
def token_list(request: HttpRequest):
    return [_out(t) for t in ApiToken.objects.filter(user=request.user)]


@router.post("", response={201: NewTokenOut, **ERRORS})
def token_create(request: HttpRequest, body: TokenIn):
    expires = (
        timezone.now() + timedelta(days=body.expires_in_days) if body.expires_in_days else None
    )
    token, raw = api_token_create(user=request.user, name=body.name, expires_at=expires)
    return Status(201, {**_out(token), "token": raw})


@router.delete("/{token_id}", response={204: None, **ERRORS})
def token_revoke(request: HttpRequest, token_id: int):
    api_token_revoke(user=request.user, token_id=token_id)
    return Status(204, None)
