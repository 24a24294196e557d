"""Personal API tokens: creation (plain value returned once) and authentication."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Q
from django.utils import timezone

from common.errors import InvalidInput, NotFound

from .audit import audit_record
from .models import ApiToken
from .throttle import token_failure_record, token_throttle_check

TOKEN_PREFIX = "cnv_"
LAST_USED_RESOLUTION = timedelta(minutes=1)


def _hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def api_token_create(
    *, user: AbstractBaseUser, name: str = "default", expires_at: datetime | None = None
) -> tuple[ApiToken, str]:
    """Create a token; returns the row and the plain token, which is never stored."""
    name = (name or "").strip()[:100]
    if not name:
        raise InvalidInput("a token needs a name.")
    if expires_at is not None and expires_at <= timezone.now():
        raise InvalidInput("the expiry must be in the future.")
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, name=name, prefix=raw[:12], key_hash=_hash(raw), expires_at=expires_at
    )
    audit_record(actor=user, kind="token.created", target=f"{name} ({token.prefix}…)")
    return token, raw


def api_token_revoke(*, user: AbstractBaseUser, token_id: int) -> ApiToken:
    """Revoke one of the user's own tokens. Revoking twice is harmless."""
    token = ApiToken.objects.filter(user=user, pk=token_id).first()
    if token is None:
        raise NotFound("no such token.")
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        audit_record(actor=user, kind="token.revoked", target=f"{token.name} ({token.prefix}…)")
    return token


def api_token_authenticate(raw: str, *, client: str | None = None) -> AbstractBaseUser | None:
    """The active user owning `raw`, or None when unknown, revoked or expired.

    With `client` (the caller's address, teams.throttle.client_address) a failure counts
    against that address, and a bad token from a blocked address raises
    teams.throttle.Throttled. A good token is accepted whatever its address: the block
    throttles failures only, so bad tokens sent from a shared address lock out no one."""
    user = _token_user(raw)
    if user is not None or client is None:
        return user
    token_throttle_check(client)
    token_failure_record(client)
    return None


def _token_user(raw: str) -> AbstractBaseUser | None:
    if not raw or not raw.startswith(TOKEN_PREFIX):
        return None
    token = ApiToken.objects.select_related("user").filter(key_hash=_hash(raw)).first()
    now = timezone.now()
    if token is None or token.revoked_at is not None:
        return None
    if token.expires_at is not None and token.expires_at <= now:
        return None
    if not token.user.is_active:
        return None
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user


def api_token_id(raw: str) -> int | None:
    """The id of the token whose plain value is `raw`, whatever its state."""
    if not raw or not raw.startswith(TOKEN_PREFIX):
        return None
    return ApiToken.objects.filter(key_hash=_hash(raw)).values_list("pk", flat=True).first()


def api_token_still_valid(token_id: int) -> bool:
    """Would this token still authenticate (not revoked, not expired, its user active)? For
    connections that outlive the request that authenticated them: open websockets."""
    return (
        ApiToken.objects.filter(pk=token_id, revoked_at__isnull=True, user__is_active=True)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()))
        .exists()
    )
