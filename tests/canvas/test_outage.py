"""While Postgres or Redis cannot be reached, the API and the pages answer 503 with Retry-After
and name the part that is down (never its address); readiness says the same. The database is
really unreachable: this process's connection is pointed at a port nothing listens on for the
request, then back."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from django.db import connection
from django.test import Client

from canvas.outage import RETRY_AFTER_SECONDS, down_dependency
from tests.faults.services import free_port

pytestmark = pytest.mark.django_db(transaction=True)


@contextlib.contextmanager
def database_unreachable() -> Iterator[None]:
    """This process's next connections go to a closed port (a pool, if configured, is rebuilt
    for it and again after)."""
    saved = connection.settings_dict["PORT"]

    pool = connection.settings_dict["OPTIONS"].get("pool")
    saved_wait = pool and pool["timeout"]

    def repoint(port, wait) -> None:
        connection.close()
        if pool:
            connection.close_pool()
            pool["timeout"] = wait  # a pooled request waits this long before its 503
        connection.settings_dict["PORT"] = port

    repoint(str(free_port()), 1.0)
    try:
        yield
    finally:
        repoint(saved, saved_wait)


def _no_secrets(text: str) -> None:
    settings_dict = connection.settings_dict
    for value in ("127.0.0.1", settings_dict["NAME"], "Traceback", "psycopg", "connection"):
        assert value not in text


def test_api_answers_503_with_retry_after_while_the_database_is_down(api_token):
    client = Client(headers={"Authorization": f"Bearer {api_token}"},
                    raise_request_exception=False)  # fmt: skip
    assert client.get("/api/conversations").status_code == 200
    with database_unreachable():
        down = client.get("/api/conversations")
    assert down.status_code == 503
    assert down["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert down.json() == {
        "error": "service_unavailable",
        "detail": f"the database is unreachable; retry in {RETRY_AFTER_SECONDS} s.",
    }
    _no_secrets(down.content.decode())
    assert client.get("/api/conversations").status_code == 200  # and back at once


def test_pages_answer_a_small_503_page_while_the_database_is_down(user):
    client = Client(raise_request_exception=False)
    client.force_login(user)
    assert client.get("/").status_code == 200
    with database_unreachable():
        down = client.get("/")
    assert down.status_code == 503
    assert down["Retry-After"] == str(RETRY_AFTER_SECONDS)
    page = down.content.decode()
    assert "Temporarily unavailable" in page and "The database cannot be reached" in page
    _no_secrets(page)


def test_only_a_lost_connection_counts_as_an_outage():
    """A statement timeout is an answer from a working database: it stays a 500."""
    from django.db import OperationalError

    with pytest.raises(OperationalError) as timed_out, connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = 10")
        cursor.execute("SELECT pg_sleep(1)")
    assert down_dependency(timed_out.value) is None
    connection.close()

    with database_unreachable(), pytest.raises(OperationalError) as refused:
        connection.ensure_connection()
    assert down_dependency(refused.value) == "database"


def test_readiness_names_the_part_that_is_down(settings):
    client = Client()
    assert client.get("/healthz").json() == {"status": "alive"}
    ready = client.get("/healthz/ready")
    assert ready.status_code == 200 and ready.json() == {"status": "ready"}

    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    broker_down = client.get("/healthz/ready")
    assert broker_down.status_code == 503
    assert broker_down["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert broker_down.json() == {"status": "unavailable", "down": ["broker"]}

    with database_unreachable():
        both_down = client.get("/healthz/ready")
        alive = client.get("/healthz")
    assert both_down.status_code == 503
    assert both_down.json() == {"status": "unavailable", "down": ["database", "broker"]}
    assert alive.status_code == 200  # liveness never asks either


def test_an_unreachable_redis_is_a_broker_outage():
    import redis

    client = redis.Redis.from_url(f"redis://127.0.0.1:{free_port()}/0", socket_connect_timeout=1)
    with pytest.raises(redis.ConnectionError) as refused:
        client.ping()
    assert down_dependency(refused.value) == "broker"
    assert down_dependency(RuntimeError("a bug")) is None
