"""Every app connection dropped in the middle of a command (pg_terminate_backend, as a
PgBouncer restart or a failover does): the command's real output is recorded, once, and the
run goes on (issue 25 item 3; before, the next runner recorded it as interrupted)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connection

from orchestration import services
from tests.conftest import wait_for
from tests.runs import script

from .checks import (
    assert_log_whole,
    assert_no_overlap,
    assert_nothing_running,
    marked_command,
    wait_started,
)
from .test_services import _finished

pytestmark = [pytest.mark.faults, pytest.mark.worker]

COMMAND_SECONDS = 6.0
"""Three lease periods (stack.FAST_RECOVERY): the lease keeper reconnects meanwhile, and the
slice's own connection is found dead only when the command's result is appended."""


def test_a_command_whose_connections_all_dropped_meanwhile_keeps_its_output(stack):
    stack.start_worker()
    command = f"{marked_command(stack.marker, 'long', COMMAND_SECONDS)}; echo real-output-5e1"
    conversation = services.conversation_create(
        owner=None, model="scripted",
        prompt=script({"tool": "terminal", "args": {"command": command}},
                      {"tool": "finish", "args": {"message": "done"}}),
    )  # fmt: skip
    wait_started(conversation, "long")
    assert stack.postgres.terminate_backends(stack.database) >= 2  # the worker's and ours
    connection.close()
    wait_for(lambda: _finished(conversation), 90, message=f"the run to finish\n{stack.logs()}")

    events = assert_log_whole(conversation.pk)
    assert len({e.id for e in events}) == len(events), "an event was recorded twice"
    (result,) = [e for e in events if e.type == "tool.result" and e.tool == "terminal"]
    assert not result.interrupted, f"{result.content}\n{stack.logs()}"
    assert "real-output-5e1" in result.content and result.exit_code == 0
    assert assert_no_overlap(Path(conversation.workspace_path)) == ["start long", "end long"]
    assert_nothing_running(stack.marker)
