"""100 conversations at once on two workers with 32 slots each stay under the documented
connection budget (docs/deploy.md "Database connections"): counted in pg_stat_activity of
the fault rig's own cluster (max_connections 200, so the shared server's 100 are not spent)
every 50 ms. The workers run the production pool (common/db_pool.py); this process stands
for the web server with its one connection."""

from __future__ import annotations

import threading
import time
from collections import Counter

import psycopg
import pytest
from django.db import connection

from common.db_pool import pool_max
from conversations.models import Conversation
from orchestration import services
from tests.conftest import wait_for
from tests.runs import script

pytestmark = [pytest.mark.faults, pytest.mark.worker]

CONVERSATIONS = 100
STEPS = 8
WORKERS = 2
SLOTS = 32
KEEPERS = 3
"""Per worker process, outside its slots: lease renewer, presence thread, main thread."""
WEB = 1


class Sampler(threading.Thread):
    """The peak count of the database's client connections, the sampler's own left out."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.peak = 0
        self.peak_by_name: Counter[str] = Counter()
        self.samples = 0
        self.stop = threading.Event()

    def run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.stop.wait(0.05):
                rows = conn.execute(
                    # Clients only: autovacuum's workers show up with the database's name too.
                    "SELECT application_name, count(*) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND backend_type = 'client backend' "
                    "AND pid <> pg_backend_pid() GROUP BY 1"
                ).fetchall()
                self.samples += 1
                total = sum(count for _, count in rows)
                if total > self.peak:
                    self.peak, self.peak_by_name = total, Counter(dict(rows))


@pytest.mark.timeout(600)
def test_100_conversations_stay_under_the_connection_budget(stack):
    for _ in range(WORKERS):
        stack.start_worker(concurrency=SLOTS)
    expected = WEB + WORKERS * (SLOTS + KEEPERS)
    cap = WEB + WORKERS * pool_max(SLOTS)
    sampler = Sampler(stack.postgres.url(stack.database))
    sampler.start()
    turns = [{"tool": "think", "args": {"thought": f"step {n}"}} for n in range(STEPS)]
    started = time.monotonic()
    ids = [
        services.conversation_create(
            owner=None, model="scripted", prompt=script(*turns, {"say": "done"})
        ).pk  # fmt: skip
        for _ in range(CONVERSATIONS)
    ]
    wait_for(
        lambda: Conversation.objects.filter(pk__in=ids, status="finished").count() == len(ids),
        480, interval=0.5, message=f"every conversation to finish\n{stack.logs()}",
    )  # fmt: skip
    elapsed = time.monotonic() - started
    sampler.stop.set()
    sampler.join(5)
    connection.close()
    print(f"{CONVERSATIONS} conversations x {STEPS} steps in {elapsed:.1f} s; peak "
          f"{sampler.peak} connections (expected {expected}, cap {cap}) over "
          f"{sampler.samples} samples: {dict(sampler.peak_by_name)}")  # fmt: skip
    assert sampler.samples > 100
    assert sampler.peak <= cap
    # Every slot was busy at once: the peak is the formula's, not a quiet moment's.
    assert sampler.peak >= WORKERS * SLOTS
