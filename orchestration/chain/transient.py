"""Transient faults of the database and the broker, and a short bounded retry for them.

A Postgres restart, a terminated backend or a Redis restart lasts seconds; a slice that meets
one should wait a moment and try again rather than drop its run. The retry here is short
(about 3 s in all): beyond it the caller gives up and the sweeper, which reads the state the
row already records, is the safety net. Appends under a held lease have their own retry, which
never writes a batch twice (lease_writes.py).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import DatabaseError, InterfaceError, OperationalError, connection
from kombu.exceptions import OperationalError as BrokerError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)

T = TypeVar("T")

DATABASE_FAULTS: tuple[type[DatabaseError], ...] = (OperationalError, InterfaceError)
TRANSIENT_FAULTS: tuple[type[Exception], ...] = (
    *DATABASE_FAULTS, BrokerError, RedisConnectionError, RedisTimeoutError, ConnectionError,
)  # fmt: skip
"""A dropped or refused connection to Postgres or Redis (kombu wraps most of redis-py's)."""

BACKOFF_SECONDS = (0.1, 0.3, 0.6, 1.0, 1.0)


def retry_transient(fn: Callable[[], T], *, what: str, backoff=BACKOFF_SECONDS) -> T:
    """Call `fn`, retrying a transient fault after each pause in `backoff`; the last fault
    is raised. Call outside any transaction: a fault closes this thread's database
    connection so that the next attempt opens a fresh one."""
    for pause in (*backoff, None):
        try:
            return fn()
        except TRANSIENT_FAULTS as exc:
            if pause is None or connection.in_atomic_block:
                raise
            logger.warning("%s: %s; retrying in %.1f s", what, exc, pause)
            if isinstance(exc, DATABASE_FAULTS):
                close_broken()
            time.sleep(pause)
    raise AssertionError("unreachable")


def close_broken() -> None:
    """Close this thread's database connection after a fault; Django opens a fresh one at
    the next query. Django keeps a failed connection otherwise, so every later query on the
    thread would fail too. Call outside any transaction.

    With a connection pool, its idle connections are checked too: what cut this one (a
    restart, a failover, pg_terminate_backend) most likely cut them as well, and the pool's
    own check at borrowing waits 1, 2, 4... s after each dead one it meets."""
    with contextlib.suppress(*DATABASE_FAULTS):
        connection.close()
    pool = getattr(connection, "pool", None)  # Django's psycopg pool, when configured
    if pool is not None:
        with contextlib.suppress(Exception):
            pool.check()
