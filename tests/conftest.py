"""Shared fixtures. Everything is real except the model: Postgres, Redis, Celery worker
processes, local workspaces."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# The workers tests start (they inherit this environment) run the scripted model, which never
# imports LiteLLM; warming it anyway cost each ~4.4 s of CPU in the background, and the suite
# starts a few hundred (issue 24). A test of a real provider imports it on its first call;
# tests/test_start_imports.py turns the warm-up on to test it.
os.environ.setdefault("CANVAS_LLM_WARM_UP", "0")

REPO = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    """Before any test: this xdist worker's own Redis database, channel prefix and host."""
    from django.conf import settings

    from tests import parallel

    parallel.isolate(settings)
    # A password hash costs ~0.2 s of CPU by design, and the suite makes thousands (every
    # user a fixture creates, every login it tries): minutes of CPU that test nothing. The
    # default hashers stay listed, so hashes made by the servers tests start still verify.
    settings.PASSWORD_HASHERS = [
        "django.contrib.auth.hashers.MD5PasswordHasher",
        *settings.PASSWORD_HASHERS,
    ]
    # This process's own connections stay Django's per-thread ones: fixtures repoint the
    # default database mid-session (tests/faults/stack.py), which a pool built once would
    # ignore. The workers tests start get the production default, the pool (common/db_pool.py).
    if settings.DATABASES["default"].get("OPTIONS", {}).pop("pool", None):
        settings.DATABASES["default"]["CONN_MAX_AGE"] = 60


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from tests import marks, parallel

    parallel.unique_ids(items)
    marks.check_items(items)
    if config.pluginmanager.hasplugin("xdist"):  # `-p no:xdist` declares no xdist_group mark
        marks.group_items(items)


@pytest.hookimpl(specname="pytest_collection_modifyitems", trylast=True)  # after xdist's
def check_collected_ids(config: pytest.Config, items: list[pytest.Item]) -> None:
    from tests import parallel

    parallel.check_ids(items, loadgroup=bool(getattr(config.option, "loadgroup", False)))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    from tests import marks

    marks.fail_if_unmarked(item)


def pytest_runtest_teardown(item: pytest.Item) -> None:
    from tests import marks

    marks.forget(item)


@pytest.fixture(autouse=True)
def _isolated_dirs(settings, tmp_path):
    settings.CANVAS_WORKSPACES_ROOT = tmp_path / "workspaces"
    settings.CANVAS_STATE_ROOT = tmp_path / "state"


@pytest.fixture(autouse=True)
def _fresh_cache(settings):
    """Each test its own empty cache: the throttles count in it (teams.throttle), and counts
    left by one test must not lock out the next. Tests of the shared Redis cache set theirs."""
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": uuid.uuid4().hex,
        }
    }


@pytest.fixture(scope="session", autouse=True)
def _close_consumer_connections(django_db_setup) -> Iterator[None]:
    """Consumers reach the database through asgiref's one shared executor thread, whose
    connection outlives the tests (CONN_MAX_AGE); close it before the test database goes."""
    yield
    from asgiref.sync import SyncToAsync
    from django.db import connections

    SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=30)


def owner_of_own_team(django_user_model, name: str):
    """A user `name` (password `name`-password-1) who owns a team "`name`'s team"."""
    from teams.services import team_create

    person = django_user_model.objects.create_user(name, password=f"{name}-password-1")
    team_create(user=person, name=f"{name}'s team")
    return person


@pytest.fixture
def user(django_user_model):
    """alice, owner of her own team."""
    return owner_of_own_team(django_user_model, "alice")


@pytest.fixture
def team(user):
    """alice's team."""
    from teams.services import team_default_for

    return team_default_for(user)


@pytest.fixture
def team_id(team) -> int:
    """alice's team's id."""
    return team.pk


@pytest.fixture
def other_user(django_user_model):
    """mallory, owner of another team."""
    return owner_of_own_team(django_user_model, "mallory")


@pytest.fixture
def api_token(user) -> str:
    from teams.tokens import api_token_create

    return api_token_create(user=user, name="tests")[1]


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    """A local workspace's root and state directories (not created yet)."""
    return tmp_path / "root", tmp_path / "state"


@pytest.fixture
def ws(dirs: tuple[Path, Path]):
    """A local workspace on `dirs`."""
    from workspaces.local import LocalWorkspace

    return LocalWorkspace(*dirs)


@pytest.fixture
def api(user):
    """alice's JSON API client (a bearer token of her own)."""
    from tests.api import client_for

    return client_for(user)


