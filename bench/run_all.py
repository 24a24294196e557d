"""Run every benchmark and print one summary table against the targets.

Each benchmark runs as its own process (they set up Django with different environments) and
hands its numbers back as JSON. `make bench` runs this.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/run_all.py [--quick] [--strict]

--strict exits 1 when a target is missed (a crashed benchmark always exits 1).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
# Generous bounds per benchmark; each one also bounds its own loops.
BENCHMARKS: dict[str, tuple[list[str], float]] = {
    "step_overhead": (["--breakdown"], 1800.0),
    "append_throughput": ([], 600.0),
    "ws_latency": ([], 300.0),
    "web_footprint": ([], 300.0),
    "first_event": ([], 300.0),
    "sandbox_overhead": ([], 300.0),
    "redaction": ([], 300.0),
    "subagents": ([], 600.0),
    "acp_bridge": ([], 600.0),
    "webhooks": ([], 600.0),
    "condensation": ([], 900.0),
    "resume": ([], 900.0),
    "mcp_slices": ([], 600.0),
    "startup": ([], 900.0),
}


def run_benchmark(name: str, extra: list[str], timeout: float, out: Path) -> dict[str, Any]:
    path = out / f"{name}.json"
    print(f"\n=== {name} ===", flush=True)
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, str(BENCH / f"{name}.py"), "--json", str(path), *extra],
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:  # subprocess.run kills the child on timeout
        return {"error": f"timed out after {timeout:.0f} s"}
    print(f"({name}: {time.monotonic() - started:.0f} s)", flush=True)
    if done.returncode != 0 or not path.exists():
        return {"error": f"exit code {done.returncode}"}
    return json.loads(path.read_text())


def _step(results: dict, label: str, n: int) -> dict[str, Any]:
    for run in results.get("runs", []):
        if run["label"] == label and run["n"] == n:
            return run
    return {}


Row = tuple[str, str, str, bool | None]
"""(measure, value, target, met: None when there is no target)."""


def step_rows(r: dict[str, Any]) -> list[Row]:
    if "error" in r:
        return [("step overhead", r["error"], "", False)]
    unfinished = [f"{run['label']} {run['n']}" for run in r["runs"] if run["status"] != "finished"]
    rows: list[Row] = [
        ("step runs that ended FINISHED (a stuck or failed run's times mean nothing)",
         f"{len(r['runs']) - len(unfinished)}/{len(r['runs'])}", "all", not unfinished)
    ]  # fmt: skip
    n_mid = 200 if _step(r, "http think", 200) else max(run["n"] for run in r["runs"])
    n_max = max(run["n"] for run in r["runs"])
    http, http_max = _step(r, "http think", n_mid), _step(r, "http think", n_max)
    scripted = _step(r, "scripted think", n_mid)
    terminal = _step(r, "http terminal", n_mid)
    s_terminal = _step(r, "scripted terminal", n_mid)
    celery = next((run for run in r["runs"] if run["label"].startswith("celery")), {})
    if http:
        rows.append(
            (f"HTTP think, median ms/step @{n_mid}", f"{http['median_ms']:.1f}", "<= 30",
             http["median_ms"] <= 30)
        )  # fmt: skip
    if http and http_max and n_max != n_mid:
        ratio = http_max["median_ms"] / http["median_ms"]
        rows.append(
            (f"HTTP think median @{n_max} / @{n_mid}", f"{ratio:.2f}x", "<= 2x", ratio <= 2)
        )
        rows.append(
            (f"HTTP think @{n_max}: last 10% / first 10%",
             f"{http_max['last10_ms']:.1f} / {http_max['first10_ms']:.1f} ms", "", None)
        )  # fmt: skip
    if terminal:
        rows.append(
            (f"HTTP terminal `true`, median @{n_mid}", f"{terminal['median_ms']:.1f}", "<= 40",
             terminal["median_ms"] <= 40)
        )  # fmt: skip
    if s_terminal:
        rows.append(
            (f"scripted terminal `true`, median @{n_mid}", f"{s_terminal['median_ms']:.1f}", "",
             None)
        )  # fmt: skip
    if scripted:
        rows.append((f"scripted think, median @{n_mid}", f"{scripted['median_ms']:.1f}", "", None))
        if http:
            ratio = http["median_ms"] / scripted["median_ms"]
            rows.append(("HTTP / scripted (think, median)", f"{ratio:.2f}x", "", None))
    if celery and http:
        rows.append(
            (f"via Celery worker, median / mean @{celery['n']}",
             f"{celery['median_ms']:.1f} / {celery['mean_ms']:.1f}", "", None)
        )  # fmt: skip
        rows.append(
            ("slice hand-over gap, in-process / Celery",
             f"{http['across_slices_ms']:.1f} / {celery['across_slices_ms']:.1f}", "", None)
        )  # fmt: skip
    return rows


def append_rows(r: dict[str, Any]) -> list[Row]:
    if "error" in r:
        return [("append throughput", r["error"], "", False)]
    rows: list[Row] = []
    for run in r["runs"]:
        target = run["appenders"] == 8 and run["batch"] == 1 and "threads" in run["label"]
        rows.append(
            (f"append: {run['label']}, events/s", f"{run['events_per_s']:.0f}",
             "> 2000" if target else "", run["events_per_s"] > 2000 if target else None)
        )  # fmt: skip
    return rows


def ws_rows(r: dict[str, Any]) -> list[Row]:
    if "error" in r:
        return [("websocket latency", r["error"], "", False)]
    return [
        ("append -> websocket p50 ms", f"{r['p50_ms']:.1f}", "", None),
        ("append -> websocket p95 ms", f"{r['p95_ms']:.1f}", "< 20", r["p95_ms"] < 20),
        ("events received", f"{r['received']}/{r['events']}", "all", r["received"] == r["events"]),
    ]


def web_rows(r: dict[str, Any]) -> list[Row]:
    if "error" in r:
        return [("web footprint", r["error"], "", False)]
    return [
        ("web ready (s)", f"{r['ready_s']:.2f}", "< 3", r["ready_s"] < 3),
        ("web idle RSS (MB)", f"{r['idle_rss_mb']:.0f}", "< 150", r["idle_rss_mb"] < 150),
        ("web process LiteLLM-free", str(r["litellm_free"]), "True", r["litellm_free"]),
    ]


def first_event_rows(r: dict[str, Any]) -> list[Row]:
    if "error" in r:
        return [("embedded first event", r["error"], "", False)]
    m, n = r["median"], len(r["starts"])
    return [
        (f"embedded serve ready, median of {n} starts (s)", f"{m['ready_s']:.2f}", "< 5",
         m["ready_s"] < 5),
        ("embedded: first event on the page after a post (ms)", f"{m['first_event_ms']:.0f}",
         "< 1000", m["first_event_ms"] < 1000),
        ("embedded: spawn -> first run ended on the page (s)", f"{m['run_ended_s']:.2f}", "",
         None),
    ]  # fmt: skip


def sandbox_rows(r: dict[str, Any]) -> list[Row]:
    if "error" in r:
        return [("sandbox overhead", r["error"], "", False)]
    return [
        (f"{level} `true`, sandboxed / plain median ms",
         f"{r[level]['sandboxed']['median_ms']:.1f} / {r[level]['plain']['median_ms']:.1f} "
         f"({r[level]['ratio']:.2f}x)", "", None)
        for level in ("launcher", "workspace")
    ]  # fmt: skip


def redaction_rows(r: dict[str, Any]) -> list[Row]:
    if "error" in r:
        return [("redaction", r["error"], "", False)]
    few, many = r["10"], r["1000"]
    return [
        (f"redact a 4 KB text {case}, 1000 / 10 values",
         f"{many[key]:.3f} / {few[key]:.3f} ms ({many[key] / few[key]:.1f}x)", "< 5x",
         many[key] / few[key] < 5)
        for case, key in (("without a secret", "miss_ms"), ("holding one", "hit_ms"))
    ]  # fmt: skip


def subagent_rows(r: dict[str, Any]) -> list[Row]:
    if "error" in r:
        return [("sub-agents", r["error"], "", False)]
    rows: list[Row] = []
    for c in r["configs"]:
        what = f"1 parent x {c['children']} children, {c['workers']} x {c['threads']} threads"
        ratio = c["median_ratio"]
        rows.append(
            (f"{what}: median wall / ideal (s)",
             f"{c['median_wall_s']} / {c['ideal_s']} ({ratio}x)", "<= 1.5x",
             ratio is not None and ratio <= 1.5)
        )  # fmt: skip
        rows.append(
            (f"{what}: parent and children FINISHED", str(c["all_finished"]), "True",
             c["all_finished"])
        )  # fmt: skip
    return rows


def acp_rows(r: dict[str, Any]) -> list[Row]:
    if "error" in r:
        return [("ACP bridge", r["error"], "", False)]
    bridge, bare, permission = r["bridge"], r["bare"], r["permission"]
    rows: list[Row] = [
        ("ACP turns that ended FINISHED", str(r["all_finished"]), "True", r["all_finished"]),
        ("ACP session (a noop turn), bridge / bare SDK ms",
         f"{bridge['noop']['median_ms']:.0f} / {bare['noop']['median_ms']:.0f}", "", None),
    ]  # fmt: skip
    for kind in ("chunks", "tools"):
        rows.append(
            (f"ACP per update ({kind}), bridge / bare SDK ms",
             f"{bridge[f'{kind} per update ms']:.3f} / {bare[f'{kind} per update ms']:.3f}", "",
             None)
        )  # fmt: skip
    rows.append(
        ("ACP permission round trip, policy / person / bare SDK median ms",
         " / ".join(f"{permission[k]['median_ms']:.1f}" for k in ("policy", "person", "bare")),
         "", None)
    )  # fmt: skip
    return rows


def webhook_rows(r: dict[str, Any]) -> list[Row]:
    if "error" in r:
        return [("webhooks", r["error"], "", False)]
    rows: list[Row] = []
    for where in ("in_process", "http"):
        runs = r[where]
        rows.append(
            (f"webhook deliveries/s ({where}): refused / ignored / accepted",
             " / ".join(f"{runs[k]['per_second']:.0f}" for k in ("refused", "ignored", "accepted")),
             "", None)
        )  # fmt: skip
    rows.append(("webhook answers as expected", str(r["ok"]), "True", r["ok"]))
    return rows


def condensation_rows(r: dict[str, Any]) -> list[Row]:
    if "error" in r:
        return [("condensation", r["error"], "", False)]
    run = r["runs"]["benchcondensed"]
    ratio = run["last_over_first"]
    return [
        (f"{r['steps']} steps with condensation ({run['condensations']}): last / first 10% ms",
         f"{run['last10_ms']:.1f} / {run['first10_ms']:.1f} ({ratio:.2f}x)", "<= 1.5x",
         r["ok"]),
    ]  # fmt: skip


def resume_rows(r: dict[str, Any]) -> list[Row]:
    if "error" in r:
        return [("resume", r["error"], "", False)]
    return [
        (f"first step of a {r['events']}-event conversation, cold worker (ms)",
         f"{r['first_step_ms']:.0f} (history {r['history_read_ms']:.0f})", "<= 500", r["ok"]),
    ]  # fmt: skip


def mcp_rows(r: dict[str, Any]) -> list[Row]:
    if "error" in r:
        return [("mcp_slices", r["error"], "", False)]
    kept, fresh = r["kept"], r["started_every_slice"]
    return [
        ("MCP step, one per slice: servers kept / started every slice (ms)",
         f"{kept['median_ms_per_step']:.0f} / {fresh['median_ms_per_step']:.0f}", "", r["ok"]),
    ]  # fmt: skip


def startup_rows(r: dict[str, Any]) -> list[Row]:
    if "error" in r:
        return [("startup", r["error"], "", False)]
    rows: list[Row] = []
    if "cli" in r:
        cli = r["cli"]
        rows.append(
            ("CLI run_conversation --model scripted, 4 steps: wall / CPU s",
             f"{cli['wall_s']:.2f} / {cli['cpu_s']:.2f}", "<= 3", cli["wall_s"] <= 3)
        )  # fmt: skip
    if "worker" in r:
        worker = r["worker"]
        rows.append(
            ("worker start -> ready: wall / CPU s (CPU 10 s later)",
             f"{worker['wall_s']:.2f} / {worker['cpu_s']:.2f} ({worker['cpu_10s_later_s']:.2f})",
             "", None)
        )  # fmt: skip
    if "up_again" in r:
        up = r["up_again"]["wall_s"]
        rows.append(("`make up` second start -> first answer (s)", f"{up:.2f}", "<= 5", up <= 5))
    if "web" in r:
        rows.append(("web start -> first answer (s)", f"{r['web']['wall_s']:.2f}", "", None))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Smaller counts, for a smoke run.")
    parser.add_argument("--strict", action="store_true", help="Exit 1 if a target is missed.")
    parser.add_argument("--only", nargs="*", choices=list(BENCHMARKS), help="A subset.")
    options = parser.parse_args()
    chosen = options.only or list(BENCHMARKS)
    load = os.getloadavg()[0]
    if load > 0.5 * (os.cpu_count() or 1):
        print(f"warning: load average {load:.2f} before starting; numbers will be noisy.")
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="canvas-bench-results-") as out:
        for name in chosen:
            extra, timeout = BENCHMARKS[name]
            extra = [*extra, "--quick"] if options.quick else extra
            results[name] = run_benchmark(name, extra, timeout, Path(out))

    rows: list[Row] = []
    for name, make in (
        ("step_overhead", step_rows),
        ("append_throughput", append_rows),
        ("ws_latency", ws_rows),
        ("web_footprint", web_rows),
        ("first_event", first_event_rows),
        ("sandbox_overhead", sandbox_rows),
        ("redaction", redaction_rows),
        ("subagents", subagent_rows),
        ("acp_bridge", acp_rows),
        ("webhooks", webhook_rows),
        ("condensation", condensation_rows),
        ("resume", resume_rows),
        ("mcp_slices", mcp_rows),
        ("startup", startup_rows),
    ):
        if name in results:
            rows.extend(make(results[name]))
    width = max(len(r[0]) for r in rows) + 2
    print(f"\n{'measure':<{width}} {'value':>22}  {'target':<8} ok")
    for measure, value, target, met in rows:
        mark = "" if met is None else ("yes" if met else "MISSED")
        print(f"{measure:<{width}} {value:>22}  {target:<8} {mark}")
    print(f"\nload average now: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    crashed = any("error" in r for r in results.values())
    missed = any(met is False for *_, met in rows)
    sys.exit(1 if crashed or (options.strict and missed) else 0)


if __name__ == "__main__":
    main()
