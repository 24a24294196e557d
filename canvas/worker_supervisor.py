"""`python manage.py worker`: one `celery -A canvas worker` per core, threads inside each.

A slice costs 15-30 ms of our Python per step, and one process runs Python on one core at a
time (the GIL): the plain `celery -A canvas worker` (one process of 32 threads) left every other
core idle. On a 2-core machine two processes of 8 threads finished 200 conversations x 20
steps in 86-106 s against 128-171 s (issue 27; docs/deploy.md, "Workers").

The supervisor is a plain parent: it starts the children, forwards a stop to them, restarts one
that dies, and touches neither Django's database nor the broker. Each child is an ordinary
Celery worker with its own node name, so everything a worker does (warm shutdown, the host's
heartbeat, the host queue) is unchanged; several processes of one host share the host's row.

`manage.py worker` checks its arguments, then replaces itself (same pid, for docker and
systemd) with this file run as a script (`exec_supervisor`): a supervisor that had set Django
up held 92 MB RSS for nothing, this one 15 MB. So it imports only the standard library.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.2
BACKOFF_SECONDS = (1.0, 2.0, 5.0, 10.0, 30.0)
"""The wait before restarting a child, by how many times in a row it died soon after starting."""
STABLE_SECONDS = 60.0
"""A child that ran this long before dying is restarted after the shortest wait again."""
STARTUP_FAILURES = 3
"""A child that dies this many times in a row before it is ready ends the command: a bad
argument or setting, not bad luck; restarting it forever would hide the error."""

OWN_OPTIONS = {
    "-c": "--threads or CANVAS_WORKER_THREADS",
    "--concurrency": "--threads or CANVAS_WORKER_THREADS",
    "-P": "the plain `celery -A canvas worker -P ...`",
    "--pool": "the plain `celery -A canvas worker -P ...`",
    "-n": "--name",
    "--hostname": "--name",
}
"""Celery options the supervisor sets itself for every child, and what to use instead."""
BEAT_OPTIONS = ("-B", "--beat")
"""Celery's embedded beat: only the first child runs it (one scheduler per deployment)."""


def exec_supervisor(
    *, processes: int, threads: int, name: str, cwd: Path, celery_args: Sequence[str]
) -> None:
    """Become the supervisor: run this file by its path with -P, so neither the project's
    package (`canvas/__init__` loads Celery and the settings) nor this directory (its
    `logging.py` would shadow the standard library's) is on sys.path."""
    check_arguments(processes, threads, celery_args)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(
        sys.executable,
        [sys.executable, "-P", __file__, str(processes), str(threads), name, str(cwd),
         *celery_args],
    )  # fmt: skip


class SupervisorError(Exception):
    """Bad arguments, or a child that cannot start: the command's clear error."""


