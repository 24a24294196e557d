"""Websocket authentication: the browser session, or a bearer token for API clients."""

from __future__ import annotations

from urllib.parse import parse_qs

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware

from teams.tokens import api_token_authenticate


def _bearer(scope) -> str | None:
    for key, value in scope.get("headers", []):
        if key == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token:
                return token.strip()
    query = parse_qs(scope.get("query_string", b"").decode())
    return query.get("token", [None])[0]


class TokenAuthMiddleware(BaseMiddleware):
    async def __call__(self, scope, receive, send):
        token = _bearer(scope)
        if token:
            user = await database_sync_to_async(api_token_authenticate)(token)
            if user is not None:
                scope = {**scope, "user": user, "auth_via_token": True}
        return await super().__call__(scope, receive, send)


def auth_stack(inner):
    """Session auth first; a valid bearer token overrides it."""
    return AuthMiddlewareStack(TokenAuthMiddleware(inner))
