"""After every ACP test, no agent process of this test run is left: the fixture agent, the
Claude Code adapter or its CLI, anywhere below this pytest process (the bridge's sandboxes,
the Celery workers the tests start), once this process's pool of warm agents is closed. Only
our own descendants count, so a second test run on
the same machine cannot fail this one."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.acp_bridge.codex_turns import codex, fake_openai  # noqa: F401  (fixtures)

AGENT_MARKS = (b"agent_fixture.py", b"bench/acp_agent.py", b".acp-agents/")
SETTLE_SECONDS = 10.0
"""A killed group is reaped asynchronously: how long its processes may take to go."""


def _parent(pid: str) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[1]  # after "(comm)": state, then ppid


def _descends_from(pid: str, ancestor: str) -> bool:
    seen = 0
    while pid not in ("0", "1") and seen < 64:
        parent = _parent(pid)
        if parent is None:
            return False
        if parent == ancestor:
            return True
        pid, seen = parent, seen + 1
    return False


def agent_processes() -> list[str]:
    me = str(os.getpid())
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if any(mark in cmdline for mark in AGENT_MARKS) and _descends_from(pid, me):
            shown = cmdline.replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{pid}: {shown}")
    return found


@pytest.fixture(autouse=True)
def no_agent_process_left() -> Iterator[None]:
    yield
    pool = sys.modules.get("orchestration.external.pool")
    if pool is not None:  # agents kept warm for a next turn that will not come
        pool.close_all()
    deadline = time.monotonic() + SETTLE_SECONDS
    left = agent_processes()
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = agent_processes()
    assert left == [], f"agent processes left after the test: {left}"
