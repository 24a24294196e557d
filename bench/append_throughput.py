"""Throughput of `conversations.store.append`, the one door into the event log.

Small events (an ObservationEvent with 200 characters of content), one event per append, so
every event is its own transaction (on Postgres one prepared statement that locks and updates
the conversation row and inserts the event, committed on its own) plus the after-commit hint to
the channel layer. Measured with one appender on one conversation; with 8 threads and with 8
processes at once, each appending to its own conversation; and with 8 threads appending
batches of 10 events per call, the shape of a parallel tool-call batch.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/append_throughput.py [--quick]
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as common  # noqa: E402

EVENTS_PER_APPENDER = 2000
QUICK_EVENTS_PER_APPENDER = 300
THREADS = 8
BUDGET_SECONDS = 60.0
"""An appender stops early once this much time has passed; the rate is still per event."""


def _conversation() -> str:
    return common.quiet_conversation(title="append benchmark")


def _event(i: int) -> Any:
    from conversations.events import ObservationEvent

    return ObservationEvent(tool_call_id=f"call_{i}", tool="think", content=("x" * 199) + "\n")


def _appender(
    conversation_id: str, events: int, batch: int, deadline: float, out: list[dict]
) -> None:
    from django.db import connection

    from conversations import store

    latencies: list[float] = []
    appended = 0
    try:
        while appended < events and time.perf_counter() < deadline:
            chunk = [_event(appended + k) for k in range(batch)]
            started = time.perf_counter()
            store.append(conversation_id, chunk)
            latencies.append((time.perf_counter() - started) * 1000)
            appended += batch
    finally:
        connection.close()  # each thread has its own connection; don't leave it open
    out.append({"events": appended, "latencies": latencies})


def run(label: str, appenders: int, events: int, batch: int = 1) -> dict[str, Any]:
    conversations = [_conversation() for _ in range(appenders)]
    outs: list[dict] = []
    started = time.perf_counter()
    deadline = started + BUDGET_SECONDS
    threads = [
        threading.Thread(target=_appender, args=(cid, events, batch, deadline, outs))
        for cid in conversations
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    return _summary(label, appenders, batch, outs, elapsed)


def _summary(
    label: str, appenders: int, batch: int, outs: list[dict], elapsed: float
) -> dict[str, Any]:
    total = sum(o["events"] for o in outs)
    latencies = [lat for o in outs for lat in o["latencies"]]
    tenth = max(1, len(outs[0]["latencies"]) // 10) if outs else 1
    early = [lat for o in outs for lat in o["latencies"][:tenth]]
    late = [lat for o in outs for lat in o["latencies"][-tenth:]]
    return {
        "label": label,
        "appenders": appenders,
        "batch": batch,
        "events": total,
        "seconds": round(elapsed, 2),
        "events_per_s": total / elapsed if elapsed else 0.0,
        "append_p50_ms": common.percentile(latencies, 50),
        "append_p95_ms": common.percentile(latencies, 95),
        "first10_ms": sum(early) / len(early) if early else float("nan"),
        "last10_ms": sum(late) / len(late) if late else float("nan"),
    }


def _process_appender(
    conversation_id: str, events: int, batch: int, ready: Any, go: Any, results: Any
) -> None:
    common.setup_django(migrate=False)
    ready.release()
    go.wait(60)
    out: list[dict] = []
    _appender(conversation_id, events, batch, time.perf_counter() + BUDGET_SECONDS, out)
    results.put(out[0])


def run_processes(label: str, appenders: int, events: int, batch: int = 1) -> dict[str, Any]:
    """As `run`, but each appender is its own process, the way Celery workers append: no
    shared GIL. Timing starts once every process has set up Django."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    conversations = [_conversation() for _ in range(appenders)]
    ready, go, results = ctx.Semaphore(0), ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_process_appender, args=(cid, events, batch, ready, go, results))
        for cid in conversations
    ]
    for proc in procs:
        proc.start()
    try:
        for _ in procs:
            if not ready.acquire(timeout=120):
                raise RuntimeError("an appender process did not start")
        started = time.perf_counter()
        go.set()
        outs = [results.get(timeout=BUDGET_SECONDS + 60) for _ in procs]
        elapsed = time.perf_counter() - started
    finally:
        for proc in procs:
            proc.join(10)
            common.stop_process(proc)
    return _summary(label, appenders, batch, outs, elapsed)


def _row(r: dict[str, Any]) -> str:
    return (
        f"{r['label']:<28} {r['events']:>7} {r['seconds']:>7.2f} {r['events_per_s']:>9.0f} "
        f"{r['append_p50_ms']:>8.2f} {r['append_p95_ms']:>8.2f} "
        f"{r['first10_ms']:>8.2f} {r['last10_ms']:>8.2f}"
    )


HEADER = (
    f"{'run':<28} {'events':>7} {'secs':>7} {'events/s':>9} {'p50 ms':>8} {'p95 ms':>8} "
    f"{'first10%':>8} {'last10%':>8}"
)


def main() -> None:
    options = common.arg_parser(__doc__.splitlines()[0]).parse_args()
    common.setup_django()
    events = QUICK_EVENTS_PER_APPENDER if options.quick else EVENTS_PER_APPENDER
    print(HEADER, flush=True)
    runs = []
    for label, appenders, batch, runner in (
        ("1 conversation, 1 thread", 1, 1, run),
        (f"{THREADS} conversations, {THREADS} threads", THREADS, 1, run),
        (f"{THREADS} conversations, {THREADS} procs", THREADS, 1, run_processes),
        (f"{THREADS} threads, batches of 10", THREADS, 10, run),
    ):
        runs.append(runner(label, appenders, events, batch))
        print(_row(runs[-1]), flush=True)
    common.write_results(options.json, {"runs": runs, "load_avg": os.getloadavg()})


if __name__ == "__main__":
    main()
