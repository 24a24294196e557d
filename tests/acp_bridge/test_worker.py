"""ACP turns on real Celery workers (Redis, Postgres, the fixture agent in its sandbox): the
queues they go to, a permission request answered from the inbox while the worker waits, and a
worker killed mid-turn. After each test no agent process of this module is left."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import redis

from conversations.events import (
    POLICY_DECIDER,
    AcpSessionEvent,
    ActionDecisionEvent,
    ActionEvent,
    AgentErrorEvent,
    AgentMessageEvent,
    ObservationEvent,
    RunFinishedEvent,
    Status,
)
from orchestration import services
from orchestration.chain.dispatch import ACP_QUEUE, host_queue
from orchestration.chain.sweep import REVIVED, sweep_runs
from orchestration.control import approvals
from orchestration.external.home import agent_home, agent_homes_sweep
from tests.acp_bridge.turns import FIXTURE, fixture_profile, of, row, start
from tests.conftest import WorkerProcess, holds_for, wait_for
from tests.runs import script

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

MARKER = f"acp-worker-test-{uuid.uuid4().hex[:12]}"
"""An argument the fixture agent ignores: names this module's agents in /proc, whoever their
parent is now. conftest.py's check counts only this pytest's descendants, and an agent that
outlived its killed worker would have been re-parented away from them."""
DEFAULT_QUEUE = "celery"
FAST_RECOVERY = {"CANVAS_LEASE_SECONDS": "3", "CANVAS_SWEEP_SECONDS": "1"}


def profile(**extra) -> dict:
    base = fixture_profile(**extra)
    return {**base, "args": [*base["args"], MARKER]}


def acp_env(profile_extra: dict | None = None, **extra: str) -> dict[str, str]:
    """The worker is a subprocess: its agent profiles come from its environment."""
    agents = {FIXTURE: profile(**(profile_extra or {}))}
    return {"CANVAS_ACP_AGENTS": json.dumps(agents), **extra}


def agent_pids() -> list[int]:
    """Processes of this module's fixture agents (bwrap and the agent inside it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"agent_fixture.py" in cmdline and MARKER.encode() in cmdline:
            found.append(int(entry.name))
    return found


@pytest.fixture(autouse=True)
def fixture_agent(settings) -> Iterator[None]:
    settings.CANVAS_ACP_AGENTS = {FIXTURE: profile()}  # conversation_create checks it here
    yield
    # Torn down after start_worker, which stopped the workers: their agents must be gone,
    # orphans included.
    wait_for(lambda: not agent_pids(), 10, message=f"agents left: {agent_pids()}")


@pytest.fixture
def broker(settings) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(settings.REDIS_URL)
    yield client
    client.close()


def start_together(start_worker, *kwargs: dict) -> list[WorkerProcess]:
    """Boot workers at once: most of a test's time is a worker loading LiteLLM."""
    with ThreadPoolExecutor(len(kwargs)) as pool:
        return list(pool.map(lambda options: start_worker(**options), kwargs))


def identity(worker: WorkerProcess) -> str:
    """How the events name a worker (orchestration.step.runner.worker_identity)."""
    from django.conf import settings

    assert worker.proc is not None
    return f"{settings.CANVAS_WORKER_HOST}:{worker.proc.pid}"


def status_of(conversation) -> str:
    return row(conversation).status


def all_are(conversations, status: Status) -> bool:
    return all(status_of(c) == status for c in conversations)


def ended_by(conversation) -> str:
    return of(conversation, RunFinishedEvent)[-1].worker


