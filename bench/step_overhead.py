"""Framework cost per agent step, with a model that answers at once.

A step is one LLM call, its tool call and result appended to the log, and the tool run.
Models: the scripted provider (LiteLLM custom handler, no network) and a fake OpenAI server
over HTTP (tests/fakes.py in its own process) reached as a real LiteLLM provider. Tools:
`think` (does nothing) and `terminal` running `true` (a real bash in the workspace).

Slices run in this process, `run_slice` called in a loop with the next slice id captured
instead of sent to Celery: framework cost without queue latency. One more run goes through a
real `celery worker -P solo` subprocess to show what the queue adds.

Per-step time is the gap between consecutive `tool.call` events' timestamps, so it includes
everything between two model calls: slice hand-over, lease, history refresh, appends.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/step_overhead.py [--quick] [--profile]
"""

from __future__ import annotations

import cProfile
import gc
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as common  # noqa: E402

HTTP_PROFILE = "benchfake"
STEP_COUNTS = (50, 200, 1000)
QUICK_STEP_COUNTS = (20, 100)
WORKER_STEPS = 200
RUN_BUDGET_SECONDS = 300.0
"""A run that has not finished by then is stopped and reported as incomplete."""
TOOLS: dict[str, dict[str, Any]] = {
    "think": {"thought": "x"},
    "terminal": {"command": "true"},
}


def _varied(args: dict[str, Any], step: int) -> dict[str, Any]:
    # Identical calls would (rightly) trip the stuck detector after four steps.
    key = "thought" if "thought" in args else "command"
    return {**args, key: f"{args[key]} # {step}" if key == "command" else f"{args[key]} {step}"}


def _script_prompt(tool: str, steps: int) -> str:
    return json.dumps(
        {"script": [{"tool": tool, "args": _varied(TOOLS[tool], i)} for i in range(steps)]}
    )


def step_gaps_ms(conversation_id: str) -> list[float]:
    from conversations.models import ConversationEvent

    stamps = list(
        ConversationEvent.objects.filter(conversation_id=conversation_id, type="tool.call")
        .order_by("seq")
        .values_list("created_at", flat=True)
    )
    return [(b - a).total_seconds() * 1000 for a, b in zip(stamps, stamps[1:], strict=False)]


def slice_split(gaps: list[float]) -> dict[str, float]:
    """Median gap inside a slice and across a slice hand-over (release, enqueue, claim).

    Every slice runs CANVAS_SLICE_STEPS steps (none here comes near the slice's time limit),
    so gap i crosses a hand-over when (i + 1) is a multiple of it."""
    from django.conf import settings

    every = settings.CANVAS_SLICE_STEPS
    across = [g for i, g in enumerate(gaps) if (i + 1) % every == 0]
    inside = [g for i, g in enumerate(gaps) if (i + 1) % every != 0]
    return {
        "inside_slice_ms": statistics.median(inside) if inside else float("nan"),
        "across_slices_ms": statistics.median(across) if across else float("nan"),
    }


def _result(label: str, conversation_id: str, steps: int, wall: float, **extra: Any) -> dict:
    from conversations.models import Conversation

    conversation = Conversation.objects.get(pk=conversation_id)
    gaps = step_gaps_ms(conversation_id)
    return {
        "label": label,
        "n": steps,
        "status": conversation.status,
        "llm_steps": conversation.steps,
        "wall_s": round(wall, 2),
        **common.step_stats(gaps),
        **slice_split(gaps),
        **extra,
    }


def _fresh_process_state() -> None:
    """Forget earlier runs' cached histories so each run starts like a fresh worker would
    (a 1000-step history left in the cache makes every later garbage collection slower)."""
    from orchestration.step import history

    history._cache.clear()
    gc.collect()


def run_in_process(label: str, model: str, prompt: str, steps: int) -> dict:
    """Create a conversation and drive its slices here until the run ends (or the budget)."""
    from orchestration.chain.slices import run_slice
    from orchestration.services import conversation_create

    _fresh_process_state()
    with common.captured_enqueues() as sent:
        conversation = conversation_create(
            owner=None, prompt=prompt, model=model, max_iterations=steps + 10
        )
        started = time.perf_counter()
        slices = 0
        while sent and time.perf_counter() - started < RUN_BUDGET_SECONDS:
            conversation_id, slice_id = sent.pop(0)
            wait = run_slice(conversation_id, slice_id)
            if wait is not None:  # cannot happen with one runner; keep the loop honest
                time.sleep(wait)
                sent.append((conversation_id, slice_id))
            slices += 1
        wall = time.perf_counter() - started
    return _result(label, str(conversation.pk), steps, wall, slices=slices)


