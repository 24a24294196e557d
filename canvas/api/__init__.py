"""The JSON API under /api/: parse, call one service, shape the answer.

Errors are always JSON {error, detail} with the status that fits: 400 bad input, 401 no or
bad credentials, 403 a role too weak, 404 not found (or not yours), 409 a state conflict,
422 an Idempotency-Key reused for another request, 429 too many bad tokens from the caller's
address (with Retry-After), 500 anything unforeseen (logged; the answer says nothing more),
503 `service_unavailable` while the database or broker cannot be reached (with Retry-After;
the detail names which, canvas.outage).
Errors made outside the routes (an unknown method, a failing middleware) are turned into the
same shape by canvas.api.middleware. Each resource lives in its own router module.
"""

from __future__ import annotations

import logging
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI, Schema
from ninja.errors import AuthenticationError, HttpError
from ninja.errors import ValidationError as NinjaValidationError
from ninja.security import HttpBearer, django_auth

from canvas.outage import down_dependency, unavailable_detail, with_retry_after
from canvas.outbound import scrub
from common.errors import ServiceError
from teams.throttle import Throttled, client_address
from teams.tokens import api_token_authenticate

ERROR_CODES = {
    400: "invalid_input",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    422: "idempotency_key_reused",
    429: "throttled",
    500: "internal_error",
    503: "service_unavailable",
}
INTERNAL_ERROR_DETAIL = "an internal error occurred; it has been logged."

logger = logging.getLogger(__name__)


class BearerToken(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str):
        # A blocked address raises Throttled here: a 429, not a fall-through to the session.
        user = api_token_authenticate(token, client=client_address(request))
        if user is not None:
            request.user = user
        return user


class ErrorOut(Schema):
    error: str
    detail: Any


ERRORS = {
    400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut, 429: ErrorOut,
    500: ErrorOut, 503: ErrorOut,
}  # fmt: skip

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
    # exc.detail is redacted as it is read (canvas.outbound); the others are redacted here.
    return _error(request, exc.status, exc.code, exc.detail)


@api.exception_handler(Throttled)
def _throttled(request: HttpRequest, exc: Throttled) -> HttpResponse:
    response = _error(request, exc.status, exc.code, exc.detail)
    response["Retry-After"] = str(exc.retry_after)
    return response


def _field(loc) -> str | None:
    """The offending field's name: ninja's location ("query", "path", "header", "body")
    comes first, and for a body the view argument's name next, before the field. A query
    parameter may itself be called "path"."""
    parts = [str(p) for p in loc]
    where = parts.pop(0) if parts and parts[0] in {"body", "query", "path", "header"} else ""
    if where == "body" and len(parts) > 1:
        parts.pop(0)
    return ".".join(parts) or None


@api.exception_handler(NinjaValidationError)
def _validation_error(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    detail = [{"field": _field(e.get("loc", ())), "message": e.get("msg")} for e in exc.errors]
    return _error(request, 400, "invalid_input", scrub(detail))


@api.exception_handler(AuthenticationError)
def _auth_error(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return _error(request, 401, "unauthorized", "a valid API token or session is required.")


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    code = ERROR_CODES.get(exc.status_code, "error")
    return _error(request, exc.status_code, code, scrub(str(exc)))


@api.exception_handler(Http404)
def _not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return _error(request, 404, "not_found", "not found.")


@api.exception_handler(Exception)
def _unhandled(request: HttpRequest, exc: Exception) -> HttpResponse:
    if dependency := down_dependency(exc):
        # An outage, not a bug: the client retries, the log keeps one line without a trace.
        logger.warning("%s unreachable answering %s %s", dependency, request.method, request.path)
        response = _error(request, 503, "service_unavailable", unavailable_detail(dependency))
        return with_retry_after(response)
    # Whatever the route had written and committed stays; the client learns only that this
    # answer failed. The log (redacted by canvas.logging) keeps the traceback.
    logger.exception("unhandled error answering %s %s", request.method, request.path)
    return _error(request, 500, "internal_error", INTERNAL_ERROR_DETAIL)


def _register_routers() -> None:
    from . import (
        acp_agents,
        agents,
        automations,
        conversations,
        hooks,
        invitations,
        mcp_servers,
        policies,
        runs,
        secrets,
        skills,
        teams,
        tokens,
        usage,
        workspace,  # noqa: F401 - adds its routes to the conversations router
    )

    api.add_router("/conversations", conversations.router)
    api.add_router("/teams", teams.router)
    api.add_router("/teams", secrets.router)
    api.add_router("/teams", policies.router)
    api.add_router("/teams", agents.router)
    api.add_router("/teams", acp_agents.router)
    api.add_router("/teams", mcp_servers.router)
    api.add_router("/teams", hooks.router)
    api.add_router("/teams", automations.router)
    api.add_router("/teams", skills.router)
    api.add_router("/teams", usage.router)
    api.add_router("/teams", runs.router)
    api.add_router("/tokens", tokens.router)
    api.add_router("/invitations", invitations.router)


_register_routers()
