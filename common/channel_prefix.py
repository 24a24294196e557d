"""The channel layer's prefix: one per deployment sharing a Redis server.

Redis pub/sub ignores the database number, so two deployments on one server with one prefix
hear each other's groups (`access.user.<id>` names the same person id in both). Two deployments
never share a database number (they would share Celery's queues), so the number names the
deployment: database 0 keeps the prefix every deployment had before, "asgi" (an upgrade, old
and new processes side by side, keeps its groups), database N > 0 gets "asgi-db<N>".
`CANVAS_CHANNEL_PREFIX` wins when set. Pure: imported by settings.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

LEGACY_PREFIX = "asgi"
_VALID = re.compile(r"[A-Za-z0-9._-]{1,50}")


def redis_database(url: str) -> int:
    """The database number a Redis URL selects, as redis-py reads it: `?db=N` first, then the
    path of a redis:// or rediss:// URL, else 0."""
    parts = urlsplit(url)
    query = parse_qs(parts.query).get("db")
    path = parts.path.strip("/") if parts.scheme in ("redis", "rediss") else ""
    value = query[0] if query else path or "0"
    if not value.isdigit():
        raise ValueError(f"REDIS_URL selects database {value!r}: it must be a number")
    return int(value)


def channel_prefix(redis_url: str, configured: str | None = None) -> str:
    """`configured` when given (checked), else derived from the URL's database number."""
    if configured:
        if not _VALID.fullmatch(configured):
            raise ValueError(
                f"CANVAS_CHANNEL_PREFIX {configured!r}: 1-50 letters, digits, '.', '_' or '-'"
            )
        return configured
    database = redis_database(redis_url)
    return LEGACY_PREFIX if database == 0 else f"{LEGACY_PREFIX}-db{database}"