def http_run(tool: str, steps: int) -> dict:
    with common.FakeServerProcess(steps, tool, TOOLS[tool]) as fake:
        os.environ["CANVAS_MODEL_PROFILES"] = common.fake_profiles(HTTP_PROFILE, fake.base_url)
        return run_in_process(f"http {tool}", HTTP_PROFILE, "benchmark", steps)


def scripted_run(tool: str, steps: int) -> dict:
    return run_in_process(f"scripted {tool}", "scripted", _script_prompt(tool, steps), steps)


def _wait_until_done(conversation_id: str, timeout: float) -> bool:
    from conversations.models import Conversation

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = Conversation.objects.filter(pk=conversation_id).values_list("status", flat=True)
        if status.first() not in ("running", "idle"):
            return True
        time.sleep(0.05)
    return False


def worker_run(steps: int) -> dict:
    """The HTTP think run, but with every slice going through Redis to a Celery worker."""
    from orchestration.services import conversation_create

    log = common.scratch_dir() / "celery-worker.log"
    with common.FakeServerProcess(steps, "think", TOOLS["think"]) as fake:
        profiles = common.fake_profiles(HTTP_PROFILE, fake.base_url)
        os.environ["CANVAS_MODEL_PROFILES"] = profiles
        env = common.bench_env({"CANVAS_MODEL_PROFILES": profiles, "BENCH_FAKE_KEY": "dummy"})
        worker = subprocess.Popen(
            [common.PYTHON, "-m", "celery", "-A", "canvas", "worker", "-P", "solo", "-c", "1",
             "--without-mingle", "--without-gossip", "-l", "warning"],
            cwd=common.REPO, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            # Warm-up: the worker is ready (and has imported LiteLLM) once this one finishes.
            ready_started = time.perf_counter()
            warm = conversation_create(
                owner=None, prompt=_script_prompt("think", 1), model="scripted"
            )
            if not _wait_until_done(str(warm.pk), 120):
                tail = log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"the Celery worker did not run a slice:\n{tail}")
            ready = time.perf_counter() - ready_started
            conversation = conversation_create(
                owner=None, prompt="benchmark", model=HTTP_PROFILE, max_iterations=steps + 10
            )
            started = time.perf_counter()
            _wait_until_done(str(conversation.pk), RUN_BUDGET_SECONDS)
            wall = time.perf_counter() - started
        finally:
            common.stop_process(worker)
    return _result("celery http think", str(conversation.pk), steps, wall, worker_ready_s=ready)


