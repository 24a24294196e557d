"""Websocket authentication: the browser session, or a bearer token for API clients.

A socket is authenticated at its handshake and may stay open for days, so `current_user`
answers again, from the database, whether the credentials it opened with still hold
(consumers ask when canvas.access_signals says something changed).
"""

from __future__ import annotations

from importlib import import_module
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from django.conf import settings
from django.contrib import auth
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser

from teams.throttle import Throttled
from teams.tokens import api_token_authenticate, api_token_id, api_token_still_valid


def _bearer(scope) -> str | None:
    for key, value in scope.get("headers", []):
        if key == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token:
                return token.strip()
    query = parse_qs(scope.get("query_string", b"").decode())
    return query.get("token", [None])[0]


def client_address(scope: dict[str, Any]) -> str | None:
    """teams.throttle.client_address for a websocket: the peer, or behind our proxy
    (CANVAS_BEHIND_PROXY) the last X-Forwarded-For entry, the one the proxy appended."""
    if getattr(settings, "CANVAS_BEHIND_PROXY", False):
        for key, value in scope.get("headers", []):
            if key == b"x-forwarded-for":
                last = value.decode("latin-1").split(",")[-1].strip()
                if last:
                    return last[:64]
    client = scope.get("client")
    return str(client[0])[:64] if client else None


@database_sync_to_async
def _authenticate(raw: str, client: str | None) -> tuple[AbstractBaseUser, int | None] | None:
    user = api_token_authenticate(raw, client=client)
    return None if user is None else (user, api_token_id(raw))


class TokenAuthMiddleware(BaseMiddleware):
    """A bad token counts against the client's address like on the API (teams.throttle); a
    blocked address is marked in the scope and the consumer refuses it (CloseCode.THROTTLED)."""

    async def __call__(self, scope, receive, send):
        token = _bearer(scope)
        if token:
            try:
                found = await _authenticate(token, client_address(scope))
            except Throttled:
                found, scope = None, {**scope, "auth_throttled": True}
            if found is not None:
                user, token_id = found
                scope = {**scope, "user": user, "auth_via_token": True, "api_token_id": token_id}
        return await super().__call__(scope, receive, send)


def auth_stack(inner):
    """Session auth first; a valid bearer token overrides it."""
    return AuthMiddlewareStack(TokenAuthMiddleware(inner))


def current_user(scope: dict[str, Any]) -> AbstractBaseUser | None:
    """The socket's user as the database has it now, or None when the credentials it opened
    with no longer hold: its token revoked, expired or deleted; or the user deactivated or
    deleted, its session ended (logout) or its password changed. Sync: call it off the loop."""
    user = scope.get("user")
    if user is None or not user.is_authenticated:
        return None
    if scope.get("auth_via_token"):
        if not api_token_still_valid(scope["api_token_id"]):
            return None
        return get_user_model().objects.filter(pk=user.pk, is_active=True).first()
    session_key = getattr(scope.get("session"), "session_key", None)
    if session_key is None:
        return None
    # A fresh store (the scope's session was read once, at the handshake), checked the way
    # Django checks a request's: same user, active, session hash matching the password.
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key=session_key)
    fresh = auth.get_user(SimpleNamespace(session=store))
    if not fresh.is_authenticated or fresh.pk != user.pk:
        return None
    return fresh
