"""Throttling authentication: who is asking (the client address) and failure counters.

Logins (the login page and /admin/) are locked by django-axes (settings "Throttling"): after
AXES_FAILURE_LIMIT failures for one username, or from one address, further attempts are
refused for the cool-off, the right password included. This module gives axes the address
and audits each lock-out once.

API tokens have no username to count against before they are known (and a real token is 256
random bits, so guessing one account's token is hopeless); what a flood of bad tokens costs is
per address. So unknown, revoked or expired tokens count per client address in Django's cache
(Redis in production, shared by every process); at CANVAS_TOKEN_FAILURE_LIMIT within the
cool-off the address is blocked for CANVAS_TOKEN_COOLOFF_SECONDS and the block is audited.
A block refuses failures only: a good token from a blocked address is still accepted, so a
flood of bad tokens from a shared address (a NAT, a CI provider) never locks out the people
behind it.

`FailureCounter` is that counter for any kind of failure (webhook signatures use it too).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
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


# ---- Failure counters -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FailureCounter:
    """Failures per key (an address, an automation) in the shared cache: the one that makes
    `limit()` within `cooloff()` seconds blocks the key for `cooloff()` seconds. A cache that
    is down counts nothing and blocks nothing (see CACHE_DOWN). What a block refuses is the
    caller's choice; every caller so far refuses further failures only."""

    scope: str
    limit: Callable[[], int]
    cooloff: Callable[[], float]

    def _failures_key(self, key: str) -> str:
        return f"throttle:{self.scope}:failures:{key}"

    def _block_key(self, key: str) -> str:
        return f"throttle:{self.scope}:blocked:{key}"

    def retry_after(self, key: str) -> int | None:
        """Seconds until `key`'s block lifts, or None when it is not blocked."""
        try:
            until = cache.get(self._block_key(key))
        except CACHE_DOWN as exc:
            logger.warning("%s throttle skipped: the cache is unreachable (%s)", self.scope, exc)
            return None
        if until is None or until <= time.time():
            return None
        return max(1, math.ceil(until - time.time()))

    def record(self, key: str) -> int | None:
        """Count one failure for `key`: the number of failures when this one blocked it (the
        caller may audit that, once), else None."""
        try:
            return self._count(key)
        except CACHE_DOWN as exc:
            logger.warning("%s failure not counted: the cache is unreachable (%s)", self.scope, exc)
            return None

    def _count(self, key: str) -> int | None:
        cooloff, failures_key = float(self.cooloff()), self._failures_key(key)
        cache.add(failures_key, 0, timeout=cooloff)  # the window starts with the first failure
        try:
            failures = cache.incr(failures_key)
        except ValueError:  # expired between add and incr: this failure opens a new window
            cache.set(failures_key, 1, timeout=cooloff)
            failures = 1
        if failures != self.limit():
            return None
        cache.set(self._block_key(key), time.time() + cooloff, timeout=cooloff)
        cache.delete(failures_key)
        return failures

    def reset(self, key: str) -> None:
        cache.delete_many([self._failures_key(key), self._block_key(key)])


# ---- API tokens ---------------------------------------------------------------------------------

TOKEN_FAILURES = FailureCounter(
    "token",
    limit=lambda: settings.CANVAS_TOKEN_FAILURE_LIMIT,
    cooloff=lambda: float(settings.CANVAS_TOKEN_COOLOFF_SECONDS),
)
"""Bad API tokens per client address."""


def token_throttle_check(address: str) -> None:
    """Raise Throttled while the address is blocked. Ask only about a token that failed: a
    good token is accepted from any address (see the module's docstring)."""
    retry = TOKEN_FAILURES.retry_after(address)
    if retry is not None:
        raise Throttled(
            f"too many invalid API tokens from this address; try again in {retry} s.",
            retry_after=retry,
        )


def token_failure_record(address: str) -> None:
    """Count one bad token from the address; the one that reaches the limit blocks it."""
    failures = TOKEN_FAILURES.record(address)
    if failures is not None:
        audit_record(
            actor=None, kind=LOCKOUT_KIND, target=f"API tokens from {address}",
            data={"via": "api_token", "address": address, "failures": failures,
                  "cooloff_seconds": float(settings.CANVAS_TOKEN_COOLOFF_SECONDS)},
        )  # fmt: skip


def token_throttle_reset(address: str) -> None:
    TOKEN_FAILURES.reset(address)


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