class Phases:
    """Wall time spent in each phase of a step, by wrapping the functions the runner calls.

    Only for looking inside a run: the wrappers add a few microseconds per call."""

    TARGETS = (
        ("llm", "orchestration.step.llm", "LiteLLMClient", "complete"),
        ("append", "conversations.store", None, "append"),
        ("refresh", "orchestration.step.runner", None, "history_refresh"),
        ("tool", "orchestration.step.runner", None, "execute_action"),
        ("claim", "orchestration.chain.slices", None, "lease_claim"),
        ("release", "orchestration.chain.slices", None, "release"),
    )

    def __init__(self) -> None:
        self.calls: dict[str, list[float]] = {name: [] for name, *_ in self.TARGETS}
        self._undo: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> Phases:
        import importlib

        for name, module_name, class_name, attr in self.TARGETS:
            owner = importlib.import_module(module_name)
            if class_name:
                owner = getattr(owner, class_name)
            original = getattr(owner, attr)
            setattr(owner, attr, self._wrap(name, original))
            self._undo.append((owner, attr, original))
        return self

    def __exit__(self, *exc: object) -> None:
        for owner, attr, original in reversed(self._undo):
            setattr(owner, attr, original)

    def _wrap(self, name: str, fn: Any) -> Any:
        record = self.calls[name].append

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                record((time.perf_counter() - started) * 1000)

        return timed

    def per_step(self, steps: int) -> dict[str, dict[str, float]]:
        """Per phase: ms per step over the whole run, and mean ms per call early vs late."""
        out = {}
        for name, values in self.calls.items():
            if not values:
                continue
            tenth = max(1, len(values) // 10)
            out[name] = {
                "ms_per_step": sum(values) / max(1, steps),
                "calls": len(values),
                "first10_ms": sum(values[:tenth]) / tenth,
                "last10_ms": sum(values[-tenth:]) / tenth,
            }
        return out


def breakdown_run(steps: int, tool: str = "think") -> dict[str, dict[str, float]]:
    with common.FakeServerProcess(steps, tool, TOOLS[tool]) as fake:
        os.environ["CANVAS_MODEL_PROFILES"] = common.fake_profiles(HTTP_PROFILE, fake.base_url)
        run_in_process("warm-up", HTTP_PROFILE, "benchmark", 5)
        with Phases() as phases:
            run_in_process(f"breakdown http {tool}", HTTP_PROFILE, "benchmark", steps)
    return phases.per_step(steps)


def _print_breakdown(steps: int, phases: dict[str, dict[str, float]]) -> None:
    print(f"\nWhere a step's time goes (http think, N={steps}), per call first 10% -> last 10%:")
    for name, p in phases.items():
        print(
            f"  {name:<8} {p['ms_per_step']:>6.1f} ms/step  {p['calls']:>5} calls  "
            f"{p['first10_ms']:>6.2f} -> {p['last10_ms']:>6.2f} ms/call"
        )


def profile_run(steps: int, tool: str = "think", top: int = 30) -> str:
    """cProfile one in-process HTTP run; the hottest functions by cumulative and own time."""
    profiler = cProfile.Profile()
    with common.FakeServerProcess(steps, tool, TOOLS[tool]) as fake:
        os.environ["CANVAS_MODEL_PROFILES"] = common.fake_profiles(HTTP_PROFILE, fake.base_url)
        # Warm up first so imports LiteLLM does lazily on its first calls stay out of the
        # profile: it should show what every step costs.
        run_in_process("warm-up", HTTP_PROFILE, "benchmark", 5)
        profiler.enable()
        run_in_process(f"profile http {tool}", HTTP_PROFILE, "benchmark", steps)
        profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).strip_dirs()
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()


def _row(r: dict) -> str:
    growth = r["last10_ms"] / r["first10_ms"] if r.get("first10_ms") else float("nan")
    return (
        f"{r['label']:<20} {r['n']:>5} {r['status']:<9} {r['median_ms']:>8.1f} "
        f"{r['p95_ms']:>8.1f} {r['first10_ms']:>9.1f} {r['last10_ms']:>9.1f} {growth:>6.2f}x "
        f"{r['inside_slice_ms']:>7.1f} {r['across_slices_ms']:>7.1f} {r['wall_s']:>7.1f}"
    )


HEADER = (
    f"{'variant':<20} {'N':>5} {'status':<9} {'med ms':>8} {'p95 ms':>8} {'first10%':>9} "
    f"{'last10%':>9} {'growth':>7} {'inside':>7} {'across':>7} {'wall s':>7}"
)


def main() -> None:
    parser = common.arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true", help="Also cProfile an HTTP run.")
    parser.add_argument("--breakdown", action="store_true", help="Also time each phase.")
    parser.add_argument("--no-worker", action="store_true", help="Skip the Celery worker run.")
    parser.add_argument("--steps", type=int, nargs="*", help="Override the step counts.")
    options = parser.parse_args()
    common.setup_django({"BENCH_FAKE_KEY": "dummy"})
    counts = options.steps or (QUICK_STEP_COUNTS if options.quick else STEP_COUNTS)

    runs: list[dict] = []
    print(HEADER, flush=True)
    for tool in TOOLS:
        for provider in (scripted_run, http_run):
            for steps in counts:
                runs.append(provider(tool, steps))
                print(_row(runs[-1]), flush=True)
    if not options.no_worker:
        steps = min(WORKER_STEPS, max(counts))
        runs.append(worker_run(steps))
        print(_row(runs[-1]), f"(worker ready {runs[-1]['worker_ready_s']:.1f}s)", flush=True)
    results: dict[str, Any] = {"runs": runs, "load_avg": os.getloadavg()}
    if options.breakdown:
        results["breakdown"] = {}
        for steps in (200, 1000) if not options.quick else (50,):
            results["breakdown"][steps] = breakdown_run(steps)
            _print_breakdown(steps, results["breakdown"][steps])
    if options.profile:
        report = profile_run(200 if not options.quick else 50)
        results["profile"] = report
        print(report)
    common.write_results(options.json, results)


if __name__ == "__main__":
    main()
