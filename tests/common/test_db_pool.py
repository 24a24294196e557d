"""The per-process connection pool (common/db_pool.py) on the real test Postgres: what one
borrower set for its session is gone for the next, and a pool that cannot connect answers a
503 (canvas/outage.py), not a 500."""

from __future__ import annotations

import os
import subprocess
import sys

import psycopg
import pytest
from psycopg_pool import ConnectionPool, PoolTimeout

from canvas.outage import down_dependency
from common.db_pool import pool_max, pool_options
from tests.conftest import REPO, _database_url
from tests.faults.services import free_port


@pytest.fixture
def one_connection(transactional_db):
    options = pool_options(1, timeout=5)
    with ConnectionPool(_database_url(), kwargs={"autocommit": True}, **options) as pool:
        yield pool


def _session(pool: ConnectionPool) -> tuple[str, str, int]:
    with pool.connection() as conn:
        name, timeout = conn.execute(
            "SELECT current_setting('application_name'), current_setting('statement_timeout')"
        ).fetchone()
        return name, timeout, conn.info.backend_pid


def test_the_lease_keepers_session_settings_do_not_reach_the_next_borrower(one_connection):
    default_name, default_timeout, first = _session(one_connection)
    with one_connection.connection() as conn:  # as heartbeat._prepare_connection does
        conn.execute("SELECT set_config('application_name', 'canvas-lease-keeper', false), "
                     "set_config('statement_timeout', '700ms', false)")  # fmt: skip
    assert _session(one_connection) == (default_name, default_timeout, first)  # same backend


def test_a_pool_that_cannot_connect_is_a_database_outage():
    closed = f"postgres://postgres@127.0.0.1:{free_port()}/none"
    pool = ConnectionPool(closed, **pool_options(1, timeout=0.5))
    with pool, pytest.raises(PoolTimeout) as waited:
        pool.getconn()
    assert isinstance(waited.value, psycopg.OperationalError)
    assert down_dependency(waited.value) == "database"


def test_the_default_cap_covers_every_slot_and_keeper():
    assert pool_max(32) == 36


FORK_PROBE = """
import os, time, django
django.setup()
from django.db import connection
def sessions():
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid(), count(*) FROM pg_stat_activity "
                       "WHERE datname = current_database() AND backend_type = 'client backend'")
        return cursor.fetchone()
connection.ensure_connection()
connection.pool.wait(30)  # its min_size: one lent to this thread, one idle
mine, before = sessions()
child = os.fork()
if child == 0:  # what Celery's Django fix-up does in a prefork child, then a query of its own
    os.close(connection.connection.fileno())
    connection.close()
    connection.close_pool()
    os._exit(0 if sessions()[0] != mine else 3)
_, status = os.waitpid(child, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
time.sleep(0.5)  # the child's own session ends with it
assert sessions() == (mine, before), (mine, before)  # the idle pooled session is still there
print("ok")
"""


def test_a_forked_child_builds_its_own_pool_and_leaves_the_parents_sessions(transactional_db):
    env = {**os.environ, "DATABASE_URL": _database_url(), "CANVAS_DB_POOL_MAX": "4",
           "SECRET_KEY": "test-fork-probe-not-a-secret", "DJANGO_SETTINGS_MODULE": "canvas.settings"}  # fmt: skip
    result = subprocess.run([sys.executable, "-c", FORK_PROBE], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.stdout.strip() == "ok", result.stderr[-2000:]
