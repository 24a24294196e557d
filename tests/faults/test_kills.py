"""kill -9 of a pool process, and of a whole worker, mid-command and mid-LLM call: another
runner continues the run, the interrupted command gets its `interrupted` observation, and
the command died with its runner."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from conversations.models import Conversation
from orchestration import services
from tests.conftest import wait_for
from tests.fakes import FakeOpenAI, Outcome, SlowOnce, assistant_turns
from tests.runs import script

from .checks import (
    Fault,
    assert_log_whole,
    assert_no_overlap,
    assert_nothing_running,
    marked_command,
    marked_pids,
    status_of,
    wait_started,
)

pytestmark = [pytest.mark.faults, pytest.mark.worker]

RECOVERY_TARGET = 10.0
"""Seconds, with a 2 s lease and a 1 s sweep (stack.FAST_RECOVERY)."""


def command_run(stack) -> Conversation:
    """c0, then c1 that sleeps far longer than the test (it is the one interrupted), c2."""
    return services.conversation_create(
        owner=None, model="scripted",
        prompt=script(
            {"tool": "terminal", "args": {"command": marked_command(stack.marker, "c0", 0.1)}},
            {"tool": "terminal", "args": {"command": marked_command(stack.marker, "c1", 60)}},
            {"tool": "terminal", "args": {"command": marked_command(stack.marker, "c2", 0.1)}},
            {"tool": "finish", "args": {"message": "recovered"}},
        ),
    )  # fmt: skip


def assert_recovered_from_interrupted_command(stack, conversation, fault: Fault) -> float:
    seconds = fault.recovery()
    wait_for(lambda: status_of(conversation) == "finished", 60, message="the run to finish")
    events = assert_log_whole(conversation.pk)
    # By its side-file line: a bare "c1" can also occur in the random hex of the marker.
    c1_call = next(e for e in events if e.type == "tool.call" and "start c1" in str(e.arguments))
    c1_result = next(
        e for e in events if e.type == "tool.result" and e.tool_call_id == c1_call.tool_call_id
    )
    assert c1_result.interrupted and "interrupted" in c1_result.content
    assert_nothing_running(stack.marker)
    lines = assert_no_overlap(Path(conversation.workspace_path))
    assert lines == ["start c0", "end c0", "start c1", "start c2", "end c2"]
    assert seconds < RECOVERY_TARGET, f"the run continued after {seconds:.1f}s"
    return seconds


def test_kill_9_of_a_worker_mid_command(stack):
    stack.start_worker()
    stack.start_worker()  # already up: the measure is the framework's, not a worker's boot
    conversation = command_run(stack)
    wait_started(conversation, "c1")
    # Either worker may have taken c1's slice: kill the one whose process runs it.
    wait_for(lambda: marked_pids(stack.marker), 10, message="c1's process")
    chain = ancestry(stack.marker)
    (runner,) = [w for w in stack.workers if w.pid in chain] or [None]
    assert runner is not None, f"c1 runs in no worker: {chain}"
    runner.kill()
    assert_recovered_from_interrupted_command(stack, conversation, Fault.now(conversation.pk))


def ancestry(marker: str) -> list[int]:
    """The marked command's pid, its parent's, and so on up to (not including) pid 1."""
    (pid,) = marked_pids(marker)[:1] or [None]
    assert pid is not None, "the marked command is not running"
    chain = []
    while pid not in (0, 1):
        chain.append(pid)
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return chain


def pool_process_of(worker, marker: str) -> int:
    """The pool process (a child of the worker's main process) that runs the marked command."""
    chain = ancestry(marker)
    assert worker.pid in chain[1:], f"the command does not descend from {worker.pid}: {chain}"
    return chain[chain.index(worker.pid) - 1]


def test_kill_9_of_a_pool_process_mid_command(stack):
    worker = stack.start_worker(pool="prefork", concurrency=2)
    conversation = command_run(stack)
    wait_started(conversation, "c1")
    wait_for(lambda: marked_pids(stack.marker), 10, message="c1's process")
    pool_process = pool_process_of(worker, stack.marker)
    os.kill(pool_process, signal.SIGKILL)
    assert_recovered_from_interrupted_command(stack, conversation, Fault.now(conversation.pk))


@pytest.fixture
def slow_model():
    """Turn 0 runs a command; the first request of turn 1 answers after a minute (the one the
    worker dies in), its retry at once; turn 2 finishes."""
    slow = SlowOnce()

    def respond(request) -> Outcome:
        turn = assistant_turns(request)
        if turn == 0:
            return Outcome(
                tool="terminal",
                args={"command": "echo 'start m0' >> side.log; echo 'end m0' >> side.log"},
            )
        if turn == 1:
            return slow()
        return Outcome(tool="finish", args={"message": "done"})

    with FakeOpenAI(respond) as fake:
        fake.slow_arrived = slow.arrived
        yield fake


def test_kill_9_of_a_worker_mid_llm_call(stack, slow_model):
    model_env = {"CANVAS_LLM_API_BASE": slow_model.base_url, "CANVAS_LLM_API_KEY": "sk-fake"}
    first = stack.start_worker(**model_env)
    conversation = services.conversation_create(owner=None, model="openai/fake-model", prompt="go")
    wait_for(slow_model.slow_arrived.is_set, 60, message="the slow model call")
    # Only now the second: with both up from the start the slow call could be the second's,
    # and killing the first would interrupt nothing.
    stack.start_worker(**model_env)
    first.kill()
    fault = Fault.now(conversation.pk)
    seconds = fault.recovery()
    wait_for(lambda: status_of(conversation) == "finished", 60, message="the run to finish")
    events = assert_log_whole(conversation.pk)
    calls = [str(e.arguments) for e in events if e.type == "tool.call"]
    assert sum("again" in c for c in calls) == 1 and not any("slow" in c for c in calls), calls
    assert_no_overlap(Path(conversation.workspace_path))
    assert seconds < RECOVERY_TARGET, f"the run continued after {seconds:.1f}s"
