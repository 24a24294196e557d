"""Team hooks and the team's notification webhook. Admins and owners only, reads included:
hook commands and webhook URLs may reveal internals or carry credentials.

The webhook's signing secret appears in exactly one answer, the one that generated it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import Router, Schema, Status
from pydantic import Field

from common.inputs import Int, Text
from teams import hooks, notifications
from teams.models import Hook
from teams.permissions import Action
from teams.services import team_get_for

from . import ERRORS

router = Router(tags=["hooks"])

EVENTS_HELP = "One of PreToolUse, PostToolUse, UserPromptSubmit, Stop."


class HookIn(Schema):
    name: Text(64) = Field(description="Letters, digits and _ . -; unique in the team.")
    event: Text(32) = Field(description=EVENTS_HELP)
    command: Text(hooks.MAX_COMMAND_CHARS) = Field(
        description="Run with bash; reads the event as JSON on stdin."
    )
    matcher: Text(hooks.MAX_MATCHER_CHARS) = Field(
        default="", description="Regex on the tool name; empty: all tools."
    )
    timeout_seconds: Int() = Field(default=hooks.DEFAULT_TIMEOUT_SECONDS, description="1 to 300.")
    fail_closed: bool = Field(default=False, description="Block the step if the hook breaks.")
    enabled: bool = True
    position: Int() | None = Field(default=None, description="Run order; default: last.")


class HookUpdateIn(Schema):
    """Fields to change; a field left out (or null) keeps its value."""

    name: Text(64) | None = None
    event: Text(32) | None = Field(default=None, description=EVENTS_HELP)
    command: Text(hooks.MAX_COMMAND_CHARS) | None = None
    matcher: Text(hooks.MAX_MATCHER_CHARS) | None = None
    timeout_seconds: Int() | None = None
    fail_closed: bool | None = None
    enabled: bool | None = None
    position: Int() | None = None


class HookOut(Schema):
    id: int
    name: str
    event: str
    command: str
    matcher: str
    timeout_seconds: int
    fail_closed: bool
    enabled: bool
    position: int
    created_at: datetime
    updated_at: datetime


class NotificationIn(Schema):
    url: Text(notifications.MAX_URL_CHARS) = Field(
        description="http(s) URL the notifications are POSTed to."
    )
    regenerate_secret: bool = Field(
        default=False, description="Make a new signing secret (the old one stops working)."
    )


class NotificationOut(Schema):
    url: str | None
    """Null when the team has no webhook."""
    secret: str | None = None
    """The signing secret: only in the answer that generated it."""
    updated_at: datetime | None = None


def _hook(hook: Hook) -> dict[str, Any]:
    return {key: getattr(hook, key) for key in HookOut.model_fields}


def _notification(info: notifications.NotificationInfo | None) -> dict[str, Any]:
    if info is None:
        return {"url": None, "secret": None, "updated_at": None}
    return {"url": info.url, "secret": info.secret, "updated_at": info.updated_at}


@router.get("/{team_id}/hooks", response={200: list[HookOut], **ERRORS})
def hook_list(request: HttpRequest, team_id: int):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    return [_hook(h) for h in hooks.hook_list(by=request.user, team=team)]


@router.post("/{team_id}/hooks", response={201: HookOut, **ERRORS})
def hook_create(request: HttpRequest, team_id: int, body: HookIn):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    hook = hooks.hook_create(by=request.user, team=team, **body.model_dump())
    return Status(201, _hook(hook))


@router.put("/{team_id}/hooks/{hook_id}", response={200: HookOut, **ERRORS})
def hook_update(request: HttpRequest, team_id: int, hook_id: int, body: HookUpdateIn):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    hook = hooks.hook_update(by=request.user, team=team, hook_id=hook_id, **body.model_dump())
    return _hook(hook)


@router.delete("/{team_id}/hooks/{hook_id}", response={204: None, **ERRORS})
def hook_delete(request: HttpRequest, team_id: int, hook_id: int):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    hooks.hook_delete(by=request.user, team=team, hook_id=hook_id)
    return Status(204, None)


@router.get("/{team_id}/notifications", response={200: NotificationOut, **ERRORS})
def notification_get(request: HttpRequest, team_id: int):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    return _notification(notifications.notification_get(by=request.user, team=team))


@router.put("/{team_id}/notifications", response={200: NotificationOut, **ERRORS})
def notification_set(
    request: HttpRequest, response: HttpResponse, team_id: int, body: NotificationIn
):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    info = notifications.notification_set(
        by=request.user, team=team, url=body.url, regenerate_secret=body.regenerate_secret
    )
    if info.secret is not None:  # no cache or proxy may keep the one copy of the secret
        response["Cache-Control"] = "no-store"
    return _notification(info)


@router.delete("/{team_id}/notifications", response={204: None, **ERRORS})
def notification_clear(request: HttpRequest, team_id: int):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    notifications.notification_clear(by=request.user, team=team)
    return Status(204, None)
