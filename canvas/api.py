"""The JSON API under /api/: parse, call one service, shape the answer.

Errors are always JSON {error, detail} with the status that fits: 400 bad input, 401 no or
bad credentials, 404 not found (or not yours), 409 a state conflict.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI, Schema, Status
from ninja.errors import AuthenticationError, HttpError
from ninja.errors import ValidationError as NinjaValidationError
from ninja.security import HttpBearer, django_auth
from pydantic import Field

from conversations import store
from conversations.errors import ServiceError
from conversations.models import Conversation
from orchestration import services
from teams.tokens import api_token_authenticate

from .access import Action, conversation_for, conversations_visible_to

MAX_PAGE = 1000
ERROR_CODES = {
    400: "invalid_input",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
}


class BearerToken(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str):
        user = api_token_authenticate(token)
        if user is not None:
            request.user = user
        return user


api = NinjaAPI(
    title="Agent Canvas API",
    version="1",
    auth=[BearerToken(), django_auth],
    urls_namespace="api",
)


def _error(request: HttpRequest, status: int, error: str, detail: Any) -> HttpResponse:
    return api.create_response(request, {"error": error, "detail": detail}, status=status)


@api.exception_handler(ServiceError)
def _service_error(request: HttpRequest, exc: ServiceError) -> HttpResponse:
    return _error(request, exc.status, exc.code, exc.detail)


def _field(loc) -> str | None:
    parts = [str(p) for p in loc]
    while parts and parts[0] in {"body", "query", "path"}:  # where, not what
        parts.pop(0)
    return ".".join(parts) or None


@api.exception_handler(NinjaValidationError)
def _validation_error(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    detail = [{"field": _field(e.get("loc", ())), "message": e.get("msg")} for e in exc.errors]
    return _error(request, 400, "invalid_input", detail)


@api.exception_handler(AuthenticationError)
def _auth_error(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return _error(request, 401, "unauthorized", "a valid API token or session is required.")


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    return _error(request, exc.status_code, ERROR_CODES.get(exc.status_code, "error"), str(exc))


class ConversationIn(Schema):
    prompt: str = Field(min_length=1, max_length=services.MAX_PROMPT_CHARS)
    model: str = Field(default="demo", min_length=1, max_length=200)
    workspace: str | None = Field(default=None, max_length=1000)
    title: str | None = Field(default=None, max_length=200)
    max_iterations: int | None = Field(default=None, ge=1, le=10_000)


class ConversationOut(Schema):
    id: uuid.UUID
    title: str
    status: str
    model: str
    workspace: str
    last_seq: int
    steps: int
    tokens_in: int
    tokens_out: int
    cost_usd: float
    created_at: datetime
    updated_at: datetime


class MessageIn(Schema):
    text: str = Field(min_length=1, max_length=services.MAX_PROMPT_CHARS)


class EventsOut(Schema):
    events: list[dict[str, Any]]
    next_seq: int
    """Pass as after_seq to continue; equals the last returned seq (or after_seq if none)."""


class ErrorOut(Schema):
    error: str
    detail: Any


def _out(c: Conversation) -> dict[str, Any]:
    return {
        "id": c.pk,
        "title": c.title,
        "status": c.status,
        "model": c.model,
        "workspace": c.workspace_path,
        "last_seq": c.last_seq,
        "steps": c.steps,
        "tokens_in": c.tokens_in,
        "tokens_out": c.tokens_out,
        "cost_usd": float(c.cost_usd),
        "created_at": c.created_at,
        "updated_at": c.updated_at,
    }


ERRORS = {400: ErrorOut, 401: ErrorOut, 404: ErrorOut, 409: ErrorOut}


@api.post("/conversations", response={201: ConversationOut, **ERRORS})
def conversation_create(request: HttpRequest, body: ConversationIn):
    conversation = services.conversation_create(
        owner=request.user,
        prompt=body.prompt,
        model=body.model,
        workspace=body.workspace,
        title=body.title,
        max_iterations=body.max_iterations,
    )
    return Status(201, _out(conversation))


@api.get("/conversations", response={200: list[ConversationOut], **ERRORS})
def conversation_list(request: HttpRequest, limit: int = 100, offset: int = 0):
    limit = max(1, min(limit, MAX_PAGE))
    rows = conversations_visible_to(request.user).order_by("-created_at")[offset : offset + limit]
    return [_out(c) for c in rows]


@api.get("/conversations/{conversation_id}", response={200: ConversationOut, **ERRORS})
def conversation_get(request: HttpRequest, conversation_id: str):
    return _out(conversation_for(request.user, conversation_id, Action.VIEW))


@api.get("/conversations/{conversation_id}/events", response={200: EventsOut, **ERRORS})
def conversation_events(
    request: HttpRequest, conversation_id: str, after_seq: int = 0, limit: int = 500
):
    if after_seq < 0:
        raise HttpError(400, "after_seq must be >= 0")
    conversation = conversation_for(request.user, conversation_id, Action.VIEW)
    limit = max(1, min(limit, MAX_PAGE))
    events = store.load(conversation.pk, after_seq=after_seq, limit=limit)
    return {
        "events": [e.as_record() for e in events],
        "next_seq": events[-1].seq if events else after_seq,
    }


@api.post("/conversations/{conversation_id}/messages", response={201: dict, **ERRORS})
def conversation_message(request: HttpRequest, conversation_id: str, body: MessageIn):
    conversation = conversation_for(request.user, conversation_id, Action.ACT)
    seq = services.conversation_post_message(
        conversation_id=conversation.pk, text=body.text, sender=request.user
    )
    conversation.refresh_from_db()
    return Status(201, {"seq": seq, "status": conversation.status})


@api.post("/conversations/{conversation_id}/run", response={202: dict, **ERRORS})
def conversation_run(request: HttpRequest, conversation_id: str):
    conversation = conversation_for(request.user, conversation_id, Action.ACT)
    services.conversation_run(conversation_id=conversation.pk, by=request.user)
    return Status(202, {"status": "running"})


@api.post("/conversations/{conversation_id}/pause", response={200: dict, **ERRORS})
def conversation_pause(request: HttpRequest, conversation_id: str):
    conversation = conversation_for(request.user, conversation_id, Action.ACT)
    services.conversation_pause(conversation_id=conversation.pk, by=request.user)
    return Status(200, {"status": "paused"})