def test_acp_turns_go_to_acp_workers_and_native_slices_to_the_others(start_worker, user, broker):
    acp_turn = start(user, "stream")
    native = services.conversation_create(
        owner=user, model="scripted", prompt=script({"tool": "finish", "args": {"message": "ok"}})
    )
    wait_for(
        lambda: (broker.llen(ACP_QUEUE), broker.llen(DEFAULT_QUEUE)) == (1, 1), 10,
        message="one slice on each queue",
    )  # fmt: skip
    acp_worker, default_worker = start_together(
        start_worker, {"queues": (ACP_QUEUE,), "extra_env": acp_env()}, {}
    )
    wait_for(lambda: status_of(acp_turn) == Status.FINISHED, 60, message="the acp turn")
    wait_for(lambda: status_of(native) == Status.FINISHED, 60, message="the native run")
    assert [e.text for e in of(acp_turn, AgentMessageEvent)] == ["one two three"]
    assert of(acp_turn, AcpSessionEvent)[0].worker == identity(acp_worker)
    assert ended_by(acp_turn) == identity(acp_worker)
    assert ended_by(native) == identity(default_worker)

    # Pinned to its host now: the next turn goes to that host's acp queue, and only there.
    host = row(acp_turn).worker_host
    assert host
    default_worker.stop()
    acp_worker.stop()
    services.conversation_post_message(conversation_id=acp_turn.pk, text="echo", sender=user)
    queue = host_queue(host, base=ACP_QUEUE)
    wait_for(lambda: broker.llen(queue) == 1, 10, message="the next turn on the host's acp queue")
    assert (broker.llen(ACP_QUEUE), broker.llen(DEFAULT_QUEUE), broker.llen(host_queue(host))) == (
        0, 0, 0,
    )  # fmt: skip


def test_a_permission_request_waits_on_the_worker_until_a_person_approves(
    start_worker, user, broker
):
    # With the sweeper running (beat) and a 3 s lease: the waiting turn keeps renewing it.
    start_worker(queues=(ACP_QUEUE,), beat=True, extra_env=acp_env(**FAST_RECOVERY))
    conversation = start(user, "edit notes.txt hello there")
    wait_for(
        lambda: approvals.pending_actions(conversation.pk), 60, message="the permission request"
    )
    (pending,) = approvals.pending_actions(conversation.pk)
    holds_for(
        lambda: status_of(conversation) == Status.WAITING_FOR_CONFIRMATION
        and row(conversation).lease_token is not None,
        4.0, message="the turn to hold its lease while it waits, past a lease period",
    )  # fmt: skip
    assert of(conversation, AgentErrorEvent) == []  # never revived
    workspace = Path(row(conversation).workspace_path)
    assert not (workspace / "notes.txt").exists()

    decided = approvals.action_approve(
        conversation_id=conversation.pk, action_id=pending.action_id, by=user, option_id="yes"
    )
    assert decided == "approved"
    wait_for(lambda: status_of(conversation) == Status.FINISHED, 30, message="the turn to end")
    assert (workspace / "notes.txt").read_text() == "hello there"
    assert of(conversation, ActionDecisionEvent)[0].option_id == "yes"
    assert of(conversation, AgentMessageEvent)[-1].text == "edited notes.txt"
    # The approval sent no second slice: the waiting turn took the answer itself.
    host = row(conversation).worker_host
    assert broker.llen(ACP_QUEUE) == broker.llen(host_queue(host, base=ACP_QUEUE)) == 0


