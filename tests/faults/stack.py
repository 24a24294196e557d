"""The fault suite's stack: the Django test database on the private cluster, workers on the
private Redis, and the test process sending its slices there too."""

from __future__ import annotations

import contextlib
import copy
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from celery import Celery

from tests.conftest import REPO, wait_for

from .services import PrivatePostgres, PrivateRedis

FAST_RECOVERY = {
    "CANVAS_LEASE_SECONDS": "2",
    "CANVAS_SWEEP_SECONDS": "1",
    "CANVAS_SLICE_STEPS": "2",
    "CANVAS_SLICE_SECONDS": "5",
}
"""Short lease and sweep: a fault is noticed within seconds."""

TEST_DATABASE = "canvas_faults"


def create_private_database(postgres: PrivatePostgres) -> dict:
    """Create and migrate the test database on `postgres` through Django's own machinery;
    returns its connection settings. The default connection is left as it was."""
    from django.db import connection

    original = copy.deepcopy(connection.settings_dict)
    connection.close()
    try:
        connection.settings_dict.update(
            HOST="127.0.0.1", PORT=str(postgres.port), USER="postgres", PASSWORD="",
            NAME="postgres", TEST={**original.get("TEST", {}), "NAME": TEST_DATABASE},
        )  # fmt: skip
        connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
        return copy.deepcopy(connection.settings_dict)
    finally:
        connection.close()
        _replace(connection.settings_dict, original)


def _replace(target: dict, source: dict) -> None:
    target.clear()
    target.update(copy.deepcopy(source))


@contextmanager
def on_database(private: dict) -> Iterator[None]:
    """Point the default connection (the same dict as settings.DATABASES["default"]) at the
    private test database for the duration, then back."""
    from django.db import connection

    original = copy.deepcopy(connection.settings_dict)
    connection.close()
    _replace(connection.settings_dict, private)
    try:
        yield
    finally:
        connection.close()
        _replace(connection.settings_dict, original)


def flush_database() -> None:
    from django.core.management import call_command

    call_command("flush", interactive=False, verbosity=0)


def broker_app(redis: PrivateRedis) -> Celery:
    """A Celery app like the project's, but sending to the private Redis."""
    app = Celery("faults", set_as_current=False)
    app.config_from_object("django.conf:settings", namespace="CELERY")
    app.conf.broker_url = redis.url
    return app


class FaultWorker:
    """A `celery -A canvas worker` (with beat: the sweeper) on the private services."""

    def __init__(self, tmp: Path, env: dict[str, str]) -> None:
        self.ready_file = tmp / f"worker-{uuid.uuid4().hex}.ready"
        self.log_path = tmp / f"{self.ready_file.stem}.log"
        self.env = {**os.environ, **env, "CANVAS_WORKER_READY_FILE": str(self.ready_file)}
        self.argv = [
            sys.executable, "-m", "celery", "-A", "canvas", "worker", "-l", "WARNING",
            "-n", f"{self.ready_file.stem}@%h", "-B", "-s", str(tmp / f"{self.ready_file.stem}.beat"),
            "--without-heartbeat", "--without-mingle", "--without-gossip",
        ]  # fmt: skip
        self.proc: subprocess.Popen | None = None

    def start(self) -> FaultWorker:
        self.log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            self.argv, cwd=REPO, env=self.env, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        wait_for(
            lambda: self.ready_file.exists() or self.proc.poll() is not None, 60, 0.05,
            f"worker to start:\n{self.log_path}",
        )  # fmt: skip
        if self.proc.poll() is not None:
            raise RuntimeError(f"worker died:\n{self.log_path.read_text()}")
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def kill(self) -> None:
        """SIGKILL the worker's main process only: a crashed machine kills that, and what it
        started must die with it (nothing else signals its children)."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # the group: its pool processes too
        self.proc.wait(10)
        self.log.close()

    def tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text()[-chars:]
