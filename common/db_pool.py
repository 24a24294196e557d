"""The per-process Postgres connection pool's options (canvas/settings.py, docs/deploy.md).

Every thread of a process borrows from one psycopg pool (Django's `OPTIONS["pool"]`) and gives
its connection back when Django closes it: at the end of each request, each Celery task, and
whenever a keeper thread lets go. `max_size` is the most connections the process ever holds;
a thread that finds them all lent waits up to `timeout` (then OperationalError: a 503 on the
web, a transient fault a slice hands over on).

Settings import it, so it imports nothing of Django's or the apps' (it registers one fork
hook, below).
"""

from __future__ import annotations

import os
import sys
from typing import Any

KEEPER_THREADS = 3
"""Threads of a worker process that hold a connection outside any task: the lease renewer
(orchestration/chain/heartbeat.py, while the process holds a lease), the presence heartbeat
thread and the main thread that announced the host at start (orchestration/chain/workers.py)."""
SPARE = 1
"""A short borrower beside them: the bill of a model answer that came after an interrupt
(orchestration/step/model_call.py, on the abandoned call's thread)."""


def pool_max(concurrency: int) -> int:
    """The default cap: every slot, every keeper and a spare, so a worker's threads never wait
    for one another's connections; only a process over its budget (a leak) waits."""
    return concurrency + KEEPER_THREADS + SPARE


def reset_session(conn: Any) -> None:
    """On the way back into the pool: drop what a borrower set for its session. The lease
    keeper names its connection and bounds its statements (heartbeat.py `_prepare_connection`);
    the next borrower must not inherit a 2 s statement_timeout. application_name is reported by
    the server, so the common case costs no round trip."""
    if conn.info.parameter_status("application_name") != _startup_name(conn):
        conn.execute("RESET application_name")
        conn.execute("RESET statement_timeout")
        if not conn.autocommit:  # Django's are; the pool wants the connection idle
            conn.commit()


def _startup_name(conn: Any) -> str:
    return conn.info.get_parameters().get("application_name", "")


def pool_options(max_size: int, timeout: float) -> dict[str, Any]:
    return {
        "min_size": min(2, max_size),
        "max_size": max_size,
        # Idle connections above min_size close after a minute, as CONN_MAX_AGE=60 did.
        "max_idle": 60.0,
        "timeout": timeout,
        "reset": reset_session,
    }


_inherited: list[Any] = []
"""Pools a forked child found: kept referenced so no finalizer touches the parent's sockets."""


def _forget_inherited_pools() -> None:
    """In a forked child (Celery's prefork pool): the parent's pool has no threads here and
    shares the parent's sockets, so it is put aside, never used or closed (closing would end
    the parent's sessions); the child's first query builds a pool of its own."""
    backend = sys.modules.get("django.db.backends.postgresql.base")
    if backend is not None:
        pools = backend.DatabaseWrapper._connection_pools
        _inherited.extend(pools.values())
        pools.clear()


os.register_at_fork(after_in_child=_forget_inherited_pools)