def default_processes() -> int:
    """The cores this process may run on (a container's cpuset, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def check_arguments(processes: int, threads: int, celery_args: Sequence[str]) -> None:
    if processes < 1 or threads < 1:
        raise SupervisorError(
            f"processes and threads must be at least 1 (got {processes} x {threads})"
        )
    for arg in celery_args:
        option = arg.split("=", 1)[0]
        if option in OWN_OPTIONS:
            raise SupervisorError(
                f"{option} is set for every child by `manage.py worker`; use {OWN_OPTIONS[option]}"
            )


def child_argv(*, index: int, threads: int, name: str, celery_args: Sequence[str]) -> list[str]:
    """The command line of child `index`: the threads pool, its own node name, the caller's
    arguments (without beat, except for the first child)."""
    passed = [a for a in celery_args if index == 0 or a not in BEAT_OPTIONS]
    return [
        sys.executable, "-m", "celery", "-A", "canvas", "worker",
        "-P", "threads", "-c", str(threads), "-n", f"{name}-{index}@%h", *passed,
    ]  # fmt: skip


@dataclass
class Child:
    index: int
    argv: list[str]
    env: dict[str, str]
    ready_file: Path
    proc: subprocess.Popen | None = None
    started_at: float = 0.0
    ready: bool = False
    startup_failures: int = 0
    quick_deaths: int = 0
    restart_at: float | None = 0.0
    """When to start it (monotonic); None while it runs or once the command stops."""

    @property
    def name(self) -> str:
        return self.argv[self.argv.index("-n") + 1].split("@", 1)[0]

    def start(self, cwd: Path) -> None:
        self.ready_file.unlink(missing_ok=True)
        # The supervisor's own process group: a terminal's Ctrl-C reaches the children
        # directly as well as through the supervisor, and Celery takes a second SIGINT as a
        # cold shutdown; so the supervisor forwards SIGTERM, which stays warm.
        self.proc = subprocess.Popen(self.argv, cwd=cwd, env=self.env)
        self.started_at = time.monotonic()
        self.ready = False
        self.restart_at = None
        logger.info("worker %s started (pid %d)", self.name, self.proc.pid)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


class Supervisor:
    """Starts `processes` children of `threads` threads, keeps them running, stops them on
    SIGTERM or SIGINT. `ready_file`: written (the children's pids, one a line) whenever every
    child is ready, the way a single worker announces itself (CANVAS_WORKER_READY_FILE)."""

    def __init__(
        self,
        *,
        processes: int,
        threads: int,
        celery_args: Sequence[str] = (),
        name: str = "canvas",
        cwd: Path,
        ready_file: Path | None = None,
    ) -> None:
        check_arguments(processes, threads, celery_args)
        self.cwd = cwd
        self.threads = threads
        self.ready_file = ready_file
        self.stopping = False
        self._announced: list[int] = []
        self._told: set[int] = set()
        """Children already sent SIGTERM: the check after the loop sends none twice."""
        self._dir = Path(tempfile.mkdtemp(prefix="canvas-worker-"))
        env = {k: v for k, v in os.environ.items() if k != "CANVAS_WORKER_READY_FILE"}
        # The children's database pool follows their slots (canvas/settings.py, pool_max),
        # unless CANVAS_DB_POOL_MAX names a cap.
        env["CANVAS_WORKER_CONCURRENCY"] = str(threads)
        self.children = [
            Child(
                index=i,
                argv=child_argv(index=i, threads=threads, name=name, celery_args=celery_args),
                env={**env, "CANVAS_WORKER_READY_FILE": str(self._dir / f"{i}.ready")},
                ready_file=self._dir / f"{i}.ready",
            )
            for i in range(processes)
        ]

    def run(self) -> int:
        """Until stopped: 0 after a stop asked for, or SupervisorError when a child cannot
        start."""
        previous = {s: signal.signal(s, self._stop) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            logger.info(
                "starting %d worker processes x %d threads", len(self.children), self.threads
            )
            while not self.stopping:
                self._tend()
                time.sleep(POLL_SECONDS)
            self._stop_children()  # one the signal caught inside Popen, before it was known
            self._wait_for_children()
            return 0
        except BaseException:
            self._stop_children()
            self._wait_for_children()
            raise
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            for child in self.children:
                child.ready_file.unlink(missing_ok=True)
            self._dir.rmdir()

    def _stop(self, signum: int, _frame: FrameType | None) -> None:
        if not self.stopping:
            logger.info("%s: stopping %d workers (warm)", signal.Signals(signum).name, self.live())
        self.stopping = True
        self._stop_children()

    def live(self) -> int:
        return sum(child.alive() for child in self.children)

    def _stop_children(self) -> None:
        for child in self.children:
            child.restart_at = None
            if child.proc is not None and child.alive() and child.proc.pid not in self._told:
                child.proc.send_signal(signal.SIGTERM)
                self._told.add(child.proc.pid)

    def _wait_for_children(self) -> None:
        for child in self.children:
            if child.proc is not None:
                code = child.proc.wait()
                logger.info("worker %s stopped (%s)", child.name, describe_exit(code))

    def _tend(self) -> None:
        now = time.monotonic()
        for child in self.children:
            if child.proc is None or child.proc.returncode is not None:
                if child.restart_at is not None and now >= child.restart_at:
                    child.start(self.cwd)
                continue
            code = child.proc.poll()
            if code is not None:
                self._died(child, code, now)
            elif not child.ready and child.ready_file.exists():
                child.ready = True
                child.startup_failures = 0
        self._announce()

    def _died(self, child: Child, code: int, now: float) -> None:
        assert child.proc is not None
        ran = now - child.started_at
        how = describe_exit(code)
        was_ready = child.ready or child.ready_file.exists()
        if not was_ready:
            child.startup_failures += 1
            if child.startup_failures >= STARTUP_FAILURES:
                raise SupervisorError(
                    f"worker {child.name} exited before it was ready {STARTUP_FAILURES} times "
                    f"in a row, the last with {how}; its output is above "
                    f"(command: {' '.join(child.argv[1:])})"
                )
        child.quick_deaths = child.quick_deaths + 1 if ran < STABLE_SECONDS else 1
        wait = BACKOFF_SECONDS[min(child.quick_deaths, len(BACKOFF_SECONDS)) - 1]
        child.restart_at = now + wait
        child.ready = False
        logger.warning(
            "worker %s (pid %d) died with %s after %.0f s%s; starting it again in %.0f s",
            child.name, child.proc.pid, how, ran, "" if was_ready else " before it was ready",
            wait,
        )  # fmt: skip

    def _announce(self) -> None:
        if self.ready_file is None or not all(child.ready for child in self.children):
            return
        pids = [child.proc.pid for child in self.children if child.proc is not None]
        if pids == self._announced:
            return
        self._announced = pids
        partial = self.ready_file.with_name(self.ready_file.name + ".partial")
        partial.write_text("".join(f"{pid}\n" for pid in pids))
        partial.replace(self.ready_file)  # whole, never half written
        logger.info("all %d workers ready", len(pids))


def main(argv: Sequence[str]) -> int:
    """`exec_supervisor`'s side: PROCESSES THREADS NAME CWD [celery arguments...]."""
    processes, threads, name, cwd, *celery_args = argv
    logging.basicConfig(
        level=os.environ.get("LOG_LEVEL", "INFO").upper(),
        format="[%(asctime)s: %(levelname)s/supervisor] %(message)s",
    )
    ready_file = os.environ.get("CANVAS_WORKER_READY_FILE")
    try:
        return Supervisor(
            processes=int(processes), threads=int(threads), celery_args=celery_args, name=name,
            cwd=Path(cwd), ready_file=Path(ready_file) if ready_file else None,
        ).run()  # fmt: skip
    except SupervisorError as error:
        print(f"CommandError: {error}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
