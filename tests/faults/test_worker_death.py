"""A worker killed mid-command: the command dies with it, sandboxed or not, and a new runner
stops whatever a previous one left running before it runs anything."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from orchestration import services
from orchestration.workspace import workspace_of
from tests.conftest import wait_for
from tests.runs import script

from .checks import (
    SIDE_FILE,
    Fault,
    assert_log_whole,
    assert_no_overlap,
    assert_nothing_running,
    marked_pids,
    side_lines,
    status_of,
)

pytestmark = [pytest.mark.worker, pytest.mark.faults]

UNSANDBOXED = {"CANVAS_BWRAP": "/bin/false", "CANVAS_UNSANDBOXED_COMMANDS": "true"}


def marked_command(marker: str, name: str, seconds: float) -> str:
    """checks.marked_command, with the marker on a process's argv (`bash -c CODE $0`; two
    commands, else bash execs the one): the terminal reads its command from a file, so a
    marker in the command text is on no argv."""
    return (
        f"echo 'start {name}' >> {SIDE_FILE}; bash -c 'sleep {seconds}; true' {marker}; "
        f"echo 'end {name}' >> {SIDE_FILE}"
    )


def runner_process(pid: int) -> int:
    """The process that started command `pid`: its nearest Celery ancestor (the worker with
    the threads pool, a pool process with prefork)."""
    while b"celery" not in Path(f"/proc/{pid}/cmdline").read_bytes():
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return pid


@pytest.mark.parametrize(
    "sandbox,pool",
    [("sandboxed", "threads"), ("unsandboxed", "threads"), ("sandboxed", "prefork"),
     ("unsandboxed", "prefork")],
)  # fmt: skip
def test_a_killed_runner_takes_its_command_along_and_the_run_continues(
    stack, sandbox, pool
) -> None:
    """kill -9 of the process running the slice: the whole worker with the threads pool, the
    pool process with prefork (the worker lives on and runs the recovery itself)."""
    env = UNSANDBOXED if sandbox == "unsandboxed" else {}
    conversation = services.conversation_create(
        owner=None, model="scripted",
        prompt=script(
            {"tool": "terminal", "args": {"command": marked_command(stack.marker, "long", 30)}},
            {"tool": "terminal", "args": {"command": marked_command(stack.marker, "next", 0.1)}},
            {"tool": "finish", "args": {"message": "done"}},
        ),
    )  # fmt: skip
    first = stack.start_worker(pool, **env)
    pids = wait_for(
        lambda: "start long" in side_lines(conversation) and marked_pids(stack.marker), 60, 0.05,
        "the command to start",
    )  # fmt: skip
    runner = runner_process(pids[0])
    fault = Fault.now(conversation.pk)
    if runner == first.pid:
        first.kill()  # the worker's main process only: nothing else signals the command
    else:
        os.kill(runner, signal.SIGKILL)
    wait_for(lambda: not marked_pids(stack.marker), 5, 0.05, "the command to die with it")

    if runner == first.pid:
        stack.start_worker(pool, **env)
    recovered = fault.recovery(60)
    wait_for(lambda: status_of(conversation) == "finished", 60, message=stack.logs())
    events = assert_log_whole(conversation.pk)
    long_call = next(e for e in events if e.type == "tool.call" and "long" in e.arguments)
    result = next(e for e in events if e.type == "tool.result" and e.tool_call_id == long_call.tool_call_id)  # fmt: skip
    assert result.interrupted
    assert assert_no_overlap(Path(conversation.workspace_path)) == [
        "start long", "start next", "end next",
    ]  # fmt: skip
    assert_nothing_running(stack.marker)
    print(f"kill -9 mid-command ({sandbox}, {pool}): run continued after {recovered:.1f}s")


def test_a_new_runner_stops_a_command_its_predecessor_left_before_running_anything(stack) -> None:
    """The death signal cannot catch this one: the old runner's process is alive (its lease was
    taken over), so its command would run on beside the new runner's."""
    conversation = services.conversation_create(
        owner=None, model="scripted",
        prompt=script(
            {"tool": "terminal", "args": {"command": marked_command(stack.marker, "next", 0.1)}},
            {"tool": "finish", "args": {"message": "done"}},
        ),
    )  # fmt: skip
    old = workspace_of(conversation)
    leftover = threading.Thread(
        target=old.run, args=(marked_command(stack.marker, "old", 20),), kwargs={"timeout": 60}
    )
    leftover.start()
    wait_for(lambda: "start old" in side_lines(conversation), 30, 0.05, "the old command")

    stack.start_worker()
    wait_for(lambda: status_of(conversation) == "finished", 60, message=stack.logs())
    leftover.join(30)  # 20 s when nobody stops it, and then it writes `end old`
    assert_log_whole(conversation.pk)
    assert assert_no_overlap(Path(conversation.workspace_path)) == [
        "start old", "start next", "end next",
    ]  # fmt: skip
    assert_nothing_running(stack.marker)
