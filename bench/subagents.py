"""One parent delegating to N sub-agents: wall time against the ideal for the worker slots.

A parent conversation calls `delegate` with N tasks (default 50); each child takes 5 steps
(`think` x4, then `finish`); the parent then calls `finish`. Two real `celery -A canvas worker`
processes (pool and concurrency from CANVAS_WORKER_POOL / CANVAS_WORKER_CONCURRENCY, as the
plain command reads them) run everything, against tests/fakes.py's FakeOpenAI in a child
process that answers every request after `--delay` seconds (default 0.2), in its handler
thread, so LiteLLM's whole HTTP path runs. The bench team gets a Policy row (and the site caps,
CANVAS_SUBAGENT_*, are raised) allowing N children per call, per run and at once.

    ideal = 2 x delay                                 (the parent's own two model calls)
          + ceil(N / slots) x 5 x delay               (the children, `slots` at a time)
    slots = workers x concurrency

Target: wall <= 1.5 x ideal (median of the repetitions). Wall runs from the parent's
`created_at` to its `run.finished` event, both on this machine's clock. Also per run: how
long spawning took (first to last child `created_at`), the settle latency (the last child's
`run.finished` to the parent's next event, `subagents.settled`), where the rest went (see
`phases`), the workers' CPU, and that the parent and every child ended FINISHED.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from collections import Counter, deque
from datetime import datetime
from typing import Any

from _common import (
    PYTHON,
    REPO,
    arg_parser,
    bench_env,
    fake_profiles,
    scratch_dir,
    setup_django,
    stop_process,
    write_results,
)

PROFILE = "benchsub"
TEAM = "bench-subagents"
CHILD_STEPS = 5
"""Model calls per child: `think` on turns 0-3, `finish` on turn 4."""
PARENT_CALLS = 2
"""The parent's: `delegate` on turn 0, `finish` on turn 1."""
TARGET = 1.5
CONFIGS = ((2, 5), (2, 32))
"""(worker processes, threads each): 10 slots (5 rounds of children), 64 (all at once)."""


# --- the fake model, in its own process ------------------------------------------------------


def _first_user_text(request: dict[str, Any]) -> str:
    for message in request.get("messages") or []:
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):  # content parts
                return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


def _serve(conn: Any, delay: float) -> None:
    from tests import fakes
    from tests.fakes import FakeOpenAI, Outcome, assistant_turns

    # socketserver's backlog of 5 refuses connections when 50 children call at once.
    fakes._Server.request_queue_size = 1024
    arrivals: deque[tuple[str, int, float]] = deque()

    def respond(request: dict[str, Any]) -> Outcome:
        # "PARENT 50" or "CHILD c07": who is asking decides the answer, as does the turn.
        who = _first_user_text(request).split()
        turn = assistant_turns(request)
        arrivals.append((" ".join(who[:2]), turn, time.time()))
        if who and who[0] == "PARENT":
            if turn == 0:
                tasks = [
                    {"name": f"c{i:02d}", "prompt": f"CHILD c{i:02d}"} for i in range(int(who[1]))
                ]
                return Outcome(delay=delay, tool="delegate", args={"tasks": tasks})
            return Outcome(delay=delay, tool="finish", args={"message": "all children done"})
        if turn < CHILD_STEPS - 1:  # numbered: identical calls would trip the stuck detector
            return Outcome(delay=delay, tool="think", args={"thought": f"{who[-1]} step {turn}"})
        return Outcome(delay=delay, tool="finish", args={"message": f"{who[-1]} done"})

    fake = FakeOpenAI(responder=respond)
    fake.requests = _Discard()  # thousands of bodies would only grow this process
    fake.request_headers = _Discard()
    with fake:
        conn.send(fake.base_url)
        while conn.recv() == "arrivals":
            batch = []
            while arrivals:
                batch.append(arrivals.popleft())
            conn.send(batch)


class _Discard(list):
    def append(self, item: object) -> None:
        pass


