"""Shared set-up for the benchmarks: a dedicated database and Redis db, Django, subprocesses.

The benchmarks never touch the dev or test database: DATABASE_URL only says where Postgres
is, and they use the database `canvas_bench` on that server (BENCH_DATABASE_URL overrides),
created and migrated here. Redis likewise: the same server, db 13 (BENCH_REDIS_URL
overrides), so a benchmark's Celery worker never consumes a test run's tasks.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import multiprocessing
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # `tests.fakes`, `canvas`, ... importable when run as a script

BENCH_DB_NAME = "canvas_bench"
BENCH_REDIS_DB = 13
PYTHON = sys.executable


def _bench_database_url() -> str:
    explicit = os.environ.get("BENCH_DATABASE_URL")
    if explicit:
        return explicit
    base = os.environ.get("DATABASE_URL")
    if not base or not base.startswith(("postgres://", "postgresql://")):
        sys.exit("bench: set DATABASE_URL to a Postgres server (its database is not used).")
    parts = urlsplit(base)
    return urlunsplit(parts._replace(path=f"/{BENCH_DB_NAME}"))


def _bench_redis_url() -> str:
    explicit = os.environ.get("BENCH_REDIS_URL")
    if explicit:
        return explicit
    base = os.environ.get("REDIS_URL")
    if not base:
        sys.exit("bench: set REDIS_URL (the benchmarks measure the production setup).")
    parts = urlsplit(base)
    return urlunsplit(parts._replace(path=f"/{BENCH_REDIS_DB}"))


def _ensure_database(url: str) -> None:
    import psycopg
    from psycopg import sql

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


_scratch: Path | None = None


def scratch_dir() -> Path:
    """A temporary directory for workspaces and state, removed at exit."""
    global _scratch
    if _scratch is None:
        inherited = os.environ.get("CANVAS_BENCH_SCRATCH")
        if inherited:  # a child process: the parent owns (and removes) the directory
            _scratch = Path(inherited)
        else:
            _scratch = Path(tempfile.mkdtemp(prefix="canvas-bench-"))
            atexit.register(shutil.rmtree, _scratch, ignore_errors=True)
    return _scratch


def bench_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of this process and of every server or worker a benchmark starts."""
    scratch = scratch_dir()
    env = {
        **os.environ,
        "DATABASE_URL": _bench_database_url(),
        "REDIS_URL": _bench_redis_url(),
        "DJANGO_SETTINGS_MODULE": "canvas.settings",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "CANVAS_WORKSPACES_ROOT": str(scratch / "workspaces"),
        "CANVAS_STATE_ROOT": str(scratch / "state"),
        "CANVAS_BENCH_SCRATCH": str(scratch),
        "LOG_LEVEL": "WARNING",
        "DEBUG": "false",
        "PYTHONPATH": str(REPO),
    }
    env.update(extra or {})
    return env


def setup_django(extra_env: dict[str, str] | None = None, *, migrate: bool = True) -> None:
    """Point this process at the bench database (created if missing), set up Django, migrate."""
    env = bench_env(extra_env)
    name = urlsplit(env["DATABASE_URL"]).path.lstrip("/")
    explicit = "BENCH_DATABASE_URL" in os.environ  # chosen by name (and inherited by children)
    if (
        env["DATABASE_URL"] == os.environ.get("DATABASE_URL")
        and name != BENCH_DB_NAME
        and not explicit
    ):
        sys.exit(f"bench: refusing to use {name!r}, the database in DATABASE_URL.")
    _ensure_database(env["DATABASE_URL"])
    os.environ.update(env)
    import django

    django.setup()
    if migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0, interactive=False)


# --- conversations ------------------------------------------------------------------------------


@contextlib.contextmanager
def captured_enqueues() -> Iterator[list[tuple[str, str]]]:
    """Capture the next-slice enqueues (run control and runner) instead of sending them."""
    from orchestration.chain import dispatch

    sent: list[tuple[str, str]] = []
    original = dispatch.enqueue_slice_on_commit

    def capture(conversation_id: Any, slice_id: str, **routing: Any) -> None:
        sent.append((str(conversation_id), slice_id))  # one process: routing is moot

    dispatch.enqueue_slice_on_commit = capture  # every next slice goes out through schedule_next
    try:
        yield sent
    finally:
        dispatch.enqueue_slice_on_commit = original


def quiet_conversation(*, owner: Any = None, title: str = "bench") -> str:
    """A conversation made through the service (team, workspace, first events as in real
    use) whose run is paused at once: benchmarks append to it directly."""
    from orchestration.run_control import conversation_pause
    from orchestration.services import conversation_create

    with captured_enqueues():
        conversation = conversation_create(owner=owner, prompt=title, model="scripted")
    conversation_pause(conversation_id=conversation.pk, by=None)
    return str(conversation.pk)


