"""An unreachable database or broker answers 503 with Retry-After, not 500: an outage is not a bug.

`down_dependency(exc)` tells which part an exception says is unreachable ("database",
"broker") or None for anything else, which stays a 500. Only a failed or dropped connection
counts: a statement timeout, a deadlock or a constraint violation is an answer from a
working database. The JSON API maps it in canvas.api's handlers; HTML pages and errors raised
outside any view get `server_error` (handler500), which renders without touching the database
(no request context: its processors read the session and the user). `/healthz` says the
process serves; `/healthz/ready` asks Postgres and Redis, each bounded by a short timeout.
Answers name the part that is down, never its address or the driver's message (a DSN may
carry a password).
"""

from __future__ import annotations

import logging
import sys

import redis
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader
from django.views import defaults
from kombu.exceptions import OperationalError as BrokerError

logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5
"""What a client waits before retrying: a Postgres or Redis restart takes seconds, and runs
resume within a sweep period of it (docs/deploy.md)."""
PROBE_TIMEOUT_SECONDS = 2.0
ERROR_CODE = "service_unavailable"
API_PREFIX = "/api/"

# SQLSTATEs of a connection that failed or was cut: class 08 (connection exception), the
# server shutting down or starting (57P01-57P03), no free connection slot (53300). psycopg
# reports no SQLSTATE at all for a refused or dropped connection.
_DOWN_SQLSTATE_PREFIXES = ("08", "57P01", "57P02", "57P03", "53300")
_BROKER_FAULTS = (redis.ConnectionError, redis.TimeoutError, BrokerError)


def _database_down(exc: BaseException) -> bool:
    if isinstance(exc, InterfaceError):
        return True  # used a connection that is already closed
    if not isinstance(exc, OperationalError):
        return type(exc).__name__ == "PoolTimeout"  # psycopg_pool: no connection came in time
    cause = exc.__cause__
    sqlstate = getattr(cause, "sqlstate", "")
    if sqlstate == "" or not type(cause).__module__.startswith("psycopg"):
        return False  # not Postgres (SQLite's "database is locked" is a wait, not an outage)
    return sqlstate is None or sqlstate.startswith(_DOWN_SQLSTATE_PREFIXES)


def down_dependency(exc: BaseException | None) -> str | None:
    """ "database" or "broker" when `exc` (or what it was raised from) is that part being
    unreachable; None otherwise."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, _BROKER_FAULTS):
            return "broker"
        if _database_down(exc):
            return "database"
        exc = exc.__cause__ or exc.__context__
    return None


def unavailable_detail(dependency: str) -> str:
    return f"the {dependency} is unreachable; retry in {RETRY_AFTER_SECONDS} s."


def with_retry_after(response: HttpResponse) -> HttpResponse:
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def unavailable_json(dependency: str) -> JsonResponse:
    body = {"error": ERROR_CODE, "detail": unavailable_detail(dependency)}
    return with_retry_after(JsonResponse(body, status=503))  # type: ignore[return-value]


def unavailable_page(dependency: str) -> HttpResponse:
    html = loader.get_template("503.html").render({"dependency": dependency,
                                                   "retry_after": RETRY_AFTER_SECONDS})  # fmt: skip
    return with_retry_after(HttpResponse(html, status=503))


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: Django calls it while handling the exception, so sys.exc_info() has it."""
    dependency = down_dependency(sys.exc_info()[1])
    if dependency is None:
        return defaults.server_error(request)
    if request.path.startswith(API_PREFIX):
        return unavailable_json(dependency)
    return unavailable_page(dependency)


# --- Probes --------------------------------------------------------------------------------


def database_answers() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except DatabaseError:  # Django drops the broken connection when the request ends
        return False


_redis_clients: dict[str, redis.Redis] = {}


def broker_answers() -> bool:
    url = settings.REDIS_URL
    if not url:
        return True  # embedded: the broker lives in this process
    client = _redis_clients.get(url)
    if client is None:
        client = redis.Redis.from_url(url, socket_connect_timeout=PROBE_TIMEOUT_SECONDS,
                                      socket_timeout=PROBE_TIMEOUT_SECONDS)  # fmt: skip
        _redis_clients[url] = client
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: the process answers requests. Touches neither Postgres nor Redis."""
    return JsonResponse({"status": "alive"})


def healthz_ready(request: HttpRequest) -> JsonResponse:
    """Readiness: 200 while Postgres and Redis answer, else 503 naming what is down."""
    down = [name for name, answers in (("database", database_answers),
                                       ("broker", broker_answers)) if not answers()]  # fmt: skip
    if not down:
        return JsonResponse({"status": "ready"})
    logger.warning("not ready: %s unreachable", ", ".join(down))
    return with_retry_after(JsonResponse({"status": "unavailable", "down": down}, status=503))  # type: ignore[return-value]
