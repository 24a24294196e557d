"""The real Gemini CLI (`gemini --acp`, @google/gemini-cli pinned in tests/acp_bridge/npm) when a
turn does not end normally, its turns driven in this process, its model the fake Gemini API on
127.0.0.1 (fake_gemini.py) asking to run a shell command. One conversation (one cold start):
1. interrupted while its permission request waits in our inbox: the request is answered
   cancelled, the command never runs, the turn ends cancelled and the conversation pauses;
2. the next message goes to the same agent, which asks again; killed while it waits, the
   turn ends with an error event that says the agent exited, the inbox is empty and nothing ran.
The approved, refused and resumed turns are test_real_gemini_worker.py's, on real workers.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from conversations.events import (
    AcpSessionEvent,
    AcpTurnEvent,
    ActionDecisionEvent,
    AgentErrorEvent,
    Status,
)
from orchestration import run_control, services
from orchestration.control import approvals
from orchestration.external import pool
from tests.acp_bridge.fake_gemini import FakeGemini
from tests.acp_bridge.gemini_agent import gemini_profile
from tests.acp_bridge.gemini_turns import allow_host_network, gemini_pids, held
from tests.acp_bridge.turns import drive_in_thread, join_clean, of, row
from tests.conftest import wait_for

pytestmark = [pytest.mark.acp, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

COMMAND = "echo ran >> runs.txt"
AGENT = "gemini"


def test_gemini_interrupted_while_it_asks_then_killed_while_it_asks(
    user, team, dispatched, settings
):
    allow_host_network(settings, user, team)
    with FakeGemini(COMMAND) as fake:
        settings.CANVAS_ACP_AGENTS = {AGENT: gemini_profile(fake.address)}
        conversation = services.conversation_create(
            owner=user, prompt="Run the command.", model="demo", agent=AGENT, team=team.pk
        )
        runs = Path(row(conversation).workspace_path) / "runs.txt"

        turn = drive_in_thread(dispatched)  # 1: interrupted
        action = held(conversation, fake, COMMAND)
        run_control.conversation_interrupt(conversation_id=conversation.pk, by=user)
        join_clean(turn, timeout=30)
        assert approvals.pending_actions(conversation.pk) == []
        (decision,) = of(conversation, ActionDecisionEvent)
        assert (decision.action_id, decision.decision) == (action.action_id, "rejected")
        assert of(conversation, AcpTurnEvent)[-1].stop_reason == "cancelled"
        assert row(conversation).status == Status.PAUSED
        assert fake.kinds() == ["tool_call"]  # the model was not called again
        assert pool.kept_agent(str(conversation.pk)) is not None
        pids = gemini_pids()
        assert len(pids) == 1, pids

        services.conversation_post_message(  # 2: killed
            conversation_id=conversation.pk, text="Try again.", sender=user
        )
        turn = drive_in_thread(dispatched)
        held(conversation, fake, COMMAND)
        assert gemini_pids() == pids  # the same agent, asking again
        os.kill(pids[0], signal.SIGKILL)  # node itself, inside its sandbox
        join_clean(turn, timeout=30)

    error = of(conversation, AgentErrorEvent)[-1]
    assert error.code == "acp_agent_crashed" and "exit" in error.message.lower(), error
    assert row(conversation).status == Status.ERROR
    assert approvals.pending_actions(conversation.pk) == []
    assert [s.how for s in of(conversation, AcpSessionEvent)] == ["new"]
    assert not runs.exists()
    assert pool.kept_agent(str(conversation.pk)) is None
    wait_for(lambda: not gemini_pids(), 10, message="the killed agent's sandbox to go")
