"""Many conversations at once: does waiting on the model waste worker capacity?

N conversations (default 200) x S steps (default 20) through real `celery -A canvas worker`
processes started with the plain command (the pool and concurrency come from the settings;
`--layout manage-worker`: one `python manage.py worker`, the README's command, instead), against tests/fakes.py's FakeOpenAI in a child process. Two runs with the same workers: a model
that answers at once (the CPU-bound ceiling) and one that answers after `--delay` seconds.
Target: the delayed run reaches at least 80% of the ceiling's steps/s.

Sampled every 0.25 s: model calls in flight, slices waiting in the broker, Postgres
connections to the bench database (pg_stat_activity), the workers' RSS. A sample where slices
wait in the queue while every worker slot is only waiting on its model is "starved": capacity
wasted on waiting.

Each worker thread keeps a database connection, and each running slice's lease heartbeat one
more: point BENCH_DATABASE_URL at a server whose max_connections allows workers x concurrency
x 2 (bench/README.md shows how to start a private one).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from _common import (
    PYTHON,
    REPO,
    arg_parser,
    bench_env,
    captured_enqueues,
    fake_profiles,
    rss_mb,
    scratch_dir,
    setup_django,
    stop_process,
    write_results,
)

PROFILE = "benchslow"
SAMPLE_SECONDS = 0.25


def _serve(conn: Any, steps: int, delay: float, in_flight: Any, served: Any) -> None:
    from tests import fakes
    from tests.fakes import FakeOpenAI, Outcome, assistant_turns

    # socketserver's listen backlog of 5 refuses connections when 64 slots call at once
    # (LiteLLM: "Connection error"); a provider's backlog is far larger.
    fakes._Server.request_queue_size = 1024

    def respond(request: dict[str, Any]) -> Outcome:
        with in_flight.get_lock():
            in_flight.value += 1
        try:
            if delay:
                time.sleep(delay)  # in the handler thread, so the counter sees the wait
            turn = assistant_turns(request)
            if turn < steps:
                return Outcome(tool="think", args={"thought": f"step {turn}"})
            return Outcome(tool="finish", args={"message": "done"})
        finally:
            with in_flight.get_lock():
                in_flight.value -= 1
                served.value += 1

    fake = FakeOpenAI(responder=respond)
    fake.requests = _Discard()  # 4,000+ bodies would only grow this process
    fake.request_headers = _Discard()
    with fake:
        conn.send(fake.base_url)
        conn.recv()


class _Discard(list):
    def append(self, item: object) -> None:
        pass


class SlowModel:
    """The fake model in a child process, with shared counters of calls in flight and served."""

    def __init__(self, steps: int, delay: float) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.in_flight = ctx.Value("i", 0)
        self.served = ctx.Value("i", 0)
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(
            target=_serve, args=(child, steps, delay, self.in_flight, self.served), daemon=True
        )

    def __enter__(self) -> SlowModel:
        self._proc.start()
        if not self._conn.poll(30):
            stop_process(self._proc)
            raise RuntimeError("the fake model did not start")
        self.base_url = self._conn.recv()
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            self._conn.send("stop")
        self._proc.join(5)
        stop_process(self._proc)


QUIET = ["-l", "WARNING", "--without-heartbeat", "--without-mingle", "--without-gossip"]


def start_workers(args: Any, env: dict[str, str]) -> tuple[list[subprocess.Popen], list[int]]:
    """The layout's processes to stop, and the pids whose RSS counts: `--workers` plain
    `celery -A canvas worker` processes, or one `manage.py worker` and its children."""
    if args.layout == "manage-worker":
        argv = [PYTHON, "manage.py", "worker", *QUIET, "--name", "scale"]
        proc, ready = _start(0, argv, env)
        return [proc], [proc.pid, *map(int, ready.read_text().split())]
    workers = []
    for i in range(args.workers):
        argv = [PYTHON, "-m", "celery", "-A", "canvas", "worker",
                *shlex.split(args.pool_args), *QUIET, "-n", f"scale{i}@%h"]  # fmt: skip
        workers.append(_start(i, argv, env)[0])
    return workers, [w.pid for w in workers]


def _start(i: int, argv: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, Path]:
    ready = scratch_dir() / f"scale-worker-{i}.ready"
    ready.unlink(missing_ok=True)
    log = (scratch_dir() / f"scale-worker-{i}.log").open("wb")
    proc = subprocess.Popen(
        argv, cwd=REPO, env={**env, "CANVAS_WORKER_READY_FILE": str(ready)},
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 180
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"worker {i} did not start; see {log.name}")
        time.sleep(0.1)
    return proc, ready


def queued_slices(client: Any) -> int:
    """Slice messages waiting in the broker (the default queue and the host queues)."""
    keys = [k for k in client.scan_iter(count=1000) if k in (b"celery",) or k.startswith(b"host.")]
    return sum(client.llen(k) for k in keys if client.type(k) == b"list")


def run_once(args: Any, delay: float) -> dict[str, Any]:
    import psycopg
    import redis
    from django.conf import settings
    from django.db import connection

    from conversations.models import Conversation
    from orchestration.chain.dispatch import send_slice
    from orchestration.services import conversation_create

    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.flushdb()  # the bench's own Redis db: leftovers of an earlier run
    db = settings.DATABASES["default"]
    monitor = psycopg.connect(
        host=db["HOST"], port=db["PORT"], user=db["USER"], dbname="postgres", autocommit=True
    )
    with SlowModel(args.steps, delay) as model:
        profiles = fake_profiles(PROFILE, model.base_url)
        os.environ.update(CANVAS_MODEL_PROFILES=profiles, BENCH_FAKE_KEY="dummy")
        env = bench_env({"CANVAS_MODEL_PROFILES": profiles, "BENCH_FAKE_KEY": "dummy"})
        workers, measured = start_workers(args, env)
        try:
            idle_rss = sum(rss_mb(pid) for pid in measured)
            with captured_enqueues() as sent:
                ids = [
                    conversation_create(owner=None, prompt=f"scale {i}", model=PROFILE).pk
                    for i in range(args.conversations)
                ]
            connection.close()  # the bench process's own connection stays out of the count
            samples: list[dict[str, float]] = []
            started = time.monotonic()
            for conversation_id, slice_id in sent:
                send_slice(conversation_id, slice_id)
            done = threading.Event()

            def sample() -> None:
                while not done.wait(SAMPLE_SECONDS):
                    pg = monitor.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [db["NAME"]]
                    ).fetchone()[0]
                    samples.append({
                        "t": time.monotonic() - started,
                        "in_flight": model.in_flight.value,
                        "queued": queued_slices(broker),
                        "pg": pg,
                        "rss": sum(rss_mb(pid) for pid in measured),
                    })  # fmt: skip

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            deadline = started + args.timeout
            while time.monotonic() < deadline:
                running = Conversation.objects.filter(pk__in=ids, status="running").count()
                connection.close()
                if not running:
                    break
                time.sleep(0.25)
            elapsed = time.monotonic() - started
            done.set()
            sampler.join()
            statuses = Conversation.objects.filter(pk__in=ids).values_list("status", flat=True)
            finished = sum(1 for s in statuses if s == "finished")
            connection.close()
        finally:
            for worker in workers:
                stop_process(worker, grace=30)
        served = model.served.value
    monitor.close()
    slots = args.processes * args.concurrency
    busy = [s for s in samples if s["t"] > 1.0]  # past the burst of first sends
    starved = [s for s in busy if s["queued"] > 0 and s["in_flight"] >= slots]
    peak_rss = max((s["rss"] for s in samples), default=idle_rss)
    return {
        "layout": args.layout_name,
        "model_delay_s": delay,
        "conversations": args.conversations,
        "finished": finished,
        "model_calls": served,
        "seconds": round(elapsed, 2),
        "steps_per_s": round(served / elapsed, 1),
        "slots": slots,
        "peak_in_flight": max((s["in_flight"] for s in samples), default=0),
        "mean_in_flight": round(sum(s["in_flight"] for s in busy) / max(1, len(busy)), 1),
        "peak_queued": max((s["queued"] for s in samples), default=0),
        "starved_samples": f"{len(starved)}/{len(busy)}",
        "starved_at": [round(s["t"], 1) for s in starved],
        "pg_connections_peak": max((s["pg"] for s in samples), default=0),
        "worker_rss_idle_mb": round(idle_rss, 1),
        "worker_rss_peak_mb": round(peak_rss, 1),
        "rss_mb_per_running_conversation": round(
            (peak_rss - idle_rss) / min(slots, args.conversations), 2
        ),
    }


def main() -> None:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--workers", type=int, default=2, help="worker processes (one per core)")
    parser.add_argument(
        "--pool-args", default="", help='e.g. "-P threads -c 16"; empty: the plain command'
    )
    parser.add_argument(
        "--layout",
        choices=["celery", "manage-worker"],
        default="celery",
        help="celery: --workers x `celery -A canvas worker --pool-args`; manage-worker: the "
        "README's `python manage.py worker` with its defaults (CANVAS_WORKER_PROCESSES x "
        "CANVAS_WORKER_THREADS); --workers and --pool-args do not apply",
    )
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    if args.quick:
        args.conversations, args.steps = 40, 5
    setup_django()
    from django.conf import settings

    if args.layout == "manage-worker":
        args.processes, args.concurrency = (
            settings.CANVAS_WORKER_PROCESSES, settings.CANVAS_WORKER_THREADS,
        )  # fmt: skip
        args.layout_name = f"manage.py worker ({args.processes} x {args.concurrency})"
    else:
        args.processes, args.concurrency = args.workers, settings.CELERY_WORKER_CONCURRENCY
        parts = shlex.split(args.pool_args)
        if "-c" in parts:
            args.concurrency = int(parts[parts.index("-c") + 1])
        args.layout_name = f"celery worker {args.pool_args or '(plain)'} x {args.workers}"
    ceiling = run_once(args, 0.0)
    print("instant model:", ceiling, flush=True)
    slow = run_once(args, args.delay)
    print(f"{args.delay:g} s model:", slow, flush=True)
    ratio = slow["steps_per_s"] / ceiling["steps_per_s"]
    print(f"ratio {ratio:.2f} (target >= 0.80)")
    write_results(args.json, {"ceiling": ceiling, "slow": slow, "ratio": round(ratio, 3)})


if __name__ == "__main__":
    main()
