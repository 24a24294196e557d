"""Recovery time: fault -> seconds until the run continues, with the default settings.

    .venv/bin/python bench/recovery_time.py [--only worker_kill redis_restart] [--json out.json]

Needs no shared services: it starts its own Postgres cluster and Redis (tests/faults/services),
migrates a database there, and runs real `celery -A canvas worker` processes (with beat, the
sweeper) on them with the settings' defaults (CANVAS_LEASE_SECONDS, CANVAS_SWEEP_SECONDS...),
unless --fast (the fault suite's 2 s lease, 1 s sweep). A second worker is up before each
fault, so the numbers are the framework's, not a worker's boot.

- Kills (a worker, a pool process, mid-command or mid-LLM call): seconds from the kill to the
  first event a new runner appends (the `interrupted` observation, or the retried step).
- Redis and Postgres faults, met by a run whose every step is a slice sent through the
  broker: the longest pause in the log from the fault until the run finished.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.faults.services import PrivatePostgres, PrivateRedis  # noqa: E402

DATABASE = "canvas_recovery"
TARGET_SECONDS = 15.0
"""Issue 9: with the default settings every run continues within 15 s."""


def setup(fast: bool) -> tuple[PrivatePostgres, PrivateRedis, Path, dict[str, str]]:
    import psycopg

    postgres = PrivatePostgres().init()
    redis = PrivateRedis().start()
    with psycopg.connect(postgres.url("postgres"), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {DATABASE}")
    scratch = Path(tempfile.mkdtemp(prefix="canvas-recovery-"))
    env = {
        "DATABASE_URL": postgres.url(DATABASE),
        "REDIS_URL": redis.url,
        "SECRET_KEY": os.environ.get("SECRET_KEY", "bench-only-not-a-secret"),
        "CANVAS_WORKSPACES_ROOT": str(scratch / "workspaces"),
        "CANVAS_STATE_ROOT": str(scratch / "state"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    if fast:
        from tests.faults.stack import FAST_RECOVERY

        env.update(FAST_RECOVERY)
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "canvas.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    return postgres, redis, scratch, env


class Bench:
    def __init__(self, postgres, redis, scratch: Path, env: dict[str, str]) -> None:
        self.postgres, self.redis, self.scratch, self.env = postgres, redis, scratch, env
        self.workers: list = []

    def worker(self, **extra: str):
        from tests.faults.stack import FaultWorker

        worker = FaultWorker(self.scratch, {**self.env, **extra}).start()
        self.workers.append(worker)
        return worker

    def stop_workers(self) -> None:
        for worker in self.workers:
            worker.stop()
        self.workers.clear()


def _side(conversation) -> list[str]:
    side = Path(conversation.workspace_path) / "side.log"
    return side.read_text().splitlines() if side.exists() else []


def _wait(predicate: Callable[[], object], timeout: float, what: str) -> None:
    from django.db import connection

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except Exception:  # the database is down for a moment (a Postgres fault)
            connection.close()
        time.sleep(0.05)
    raise RuntimeError(f"timed out after {timeout}s waiting for {what}")


def _finished(conversation) -> bool:
    from conversations.models import Conversation

    return Conversation.objects.get(pk=conversation.pk).status == "finished"


def command_kill(bench: Bench, *, pool: bool) -> float:
    from orchestration import services
    from tests.faults.checks import Fault, marked_command, marked_pids
    from tests.runs import script

    marker = f"recovery{os.getpid()}{time.monotonic_ns()}"
    env = {"CANVAS_WORKER_POOL": "prefork", "CANVAS_WORKER_CONCURRENCY": "2"} if pool else {}
    first = bench.worker(**env)
    if not pool:
        bench.worker()
    conversation = services.conversation_create(
        owner=None, model="scripted",
        prompt=script(
            {"tool": "terminal", "args": {"command": marked_command(marker, "c1", 60)}},
            {"tool": "finish", "args": {"message": "done"}},
        ),
    )  # fmt: skip
    _wait(lambda: "start c1" in _side(conversation) and marked_pids(marker), 60, "c1")
    if pool:
        pid = marked_pids(marker)[0]
        while (parent := _parent(pid)) != first.pid:
            pid = parent
        os.kill(pid, signal.SIGKILL)
    else:
        first.kill()
    fault = Fault.now(conversation.pk)
    seconds = fault.recovery(timeout=120)
    _wait(lambda: _finished(conversation), 120, "the run to finish")
    return seconds


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def llm_kill(bench: Bench) -> float:
    from orchestration import services
    from tests.fakes import FakeOpenAI, Outcome, SlowOnce, assistant_turns
    from tests.faults.checks import Fault

    slow = SlowOnce()

    def respond(request) -> Outcome:
        if assistant_turns(request) == 0:
            return slow()
        return Outcome(tool="finish", args={"message": "done"})

    with FakeOpenAI(respond) as fake:
        model = {"CANVAS_LLM_API_BASE": fake.base_url, "CANVAS_LLM_API_KEY": "sk-fake"}
        first = bench.worker(**model)
        bench.worker(**model)
        conversation = services.conversation_create(
            owner=None, model="openai/fake-model", prompt="go"
        )
        _wait(lambda: fake.count >= 1, 60, "the slow model call")
        first.kill()
        fault = Fault.now(conversation.pk)
        seconds = fault.recovery(timeout=120)
        _wait(lambda: _finished(conversation), 120, "the run to finish")
    return seconds


def service_fault(bench: Bench, hit: Callable[[], None]) -> float:
    from django.db import connection

    from orchestration import services
    from tests.faults.checks import Fault, marked_command
    from tests.runs import script

    marker = f"recovery{os.getpid()}{time.monotonic_ns()}"
    through_broker = {"CANVAS_SLICE_STEPS": "1", "CANVAS_TASK_SECONDS": "0"}
    bench.worker(**through_broker)
    bench.worker(**through_broker)
    steps = [
        {"tool": "terminal", "args": {"command": marked_command(marker, f"c{i}", 0.3)}}
        for i in range(12)
    ]
    conversation = services.conversation_create(
        owner=None, model="scripted",
        prompt=script(*steps, {"tool": "finish", "args": {"message": "done"}}),
    )  # fmt: skip
    _wait(lambda: "start c3" in _side(conversation), 60, "c3 to start")
    fault = Fault.now(conversation.pk)
    hit()
    connection.close()
    _wait(lambda: _finished(conversation), 180, "the run to finish")
    return fault.longest_stall()


def postgres_outage(postgres: PrivatePostgres, seconds: float) -> None:
    postgres.stop("immediate")
    time.sleep(seconds)  # the outage itself
    postgres.start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="Fault names to run.")
    parser.add_argument("--fast", action="store_true", help="The fault suite's short settings.")
    parser.add_argument("--json", type=Path, help="Write the results here.")
    args = parser.parse_args()

    postgres, redis, scratch, env = setup(args.fast)
    bench = Bench(postgres, redis, scratch, env)

    def flushall() -> None:
        import redis as redis_client

        redis_client.Redis.from_url(redis.url).flushall()

    faults: dict[str, tuple[str, Callable[[], float]]] = {
        "worker_kill_command": ("kill -9 of a worker mid-command", lambda: command_kill(bench, pool=False)),
        "pool_kill_command": ("kill -9 of a pool process mid-command", lambda: command_kill(bench, pool=True)),
        "worker_kill_llm": ("kill -9 of a worker mid-LLM call", lambda: llm_kill(bench)),
        "redis_restart": ("Redis restart (no persistence)", lambda: service_fault(bench, redis.restart)),
        "redis_flushall": ("Redis FLUSHALL", lambda: service_fault(bench, flushall)),
        "postgres_restart": ("Postgres crash and restart", lambda: service_fault(bench, postgres.restart)),
        "postgres_outage": ("Postgres down 5 s", lambda: service_fault(bench, lambda: postgres_outage(postgres, 5))),
        "postgres_terminate": ("Postgres backends terminated", lambda: service_fault(bench, lambda: postgres.terminate_backends(DATABASE))),
    }  # fmt: skip
    results: dict[str, float | str] = {}
    try:
        for name, (label, run) in faults.items():
            if args.only and name not in args.only:
                continue
            try:
                results[name] = round(run(), 2)
            except Exception as exc:  # one fault's failure must not hide the others' numbers
                results[name] = f"error: {exc}"
            finally:
                bench.stop_workers()
            print(f"{label:<40} {results[name]}", flush=True)
    finally:
        bench.stop_workers()
        redis.stop()
        postgres.destroy()
        shutil.rmtree(scratch, ignore_errors=True)
    from django.conf import settings

    report = {
        "lease_seconds": settings.CANVAS_LEASE_SECONDS,
        "sweep_seconds": settings.CANVAS_SWEEP_SECONDS,
        "target_seconds": TARGET_SECONDS,
        "seconds": results,
    }
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
