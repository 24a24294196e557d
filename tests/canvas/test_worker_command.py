"""The worker command (canvas/worker_command.py, issue 25): `-P prefork` on the command line
runs prefork over the configured threads, with one process per core; and an idle worker,
threads or prefork, stops within the documented grace after SIGTERM (docs/deploy.md)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.worker

IDLE_STOP_SECONDS = 15
"""docs/deploy.md, "Supervising workers": an idle worker exits within this of SIGTERM."""

THE_PROJECTS_POOL = {"CANVAS_WORKER_POOL": "threads"}
"""What a deployment without overrides configures (canvas/settings.py)."""


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


@pytest.mark.parametrize(
    ("pool_args", "banner", "processes"),
    [((), "(thread)", 0), (("-P", "prefork"), "(prefork)", os.cpu_count())],
    ids=["plain-threads", "typed-prefork"],
)
def test_the_pool_asked_for_and_an_idle_stop_within_the_grace(
    start_worker, pool_args, banner, processes
):
    worker = start_worker(pool_args=pool_args, extra_env=THE_PROJECTS_POOL)
    (line,) = [line for line in worker.log_path.read_text().splitlines() if "concurrency:" in line]
    assert line.endswith(banner), line
    pool = children(worker.proc.pid)
    assert len(pool) == processes, line

    os.kill(worker.proc.pid, signal.SIGTERM)  # the main process only, as `docker stop` does
    try:
        worker.proc.wait(IDLE_STOP_SECONDS)
    except subprocess.TimeoutExpired:
        log = worker.log_path.read_text()[-3000:]
        pytest.fail(f"an idle worker still ran {IDLE_STOP_SECONDS}s after SIGTERM:\n{log}")
    assert worker.proc.returncode == 0, worker.log_path.read_text()[-3000:]
    assert not [pid for pid in pool if Path(f"/proc/{pid}").exists()], "pool outlived its worker"
