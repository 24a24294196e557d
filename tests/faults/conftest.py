"""The fault suite: real workers on a Redis and a Postgres of its own, which cases may stop.

Cases that take `stack` run with the Django test database on the private cluster (the rest of
the suite keeps the shared one); its workers and the test process's slice sends use the
private Redis. Workers run with short lease and sweep periods (stack.FAST_RECOVERY)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis as redis_client

from .checks import kill_marked
from .services import PrivatePostgres, PrivateRedis
from .stack import (
    FAST_RECOVERY,
    TEST_DATABASE,
    FaultWorker,
    broker_app,
    create_private_database,
    flush_database,
    on_database,
)


@pytest.fixture(scope="session")
def fault_redis() -> Iterator[PrivateRedis]:
    server = PrivateRedis().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def fault_postgres() -> Iterator[PrivatePostgres]:
    cluster = PrivatePostgres().init()
    yield cluster
    cluster.destroy()


@pytest.fixture(scope="session")
def fault_database(django_db_setup, django_db_blocker, fault_postgres) -> dict:
    with django_db_blocker.unblock():
        return create_private_database(fault_postgres)


@pytest.fixture(scope="session")
def fault_broker(fault_redis):
    return broker_app(fault_redis)


@dataclass
class Stack:
    redis: PrivateRedis
    postgres: PrivatePostgres
    tmp: Path
    settings: object
    marker: str
    workers: list[FaultWorker] = field(default_factory=list)

    database = TEST_DATABASE

    def start_worker(self, pool: str = "threads", concurrency: int = 4, **env: str) -> FaultWorker:
        from tests.marks import require

        require("worker")
        # The pool is set through the settings: Celery prefers them over `-P` and `-c`.
        worker = FaultWorker(
            self.tmp,
            {
                "DATABASE_URL": self.postgres.url(TEST_DATABASE),
                "REDIS_URL": self.redis.url,
                "CANVAS_WORKSPACES_ROOT": str(self.settings.CANVAS_WORKSPACES_ROOT),
                "CANVAS_STATE_ROOT": str(self.settings.CANVAS_STATE_ROOT),
                "CANVAS_WORKER_POOL": pool,
                "CANVAS_WORKER_CONCURRENCY": str(concurrency),
                **FAST_RECOVERY,
                **env,
            },
        )
        self.workers.append(worker)
        return worker.start()

    def logs(self) -> str:
        return "\n".join(f"--- {w.log_path.name}\n{w.tail()}" for w in self.workers)


@pytest.fixture
def stack(
    fault_database, fault_redis, fault_postgres, fault_broker, django_db_blocker, monkeypatch,
    settings, tmp_path,
) -> Iterator[Stack]:  # fmt: skip
    import orchestration.chain.dispatch

    fault_redis.answers() or fault_redis.start()
    redis_client.Redis.from_url(fault_redis.url).flushdb()
    monkeypatch.setattr(orchestration.chain.dispatch, "current_app", fault_broker)
    marker = f"fault{uuid.uuid4().hex[:12]}"  # names this test's commands in /proc
    with django_db_blocker.unblock(), on_database(fault_database):
        flush_database()
        state = Stack(fault_redis, fault_postgres, tmp_path, settings, marker)
        try:
            yield state
        finally:
            for worker in state.workers:
                worker.stop()
            kill_marked(marker)
            fault_postgres.start() if not _answers(fault_postgres) else None
            flush_database()


def _answers(postgres: PrivatePostgres) -> bool:
    import psycopg

    try:
        psycopg.connect(postgres.url("postgres"), connect_timeout=2).close()
        return True
    except psycopg.OperationalError:
        return False