# --- statistics ----------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linear between closest ranks."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def step_stats(diffs_ms: Sequence[float]) -> dict[str, float]:
    """Median, p95, and the mean of the first and last 10% of steps (growth with history)."""
    if not diffs_ms:
        return {}
    tenth = max(1, len(diffs_ms) // 10)
    return {
        "steps": len(diffs_ms),
        "median_ms": statistics.median(diffs_ms),
        "p95_ms": percentile(diffs_ms, 95),
        "mean_ms": statistics.fmean(diffs_ms),
        "first10_ms": statistics.fmean(diffs_ms[:tenth]),
        "last10_ms": statistics.fmean(diffs_ms[-tenth:]),
    }


# --- processes -----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_process(proc: subprocess.Popen | multiprocessing.Process, grace: float = 10.0) -> None:
    """SIGTERM the process we started (by its pid), SIGKILL it after `grace` seconds."""
    if isinstance(proc, subprocess.Popen):
        if proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        return
    if proc.is_alive():
        proc.terminate()
        proc.join(grace)
        if proc.is_alive():
            proc.kill()
            proc.join(5)


def wait_http(url: str, *, timeout: float, proc: subprocess.Popen | None = None) -> float | None:
    """Poll `url` until it answers with any HTTP status; seconds waited, or None on timeout."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if proc is not None and proc.poll() is not None:
            return None
        try:
            with urllib.request.urlopen(url, timeout=1.0):
                return time.monotonic() - started
        except urllib.error.HTTPError:
            return time.monotonic() - started  # a 4xx/5xx is still an answer
        except OSError:
            time.sleep(0.02)
    return None


def start_server(env: dict[str, str], port: int, log: Path) -> subprocess.Popen:
    """`manage.py serve` (uvicorn, production mode given REDIS_URL) on 127.0.0.1:port."""
    return subprocess.Popen(
        [PYTHON, str(REPO / "manage.py"), "serve", "--host", "127.0.0.1", "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )


@contextlib.contextmanager
def serving(
    log_name: str, extra_env: dict[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen]]:
    """`manage.py serve` with the bench environment (plus `extra_env`) on a free port, once
    /login/ answers: its base URL and process. Stopped on the way out; exits with its log if
    it never answers."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = scratch_dir() / log_name
    server = start_server(bench_env(extra_env), port, log)
    try:
        if wait_http(f"{base}/login/", timeout=60, proc=server) is None:
            sys.exit(f"the server did not answer; see {log}:\n{log.read_text()[-2000:]}")
        yield base, server
    finally:
        stop_process(server)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# --- a fake OpenAI server in its own process -----------------------------------------------------


def _serve_fake(conn: Any, steps: int, tool: str, args: Any) -> None:
    from tests.fakes import FakeOpenAI, tool_until

    with FakeOpenAI(responder=tool_until(steps, tool, args)) as fake:
        conn.send(fake.base_url)
        conn.recv()  # blocks until the parent says stop (or closes the pipe)


class FakeServerProcess:
    """tests.fakes.FakeOpenAI in a child process, answering `tool` until `steps` calls, then
    `finish`. A separate process keeps the server's JSON work off the measured process's GIL,
    as a remote provider would be."""

    def __init__(self, steps: int, tool: str = "think", args: Any = None) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(
            target=_serve_fake,
            args=(child, steps, tool, args if args is not None else {"thought": "x"}),
            daemon=True,
        )
        self.base_url = ""

    def __enter__(self) -> FakeServerProcess:
        self._proc.start()
        try:
            if not self._conn.poll(30):
                raise EOFError
            self.base_url = self._conn.recv()
        except EOFError:
            stop_process(self._proc)
            raise RuntimeError("the fake OpenAI server process did not start") from None
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):  # the child may be gone already
            self._conn.send("stop")
        self._proc.join(5)
        stop_process(self._proc)


def fake_profiles(name: str, base_url: str) -> str:
    """CANVAS_MODEL_PROFILES naming one profile that reaches the fake server."""
    return json.dumps(
        {
            name: {
                "model": "openai/fake-model",
                "api_base": base_url,
                "api_key_env": "BENCH_FAKE_KEY",
                "timeout": 30,
                "num_retries": 0,
            }
        }
    )


# --- results -------------------------------------------------------------------------------------


def arg_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--json", type=Path, help="Also write the results here (for run_all).")
    parser.add_argument("--quick", action="store_true", help="Smaller counts, for a smoke run.")
    return parser


def write_results(path: Path | None, results: dict[str, Any]) -> None:
    if path is not None:
        path.write_text(json.dumps(results, indent=2, default=str))
