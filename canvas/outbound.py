"""Secret values out of the error texts the web process sends: API error bodies and the
errors pages show. Events reach people already redacted (the log's door); error texts are
built by services from input, configuration and whatever they touched, so they are redacted
where they leave instead.

`scrub` redacts every value this process has handled (common.secret_values) and the secrets
of every team the asking person belongs to, which this process may never have read: the
middleware keeps the request being answered in a context variable, and ServiceError.detail
calls `scrub` when an edge reads it (canvas.apps registers it). Redacting more teams than the
one the error is about costs nothing but a cached lookup; those are secrets of the person's
own teams, never shown to them anyway.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from django.http import HttpRequest, HttpResponse

from conversations.redaction import Redactor, redactor_for_team
from teams.models import Membership

from .logging import known_values_redactor

_request: ContextVar[HttpRequest | None] = ContextVar("canvas_outbound_request", default=None)


def _team_redactors(user: Any) -> list[Redactor]:
    """One cached redactor per team of the user's that has secrets (one query)."""
    if user is None or not getattr(user, "is_authenticated", False):
        return []
    teams = Membership.objects.filter(user_id=user.pk, team__secrets_version__gt=0)
    found = (
        redactor_for_team(team_id, version)
        for team_id, version in teams.values_list("team_id", "team__secrets_version")
    )
    return [r for r in found if r is not None]


def scrub(text: Any) -> Any:
    """`text` (a string, or JSON-like data) with secret values redacted, for the request
    being answered (every known value only, outside a request)."""
    request = _request.get()
    redactors = _team_redactors(getattr(request, "user", None)) if request is not None else []
    redactors.append(known_values_redactor())
    for redactor in redactors:
        if redactor:
            text = redactor.redact_value(text)
    return text


class OutboundRequestMiddleware:
    """Keeps the request being answered where `scrub` finds it. Reads request.user only when
    an error is shown, so API token users (set later, by the API's auth) count too."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = _request.set(request)
        try:
            return self.get_response(request)
        finally:
            _request.reset(token)
