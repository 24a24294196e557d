"""How long our processes take to start, as a newcomer and an operator meet them.

Each measure is the median of several fresh processes (`--quick`: 3, else 5), wall seconds
and, where a process ends, its CPU seconds (user + system, `resource.getrusage` of the
children it leaves behind, itself included):

- cli: `manage.py run_conversation --model scripted` with a four-step script (three `think`
  calls, then `finish`), in the embedded default a newcomer gets with nothing configured: no
  DATABASE_URL or REDIS_URL in the environment (SQLite in a scratch directory migrated once
  beforehand, the in-process worker). Spawn -> exit. Target: <= 3 s wall on a quiet machine.
- worker: `celery -A canvas worker` (the bench Postgres and Redis): spawn -> its ready file
  (canvas.celery writes it on `worker_ready`, when it consumes). CPU: the process's own
  up to that moment (/proc/<pid>/stat), and again 10 s later, to show a background warm-up.
- up again: `manage.py serve --prepare` (what `make up` runs) on an embedded database it has
  prepared before: spawn -> the first HTTP answer of /login/. Target: <= 5 s.
- web: `manage.py serve` in production mode (the bench Postgres and Redis): spawn -> first
  answer of /login/.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/startup.py [--quick] [--json F]
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as common  # noqa: E402

RUNS = 5
QUICK_RUNS = 3
CLI_TARGET_S = 3.0
UP_TARGET_S = 5.0
SCRIPT = json.dumps(
    {
        "script": [
            {"tool": "think", "args": {"thought": "one"}},
            {"tool": "think", "args": {"thought": "two"}},
            {"tool": "think", "args": {"thought": "three"}},
            {"tool": "finish", "args": {"message": "done"}},
        ]
    }
)
TICKS = os.sysconf("SC_CLK_TCK")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _process_cpu(pid: int) -> float:
    """User + system seconds a running process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def newcomer_env(var_dir: Path) -> dict[str, str]:
    """What a newcomer's shell holds: no database, broker or Django settings of ours."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "CANVAS_VAR_DIR": str(var_dir),
    }


def manage(env: dict[str, str], *args: str, timeout: float = 300) -> tuple[float, float, str]:
    """Run `manage.py ARGS` to its end: (wall s, CPU s, output); exits on a failure."""
    cpu = _children_cpu()
    started = time.monotonic()
    done = subprocess.run(
        [common.PYTHON, str(common.REPO / "manage.py"), *args], cwd=common.REPO, env=env,
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    wall = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"manage.py {args[0]} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return wall, _children_cpu() - cpu, done.stdout


def cli_runs(n: int) -> list[dict[str, float]]:
    var_dir = common.scratch_dir() / "cli-var"
    env = newcomer_env(var_dir)
    manage(env, "migrate", "--noinput")
    runs = []
    for i in range(n):
        workspace = common.scratch_dir() / f"cli-ws-{i}"
        wall, cpu, out = manage(
            env, "run_conversation", "--model", "scripted", "--workspace", str(workspace), SCRIPT
        )
        assert "run.finished" in out.splitlines()[-1], out
        runs.append({"wall_s": wall, "cpu_s": cpu})
    return runs


def worker_runs(n: int) -> list[dict[str, float]]:
    env = common.bench_env()
    runs = []
    for i in range(n):
        ready = common.scratch_dir() / f"worker-{i}.ready"
        log = common.scratch_dir() / f"worker-{i}.log"
        started = time.monotonic()
        proc = subprocess.Popen(
            [common.PYTHON, "-m", "celery", "-A", "canvas", "worker", "-l", "WARNING",
             "-n", f"bench-startup-{i}@%h", "--without-heartbeat", "--without-mingle",
             "--without-gossip"],
            cwd=common.REPO, env={**env, "CANVAS_WORKER_READY_FILE": str(ready)},
            stdout=log.open("wb"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            while not ready.exists():
                if proc.poll() is not None or time.monotonic() - started > 120:
                    sys.exit(f"the worker did not start; see {log}:\n{log.read_text()[-2000:]}")
                time.sleep(0.01)
            wall = time.monotonic() - started
            cpu_ready = _process_cpu(proc.pid)
            time.sleep(10)  # what a background warm-up adds after ready
            cpu_later = _process_cpu(proc.pid)
        finally:
            common.stop_process(proc)
        runs.append({"wall_s": wall, "cpu_s": cpu_ready, "cpu_10s_later_s": cpu_later})
    return runs


def _first_answer(env: dict[str, str], args: list[str], log: Path) -> float:
    """Spawn `manage.py serve ARGS` on a free port: seconds to the first answer of /login/."""
    port = common.free_port()
    started = time.monotonic()
    proc = subprocess.Popen(
        [common.PYTHON, str(common.REPO / "manage.py"), "serve", *args,
         "--host", "127.0.0.1", "--port", str(port)],
        cwd=common.REPO, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        waited = common.wait_http(f"http://127.0.0.1:{port}/login/", timeout=300, proc=proc)
        if waited is None:
            sys.exit(f"the server did not answer; see {log}:\n{log.read_text()[-2000:]}")
        return time.monotonic() - started
    finally:
        common.stop_process(proc)


def up_again_runs(n: int) -> list[dict[str, float]]:
    env = newcomer_env(common.scratch_dir() / "up-var")
    log = common.scratch_dir() / "up.log"
    _first_answer(env, ["--prepare"], log)  # the first `make up`: migrates, makes the login
    return [{"wall_s": _first_answer(env, ["--prepare"], log)} for _ in range(n)]


def web_runs(n: int) -> list[dict[str, float]]:
    env = common.bench_env()
    log = common.scratch_dir() / "web.log"
    return [{"wall_s": _first_answer(env, [], log)} for _ in range(n)]


def medians(runs: list[dict[str, float]]) -> dict[str, Any]:
    keys = runs[0].keys()
    return {
        "runs": len(runs),
        **{k: round(statistics.median(r[k] for r in runs), 2) for k in keys},
        "all_wall_s": [round(r["wall_s"], 2) for r in runs],
    }


def main() -> None:
    parser = common.arg_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--only", nargs="*", choices=["cli", "worker", "up_again", "web"], help="A subset."
    )
    options = parser.parse_args()
    os.environ.setdefault("SECRET_KEY", "bench-only-not-a-secret-0123456789abcdefghijklmnop")
    common.setup_django()  # the bench database, migrated, for the worker and the web server
    n = QUICK_RUNS if options.quick else RUNS
    measures = {"cli": cli_runs, "worker": worker_runs, "up_again": up_again_runs, "web": web_runs}
    results: dict[str, Any] = {"load_before": os.getloadavg()[0]}
    for name, measure in measures.items():
        if options.only and name not in options.only:
            continue
        results[name] = medians(measure(n))
        print(name, json.dumps(results[name]), flush=True)
    cli, up = results.get("cli"), results.get("up_again")
    results["ok"] = (cli is None or cli["wall_s"] <= CLI_TARGET_S) and (
        up is None or up["wall_s"] <= UP_TARGET_S
    )
    results["load_after"] = os.getloadavg()[0]
    common.write_results(options.json, results)


if __name__ == "__main__":
    main()