@pytest.fixture
def browser(user):
    """alice logged in to the web UI (Django's test client with her session)."""
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def loopback_allowed(settings) -> None:
    """Let team webhooks and model profiles reach the fake servers tests run on 127.0.0.1
    (common/netguard.py refuses loopback by default)."""
    settings.CANVAS_ALLOWED_PRIVATE_NETWORKS = ["127.0.0.0/8"]


@pytest.fixture
def dispatched(monkeypatch) -> list[tuple[str, str]]:
    """Capture slice enqueues instead of sending them, for tests that drive slices by hand."""
    sent: list[tuple[str, str]] = []

    def capture(conversation_id, slice_id, **_routing) -> None:
        sent.append((str(conversation_id), slice_id))

    import orchestration.chain.dispatch

    # Every next slice is sent through dispatch.schedule_next, which looks this name up there.
    monkeypatch.setattr(orchestration.chain.dispatch, "enqueue_slice_on_commit", capture)
    return sent


def _database_url() -> str:
    from django.conf import settings

    db = settings.DATABASES["default"]
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    user = db.get("USER") or "postgres"
    return f"postgres://{user}@{host}:{port}/{db['NAME']}"


class WorkerProcess:
    """A real `celery -A canvas worker` in its own process group, on the test database."""

    def __init__(
        self,
        tmp: Path,
        *,
        beat: bool = False,
        extra_env: dict[str, str] | None = None,
        pool_args: tuple[str, ...] = ("-P", "threads", "-c", "4"),
        queues: tuple[str, ...] = (),
    ):
        self.tmp = tmp
        self.pool_args = pool_args
        """Empty: the plain command's defaults (canvas/settings.py)."""
        self.queues = queues
        """`-Q`; empty: the default queue. canvas.celery adds the host's queue (`host.X`)
        unless only "acp" is named, and the host's ACP queue (`acp.host.X`) when it is named."""
        self.ready_file = tmp / f"worker-{uuid.uuid4().hex}.ready"
        self.log_path = tmp / f"{self.ready_file.stem}.log"
        self.beat = beat
        self.extra_env = extra_env or {}
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> WorkerProcess:
        from django.conf import settings

        from tests.marks import require

        require("worker")

        env = {
            **os.environ,
            "DATABASE_URL": _database_url(),
            "REDIS_URL": settings.REDIS_URL,
            "CANVAS_WORKER_READY_FILE": str(self.ready_file),
            "CANVAS_WORKSPACES_ROOT": str(settings.CANVAS_WORKSPACES_ROOT),
            "CANVAS_STATE_ROOT": str(settings.CANVAS_STATE_ROOT),
            **self.extra_env,
        }
        self.log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            self.argv(), cwd=REPO, env=env, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while not self.ready_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"worker did not start:\n{self.log_path.read_text()}")
            time.sleep(0.1)
        return self

    def argv(self) -> list[str]:
        return [
            sys.executable, "-m", "celery", "-A", "canvas", "worker",
            *self.pool_args, "-n", f"{self.ready_file.stem}@%h", *self.celery_args(),
        ]  # fmt: skip

    def celery_args(self) -> list[str]:
        """The worker's options besides its pool and node name."""
        argv = [
            "-l", "WARNING", "--without-heartbeat", "--without-mingle", "--without-gossip",
        ]  # fmt: skip
        if self.queues:
            argv += ["-Q", ",".join(self.queues)]
        if self.beat:
            argv += ["-B", "-s", str(self.tmp / f"{self.ready_file.stem}.beat")]
        return argv

    def kill(self) -> None:
        """SIGKILL the whole worker process group: a crashed machine, not a shutdown."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        if getattr(self, "log", None):
            self.log.close()


@pytest.fixture
def clean_broker(settings) -> None:
    """Drop tasks left in this xdist worker's own test Redis database by earlier runs."""
    import redis

    redis.Redis.from_url(settings.REDIS_URL).flushdb()


@pytest.fixture
def start_worker(transactional_db, clean_broker, tmp_path) -> Iterator:
    workers: list[WorkerProcess] = []

    def start(kind: type[WorkerProcess] = WorkerProcess, **kwargs) -> WorkerProcess:
        worker = kind(tmp_path, **kwargs).start()
        workers.append(worker)
        return worker

    yield start
    for worker in workers:
        worker.stop()


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.1, message: str = ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting: {message}")


def holds_for(predicate, seconds: float, interval: float = 0.1, message: str = "") -> None:
    """Assert that `predicate` stays true for `seconds`: the bounded wait of a test that
    something does not happen. Wait for the condition that makes it sound first."""
    deadline = time.monotonic() + seconds
    while True:
        assert predicate(), f"stopped holding within {seconds}s: {message}"
        if time.monotonic() >= deadline:
            return
        time.sleep(interval)