def test_turns_whose_worker_is_killed_end_lost_and_the_next_message_runs(start_worker, user):
    """One turn waits for a person, one streams; SIGKILL takes the worker and both agents."""
    first = start_worker(queues=(ACP_QUEUE,), extra_env=acp_env(**FAST_RECOVERY))
    waiting = start(user, "edit notes.txt never")
    streaming = start(user, "slow 1000")
    wait_for(
        lambda: status_of(waiting) == Status.WAITING_FOR_CONFIRMATION, 60,
        message="the permission request",
    )  # fmt: skip
    wait_for(lambda: of(streaming, AcpSessionEvent), 60, message="the streaming agent to start")
    second = start_worker(queues=(ACP_QUEUE,), extra_env=acp_env(**FAST_RECOVERY))
    assert status_of(streaming) == Status.RUNNING  # still streaming: mid-turn
    assert len(agent_pids()) >= 2
    first.kill()
    wait_for(lambda: not agent_pids(), 10, message="the agents to die with their worker")
    homes = [agent_home(str(c.pk)) for c in (waiting, streaming)]
    assert all(home.is_dir() for home in homes)  # kept for the next turn's session/load

    revived = 0

    def swept_both() -> bool:
        nonlocal revived
        revived += sweep_runs()  # each once its lease (3 s, renewed until the kill) expired
        return revived == 2

    wait_for(swept_both, 15, message="the sweeper to revive both runs")
    both = (waiting, streaming)
    wait_for(lambda: all_are(both, Status.ERROR), 30, message="the lost turns to end")
    assert agent_homes_sweep() == 0  # their conversations go on: the homes stay
    assert all(home.is_dir() for home in homes)
    for conversation in both:
        assert [e.code for e in of(conversation, AgentErrorEvent)] == [REVIVED, "acp_turn_lost"]
        assert ended_by(conversation) == identity(second)

    # The held action is closed: rejected by the policy, its call interrupted, the inbox empty.
    (action,) = of(waiting, ActionEvent)
    (decision,) = of(waiting, ActionDecisionEvent)
    assert (decision.action_id, decision.decision, decision.by) == (
        action.id, "rejected", POLICY_DECIDER,
    )  # fmt: skip
    (observation,) = of(waiting, ObservationEvent)
    assert observation.tool_call_id == action.tool_call_id and observation.interrupted
    assert approvals.pending_actions(waiting.pk) == []
    assert not (Path(row(waiting).workspace_path) / "notes.txt").exists()

    for conversation in both:
        services.conversation_post_message(
            conversation_id=conversation.pk, text="echo", sender=user
        )
    wait_for(lambda: all_are(both, Status.FINISHED), 60, message="the next turns")
    for conversation, prompt in zip(both, ("edit notes.txt never", "slow 1000"), strict=True):
        report = json.loads(of(conversation, AgentMessageEvent)[-1].text)
        assert report["prompt"].endswith("echo") and f"User: {prompt}" in report["prompt"]


def test_a_warm_agent_answers_again_and_a_restarted_worker_loads_its_session(start_worker, user):
    """Turn 2 on the agent turn 1 left (same processes, same session); the worker restarts;
    turn 3 loads the session from the kept home, and that agent goes after its idle limit."""
    loads = {"env": {"FIXTURE_LOAD": "1"}}
    first = start_worker(queues=(ACP_QUEUE,), extra_env=acp_env(loads))
    conversation = start(user, "echo")
    wait_for(lambda: status_of(conversation) == Status.FINISHED, 60, message="turn 1")
    opened = json.loads(of(conversation, AgentMessageEvent)[-1].text)
    pids = sorted(agent_pids())
    assert pids  # kept after the turn

    services.conversation_post_message(conversation_id=conversation.pk, text="echo", sender=user)
    wait_for(lambda: len(of(conversation, AgentMessageEvent)) == 2, 60, message="turn 2")
    wait_for(lambda: status_of(conversation) == Status.FINISHED, 30, message="turn 2's end")
    warm = json.loads(of(conversation, AgentMessageEvent)[-1].text)
    assert sorted(agent_pids()) == pids
    assert warm == {"session": opened["session"], "loaded": False, "prompt": "echo"}
    assert [s.how for s in of(conversation, AcpSessionEvent)] == ["new"]

    first.stop()
    wait_for(lambda: not agent_pids(), 10, message="the kept agent to end with its worker")
    second = start_worker(
        queues=(ACP_QUEUE,), extra_env=acp_env({**loads, "idle_timeout_seconds": 2})
    )
    services.conversation_post_message(conversation_id=conversation.pk, text="echo", sender=user)
    wait_for(lambda: len(of(conversation, AgentMessageEvent)) == 3, 60, message="turn 3")
    wait_for(lambda: status_of(conversation) == Status.FINISHED, 30, message="turn 3's end")
    sessions = of(conversation, AcpSessionEvent)
    assert [(s.how, s.session_id) for s in sessions] == [
        ("new", opened["session"]), ("loaded", opened["session"]),
    ]  # fmt: skip
    assert sessions[1].worker == identity(second)
    assert json.loads(of(conversation, AgentMessageEvent)[-1].text)["loaded"] is True
    wait_for(lambda: not agent_pids(), 10, message="the idle agent to be closed after 2 s")
