"""A Postgres outage longer than the gone period ends no run: every host falls silent with the
database, and the sweeper judges hosts only once live workers have had their heartbeat
periods to write again (orchestration/chain/steady.py), and never one whose workers answer a
ping (orchestration/chain/stranded.py)."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from conversations import store
from conversations.events import AgentErrorEvent
from orchestration import services
from orchestration.chain.stranded import HOST_GONE
from orchestration.models import SweepMark
from tests.conftest import wait_for
from tests.runs import script

from .checks import (
    SIDE_FILE,
    assert_log_whole,
    assert_no_overlap,
    assert_nothing_running,
    marked_command,
    side_lines,
    status_of,
)

pytestmark = [pytest.mark.faults, pytest.mark.worker]

GONE = 30
OUTAGE = 35
"""Seconds Postgres is down: longer than the gone period, as in the issue's fault run."""
HEARTBEAT = 10
"""Long enough that sweeps (every second) reach the database well before the workers' first
beat after it returns: judged on heartbeats alone, the runs would end (2 of 5 runs with the
default 5 s in a try without the fix, 0 of 5 in another)."""

RUNS = 5
STEPS = 4
GATE = "gate"


def gated(name: str) -> str:
    """A command that waits (up to two minutes) for the test to open the gate: each run is
    surely mid-run when the database goes, however slowly the others start."""
    wait = f"for t in $(seq 1200); do test -e {GATE} && break; sleep 0.1; done"
    return f"echo 'start {name}' >> {SIDE_FILE}; {wait}; echo 'end {name}' >> {SIDE_FILE}"


def terminal(command: str) -> dict:
    return {"tool": "terminal", "args": {"command": command}}


def runs_at_the_gate(stack) -> list:
    """RUNS runs, each waiting at its gate after a first command."""
    runs = [
        services.conversation_create(
            owner=None, model="scripted",
            prompt=script(
                terminal(marked_command(stack.marker, f"r{n}a", 0.3)),
                terminal(gated(f"r{n}gate")),
                *[terminal(marked_command(stack.marker, f"r{n}c{i}", 0.3)) for i in range(STEPS)],
                {"tool": "finish", "args": {"message": "done"}},
            ),
        )
        for n in range(RUNS)
    ]  # fmt: skip
    wait_for(
        lambda: all(f"start r{n}gate" in side_lines(run) for n, run in enumerate(runs)), 120,
        message=f"every run to reach its gate\n{stack.logs()}",
    )  # fmt: skip
    return runs


def settled(runs) -> bool:
    try:
        return all(status_of(run) in ("finished", "error") for run in runs)
    except Exception:  # a connection opened before the outage: take a new one
        connection.close()
        return False


def test_an_outage_longer_than_the_gone_period_ends_no_run(stack):
    env = {
        "CANVAS_WORKER_GONE_SECONDS": str(GONE),
        "CANVAS_WORKER_HEARTBEAT_SECONDS": str(HEARTBEAT),
    }
    stack.start_worker(concurrency=4, **env)
    stack.start_worker(concurrency=4, **env)
    runs = runs_at_the_gate(stack)

    connection.close()
    stack.postgres.stop("immediate")
    time.sleep(OUTAGE)
    stack.postgres.start()
    back = time.monotonic()
    for run in runs:
        (Path(run.workspace_path) / GATE).touch()
    wait_for(lambda: settled(runs), 120, message=f"the runs to end\n{stack.logs()}")
    took = time.monotonic() - back

    for run in runs:
        events = [s.event for s in store.load(run.pk)]
        gone = [e for e in events if isinstance(e, AgentErrorEvent) and e.code == HOST_GONE]
        assert not gone, gone[0].message
        assert status_of(run) == "finished"
        assert_log_whole(run.pk)
        lines = assert_no_overlap(Path(run.workspace_path))
        assert lines[-1] == f"end r{runs.index(run)}c{STEPS - 1}"
    assert_nothing_running(stack.marker)
    mark = SweepMark.objects.get()  # the sweeper saw the gap, and waited from its end
    assert mark.steady_since > timezone.now() - timedelta(seconds=time.monotonic() - back)
    print(f"{OUTAGE} s outage, gone period {GONE} s: {RUNS} runs finished {took:.1f} s after")