class FakeModel:
    """The fake model in a child process; `arrivals()` hands back (who, turn, time) of every
    request since the last call."""

    def __init__(self, delay: float) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child, delay), daemon=True)

    def __enter__(self) -> FakeModel:
        self._proc.start()
        if not self._conn.poll(30):
            stop_process(self._proc)
            raise RuntimeError("the fake model did not start")
        self.base_url = self._conn.recv()
        self.pid = self._proc.pid
        return self

    def arrivals(self) -> list[tuple[str, int, float]]:
        self._conn.send("arrivals")
        return self._conn.recv() if self._conn.poll(10) else []

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            self._conn.send("stop")
        self._proc.join(5)
        stop_process(self._proc)


# --- workers -----------------------------------------------------------------------------------


def start_workers(count: int, env: dict[str, str], label: str) -> list[subprocess.Popen]:
    """`count` plain `celery -A canvas worker` processes (pool and concurrency from `env`),
    started together; returns once each has written its ready file."""
    workers, ready = [], []
    for i in range(count):
        path = scratch_dir() / f"subagents-{label}-{i}.ready"
        path.unlink(missing_ok=True)
        argv = [PYTHON, "-m", "celery", "-A", "canvas", "worker", "-l", "WARNING",
                "-n", f"sub{label}-{i}@%h", "--without-heartbeat", "--without-mingle",
                "--without-gossip"]  # fmt: skip
        log = (scratch_dir() / f"subagents-{label}-{i}.log").open("wb")
        workers.append(
            subprocess.Popen(
                argv,
                cwd=REPO,
                env={**env, "CANVAS_WORKER_READY_FILE": str(path)},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        )
        ready.append(path)
    deadline = time.monotonic() + 120
    for i, (proc, path) in enumerate(zip(workers, ready, strict=True)):
        while not path.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                for worker in workers:
                    stop_process(worker)
                sys.exit(f"worker {i} did not start; see subagents-{label}-{i}.log")
            time.sleep(0.1)
    return workers


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process (all its threads) so far; 0 if it is gone."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()  # noqa: SIM115
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def postgres_cpu_seconds() -> float:
    """CPU of the whole Postgres server so far: its processes' own, plus what its exited
    backends left in the postmaster's children's counters. Every database's, so other test
    runs on the same server count too."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = open(f"/proc/{entry}/stat").read()  # noqa: SIM115
        except OSError:
            continue
        name, rest = raw.split("(", 1)[1].rsplit(")", 1)
        if name != "postgres":
            continue
        fields = rest.split()
        total += int(fields[11]) + int(fields[12])
        if fields[1] == "1" or not _is_postgres(int(fields[1])):  # the postmaster
            total += int(fields[13]) + int(fields[14])
    return total / tick


def _is_postgres(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/comm").read().strip() == "postgres"  # noqa: SIM115
    except OSError:
        return False


# --- one parent ----------------------------------------------------------------------------------


def _ts(value: datetime) -> float:
    return value.timestamp()


def run_parent(team: Any, children: int, timeout: float) -> dict:
    """Start one parent of `children` sub-agents and wait for it; its timeline."""
    from django.db import connection

    from conversations.models import Conversation, ConversationEvent
    from orchestration.services import conversation_create

    parent = conversation_create(owner=None, team=team, prompt=f"PARENT {children}",
                                 model=PROFILE)  # fmt: skip
    deadline = time.monotonic() + timeout
    status = parent.status
    while time.monotonic() < deadline:
        status = Conversation.objects.filter(pk=parent.pk).values_list("status", flat=True)[0]
        if status not in ("running", "waiting_for_subagents"):
            break
        time.sleep(0.05)
    parent.refresh_from_db()
    kids = list(
        Conversation.objects.filter(parent_id=parent.pk).values(
            "pk", "name", "status", "created_at"
        )
    )
    events: dict[str, list[tuple[str, float]]] = {}
    ids = [parent.pk, *(k["pk"] for k in kids)]
    for conversation_id, kind, created in (
        ConversationEvent.objects.filter(conversation_id__in=ids)
        .order_by("conversation_id", "seq")
        .values_list("conversation_id", "type", "created_at")
    ):
        events.setdefault(str(conversation_id), []).append((kind, _ts(created)))
    ended_on = Counter(
        payload.get("worker", "").rsplit(":", 1)[-1]  # "host:pid"
        for payload in ConversationEvent.objects.filter(
            conversation_id__in=ids[1:], type="run.finished"
        ).values_list("payload", flat=True)
    )
    connection.close()
    return {
        "parent": str(parent.pk),
        "parent_status": status,
        "parent_created": _ts(parent.created_at),
        "children": [
            {
                "id": str(k["pk"]),
                "name": k["name"],
                "status": k["status"],
                "created": _ts(k["created_at"]),
            }
            for k in kids
        ],
        "events": events,
        "children_per_worker_pid": dict(sorted(ended_on.items())),
    }


def first(events: list[tuple[str, float]], kind: str, after: float = 0.0) -> float | None:
    return next((t for k, t in events if k == kind and t >= after), None)


def analyse(raw: dict, arrivals: list, children: int, slots: int, delay: float) -> dict:
    """Wall, ideal, ratio and the phases of one parent's run, from its events and the fake's
    request arrival times (all on this machine's clock)."""
    events = raw["events"]
    p_events = events.get(raw["parent"], [])
    created = raw["parent_created"]
    ended = first(p_events, "run.finished")
    kids = raw["children"]
    ideal = PARENT_CALLS * delay + math.ceil(children / slots) * CHILD_STEPS * delay
    result: dict[str, Any] = {
        "children": len(kids),
        "parent_status": raw["parent_status"],
        "children_finished": sum(1 for k in kids if k["status"] == "finished"),
        "ideal_s": round(ideal, 3),
    }
    if ended is None or not kids:
        return {**result, "wall_s": None, "ratio": None}
    wall = ended - created
    by_who: dict[str, dict[int, float]] = {}
    for who, turn, t in arrivals:
        by_who.setdefault(who, {}).setdefault(turn, t)  # a retry keeps the first arrival
    parent_calls = by_who.get(f"PARENT {children}", {})
    child_created = sorted(k["created"] for k in kids)
    spawned = first(p_events, "subagents.spawned")
    settled = first(p_events, "subagents.settled")
    delegate_call = first(p_events, "tool.call")
    child_ends = [first(events.get(k["id"], []), "run.finished") for k in kids]
    last_end = max((t for t in child_ends if t is not None), default=None)
    next_event = next((t for _, t in p_events if last_end is not None and t >= last_end), None)
    # Each child's model calls (its name is in its first message, "CHILD c07"): queue wait
    # (created -> first call), per-step overhead (an answer's end -> the next call), tail (the
    # last answer -> run.finished).
    waits, gaps, tails, runs, first_calls = [], [], [], [], []
    for kid, end in zip(kids, child_ends, strict=True):
        turns = by_who.get(f"CHILD {kid['name']}", {})
        if not turns:
            continue
        ordered = [turns[t] for t in sorted(turns)]
        first_calls.append(ordered[0])
        waits.append(ordered[0] - kid["created"])
        gaps += [b - (a + delay) for a, b in zip(ordered, ordered[1:], strict=False)]
        if end is not None:
            tails.append(end - (ordered[-1] + delay))
            runs.append(end - ordered[0])
    first_calls.sort()
    phases = {
        "parent created -> its first model call": parent_calls.get(0, created) - created,
        "delegate answered -> tool.call appended": (delegate_call or 0)
        - (parent_calls.get(0, 0) + delay),
        "tool.call -> first child created": child_created[0] - (delegate_call or 0),
        "spawn: first -> last child created": child_created[-1] - child_created[0],
        "last child created -> subagents.spawned": (spawned or 0) - child_created[-1],
        "subagents.spawned -> first child's first model call": (first_calls[0] if first_calls
                                                                 else 0) - (spawned or 0),
        "subagents.spawned -> last child's first model call": (first_calls[-1] if first_calls
                                                                else 0) - (spawned or 0),
        "settle: last child run.finished -> parent's next event": (next_event or 0)
        - (last_end or 0),
        "settled -> parent's second model call": parent_calls.get(1, 0) - (settled or 0),
        "parent's finish answered -> its run.finished": ended - (parent_calls.get(1, 0) + delay),
    }  # fmt: skip
    return {
        **result,
        "wall_s": round(wall, 3),
        "ratio": round(wall / ideal, 3),
        "spawn_s": round(child_created[-1] - child_created[0], 3),
        "settle_s": round((next_event or 0) - (last_end or 0), 3),
        "phases_s": {k: round(v, 3) for k, v in phases.items()},
        "child_queue_wait_s": _summary(waits),
        "child_run_s": _summary(runs),
        "child_step_overhead_ms": _summary([g * 1000 for g in gaps], 1),
        "child_tail_ms": _summary([t * 1000 for t in tails], 1),
        "model_calls": sum(len(t) for t in by_who.values()),
        "children_per_worker_pid": raw["children_per_worker_pid"],
    }


def _summary(values: list[float], digits: int = 3) -> dict[str, float]:
    if not values:
        return {}
    return {
        "median": round(statistics.median(values), digits),
        "max": round(max(values), digits),
        "mean": round(statistics.fmean(values), digits),
    }


# --- a configuration: workers up, a warm-up parent, then the measured ones -------------------


def run_config(args: Any, model: FakeModel, team: Any, workers_n: int, threads: int) -> dict:
    import redis
    from django.conf import settings

    slots = workers_n * threads
    label = f"{workers_n}x{threads}"
    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()  # the bench's own Redis db
    env = bench_env({
        "CANVAS_MODEL_PROFILES": fake_profiles(PROFILE, model.base_url),
        "BENCH_FAKE_KEY": "dummy",
        "CANVAS_WORKER_POOL": "threads",
        "CANVAS_WORKER_CONCURRENCY": str(threads),
    })  # fmt: skip
    workers = start_workers(workers_n, env, label)
    timeout = min(args.timeout, 20 + 20 * (PARENT_CALLS + math.ceil(args.children / slots) * 5)
                  * args.delay)  # fmt: skip
    reps = []
    try:
        warm = run_parent(team, min(args.children, slots), timeout)
        model.arrivals()
        print(f"{label}: warm-up parent {warm['parent_status']}", flush=True)
        for rep in range(args.reps):
            load = os.getloadavg()[0]
            pids = [w.pid for w in workers]
            cpu0 = {p: cpu_seconds(p) for p in [*pids, model.pid]}
            pg0 = postgres_cpu_seconds()
            t0 = time.monotonic()
            raw = run_parent(team, args.children, timeout)
            seen = time.monotonic() - t0
            arrivals = model.arrivals()
            pg = postgres_cpu_seconds() - pg0
            cpu = {p: cpu_seconds(p) - cpu0[p] for p in [*pids, model.pid]}
            result = analyse(raw, arrivals, args.children, slots, args.delay)
            result.update(
                rep=rep + 1, load_before=round(load, 2), load_after=round(os.getloadavg()[0], 2),
                seen_by_bench_s=round(seen, 3),
                cpu_s={"workers": round(sum(cpu[p] for p in pids), 2),
                       "fake_model": round(cpu[model.pid], 2),
                       "postgres_server": round(pg, 2)},
            )  # fmt: skip
            result["worker_cpu_ms_per_model_call"] = round(
                1000 * result["cpu_s"]["workers"] / max(1, result.get("model_calls", 0)), 1
            )
            reps.append(result)
            print(f"{label} rep {rep + 1}: wall {result['wall_s']} s, ideal {result['ideal_s']} s,"
                  f" ratio {result['ratio']}, spawn {result.get('spawn_s')} s, settle "
                  f"{result.get('settle_s')} s, children finished {result['children_finished']}/"
                  f"{args.children}, parent {result['parent_status']}, load {load:.2f}",
                  flush=True)  # fmt: skip
    finally:
        for worker in workers:
            stop_process(worker, grace=20)
    ratios = [r["ratio"] for r in reps if r["ratio"] is not None]
    walls = [r["wall_s"] for r in reps if r["wall_s"] is not None]
    return {
        "label": label,
        "workers": workers_n,
        "threads": threads,
        "slots": slots,
        "children": args.children,
        "ideal_s": reps[0]["ideal_s"] if reps else None,
        "median_wall_s": round(statistics.median(walls), 3) if walls else None,
        "median_ratio": round(statistics.median(ratios), 3) if ratios else None,
        "max_ratio": max(ratios) if ratios else None,
        "all_finished": all(
            r["parent_status"] == "finished"
            and r["children_finished"] == args.children
            and r["children"] == args.children
            for r in reps
        ),  # fmt: skip
        "reps": reps,
    }


def main() -> None:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--children", type=int, default=50)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--timeout", type=float, default=120, help="seconds per parent, at most")
    parser.add_argument(
        "--configs", default=",".join(f"{w}x{c}" for w, c in CONFIGS),
        help="worker processes x threads each, comma-separated",
    )  # fmt: skip
    args = parser.parse_args()
    if args.quick:
        args.children, args.reps = 20, 1
    args.children = max(1, min(args.children, 100))  # delegate takes at most 100 tasks
    configs = [tuple(int(x) for x in c.split("x")) for c in args.configs.split(",")]
    caps = str(max(50, args.children))
    setup_django({
        "CANVAS_SUBAGENT_MAX_CHILDREN_PER_CALL": caps,
        "CANVAS_SUBAGENT_MAX_CHILDREN_PER_RUN": caps,
        "CANVAS_SUBAGENT_MAX_CONCURRENT_CHILDREN": caps,
        "BENCH_FAKE_KEY": "dummy",
    })  # fmt: skip
    from teams.models import Policy, Team
    from teams.policies import policy_for_team

    team, _ = Team.objects.get_or_create(name=TEAM)
    Policy.objects.update_or_create(team=team, defaults={
        "max_children_per_call": int(caps), "max_children_per_run": int(caps),
        "max_concurrent_children": int(caps),
    })  # fmt: skip
    policy = policy_for_team(team.pk)
    for field in ("max_children_per_call", "max_children_per_run", "max_concurrent_children"):
        if (getattr(policy, field) or args.children) < args.children:
            sys.exit(f"bench: the effective policy's {field} is {getattr(policy, field)}")
    results: dict[str, Any] = {"delay_s": args.delay, "children": args.children,
                               "load_start": os.getloadavg(), "configs": []}  # fmt: skip
    with FakeModel(args.delay) as model:
        os.environ["CANVAS_MODEL_PROFILES"] = fake_profiles(PROFILE, model.base_url)
        for workers_n, threads in configs:
            results["configs"].append(run_config(args, model, team, workers_n, threads))
    results["load_end"] = os.getloadavg()
    print()
    print(f"ideal = {PARENT_CALLS} x {args.delay:g} s + ceil({args.children} / slots) x "
          f"{CHILD_STEPS} x {args.delay:g} s; target wall <= {TARGET}x ideal")  # fmt: skip
    for c in results["configs"]:
        walls = ", ".join(f"{r['wall_s']}" for r in c["reps"])
        met = "met" if (c["median_ratio"] or 99) <= TARGET else "MISSED"
        print(
            f"{c['label']} ({c['slots']} slots): ideal {c['ideal_s']} s, wall {walls} s, "
            f"median ratio {c['median_ratio']} ({met}), all finished: {c['all_finished']}"
        )
    print(f"load average {results['load_start'][0]:.2f} -> {results['load_end'][0]:.2f}")
    write_results(args.json, results)


if __name__ == "__main__":
    main()
