"""Throttling authentication: who is asking (the client address) and the API-token counter.

Logins (the login page and /admin/) are locked by django-axes (settings "Throttling"): after
AXES_FAILURE_LIMIT failures for one username, or from one address, further attempts are
refused for the cool-off, the right password included. This module gives axes the address
and audits each lock-out once.

API tokens have no username to count against before they are known (and a real token is 256
random bits, so guessing one account's token is hopeless); what a flood of bad tokens costs is
per address. So unknown, revoked or expired tokens count per client address in Django's cache
(Redis in production, shared by every process); at CANVAS_TOKEN_FAILURE_LIMIT within the
cool-off the address is blocked for CANVAS_TOKEN_COOLOFF_SECONDS, good tokens included, and
the block is audited.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.dispatch import receiver
from redis.exceptions import RedisError

from common.errors import ServiceError

from .audit import audit_record

LOCKOUT_KIND = "auth.lockout"
CACHE_DOWN = (RedisError, OSError)
"""A shared cache that is down fails the token throttle open: refusing every API call while
Redis restarts would turn a brief outage into a full one (logins stay locked by axes, in the
database)."""

logger = logging.getLogger(__name__)


class Throttled(ServiceError):
    """Too many failed attempts from this client; try again after `retry_after` seconds."""

    status = 429
    code = "throttled"

    def __init__(self, detail: str, *, retry_after: int) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


def client_address(request) -> str | None:
    """The client's address: REMOTE_ADDR, or behind a proxy (CANVAS_BEHIND_PROXY) the last
    X-Forwarded-For entry, the one our proxy appended; earlier entries are the client's to
    invent. None for a request that came from no network (a test client's force_login)."""
    meta = request.META
    if getattr(settings, "CANVAS_BEHIND_PROXY", False):
        forwarded = [a.strip() for a in meta.get("HTTP_X_FORWARDED_FOR", "").split(",")]
        if forwarded and forwarded[-1]:
            return forwarded[-1][:64]
    return (meta.get("REMOTE_ADDR") or "")[:64] or None


# ---- API tokens ---------------------------------------------------------------------------------


def _failures_key(address: str) -> str:
    return f"throttle:token:failures:{address}"


def _block_key(address: str) -> str:
    return f"throttle:token:blocked:{address}"


def token_throttle_check(address: str) -> None:
    """Raise Throttled while the address is blocked."""
    try:
        until = cache.get(_block_key(address))
    except CACHE_DOWN as exc:
        logger.warning("token throttle skipped: the cache is unreachable (%s)", exc)
        return
    if until is not None and until > time.time():
        retry = max(1, math.ceil(until - time.time()))
        raise Throttled(
            f"too many invalid API tokens from this address; try again in {retry} s.",
            retry_after=retry,
        )


def token_failure_record(address: str) -> None:
    """Count one bad token from the address; the one that reaches the limit blocks it."""
    try:
        _count_failure(address)
    except CACHE_DOWN as exc:
        logger.warning("bad token not counted: the cache is unreachable (%s)", exc)


def _count_failure(address: str) -> None:
    cooloff = float(settings.CANVAS_TOKEN_COOLOFF_SECONDS)
    key = _failures_key(address)
    cache.add(key, 0, timeout=cooloff)  # the window starts with the first failure
    try:
        failures = cache.incr(key)
    except ValueError:  # expired between add and incr: this failure opens a new window
        cache.set(key, 1, timeout=cooloff)
        failures = 1
    if failures == settings.CANVAS_TOKEN_FAILURE_LIMIT:
        cache.set(_block_key(address), time.time() + cooloff, timeout=cooloff)
        cache.delete(key)
        audit_record(
            actor=None, kind=LOCKOUT_KIND, target=f"API tokens from {address}",
            data={"via": "api_token", "address": address, "failures": failures,
                  "cooloff_seconds": cooloff},
        )  # fmt: skip


def token_throttle_reset(address: str) -> None:
    cache.delete_many([_failures_key(address), _block_key(address)])


# ---- Logins (django-axes) -----------------------------------------------------------------------


def _login_lockout_audited(username: str, address: str) -> bool:
    """Axes signals again for every attempt refused during a lock-out; audit only the first."""
    cooloff = settings.AXES_COOLOFF_TIME.total_seconds()
    return not cache.add(f"throttle:login:audited:{username}:{address}", 1, timeout=cooloff)


def _on_login_lockout(
    sender: Any, request, username: str | None, ip_address: str | None, **_
) -> None:
    username, ip_address = username or "", ip_address or "unknown"
    if _login_lockout_audited(username, ip_address):
        return
    audit_record(
        actor=None, kind=LOCKOUT_KIND, target=f"login {username!r} from {ip_address}"[:255],
        data={"via": "login", "username": username[:150], "address": ip_address,
              "path": request.path[:200] if request is not None else "",
              "cooloff_seconds": settings.AXES_COOLOFF_TIME.total_seconds()},
    )  # fmt: skip


def connect_lockout_audit() -> None:
    """Called from TeamsConfig.ready(): axes imports models, so not at import time here."""
    from axes.signals import user_locked_out

    receiver(user_locked_out, dispatch_uid="teams.throttle.lockout_audit")(_on_login_lockout)
