"""The leftover check of conftest.py finds an agent process below this test run, and only
those."""

from __future__ import annotations

import subprocess
import sys

from tests.acp_bridge.conftest import agent_processes
from tests.acp_bridge.turns import AGENT
from tests.conftest import wait_for


def test_a_live_agent_below_this_run_is_found_and_a_reaped_one_is_not() -> None:
    # A stand-in that carries the fixture's path in its command line but never speaks ACP.
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", AGENT])
    try:
        # Popen returns from vfork before exec has set up the new command line, which reads
        # empty for a moment (seen on a loaded machine): wait for it.
        wait_for(
            lambda: any(line.startswith(f"{proc.pid}:") for line in agent_processes()), 5,
            message="the stand-in was not found",
        )  # fmt: skip
    finally:
        proc.kill()
        proc.wait()
    assert not any(line.startswith(f"{proc.pid}:") for line in agent_processes())
