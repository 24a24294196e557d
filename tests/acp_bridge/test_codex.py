"""The real Codex ACP adapter (@zed-industries/codex-acp, pinned; see codex_agent.py) through
the whole stack, its model the fake Responses API on 127.0.0.1 (fake_openai_responses.py),
which asks it to run one shell command. Codex asks before running it (approval "untrusted");
the request waits in our inbox and is answered there with Codex's own option, or the turn is
interrupted while it waits, or the agent is killed while it waits.

The agent reaches the fake on the host's loopback: the site and the team's policy allow "host".
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
    ActionEvent,
    AgentErrorEvent,
    AgentMessageEvent,
    ObservationEvent,
    Status,
)
from orchestration import run_control
from orchestration.control import approvals
from tests.acp_bridge.codex_turns import codex_pids, held, option, written
from tests.acp_bridge.fake_openai_responses import COMMAND, FINAL_TEXT, OUTPUT
from tests.acp_bridge.turns import drive_in_thread, join_clean, of, row

pytestmark = [pytest.mark.acp, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


def test_an_approved_command_runs_and_its_output_is_the_result(
    user, codex, fake_openai, dispatched
):
    conversation = codex()
    turn = drive_in_thread(dispatched)
    pending = held(conversation, fake_openai)
    assert not written(conversation).exists()  # nothing runs before a person answers
    assert fake_openai.kinds() == ["tool_call"]
    allow = option(pending, "allow_once")
    decided = approvals.action_approve(
        conversation_id=conversation.pk, action_id=pending.action_id, by=user, option_id=allow
    )
    assert decided == "approved"
    join_clean(turn, timeout=90)

    assert written(conversation).read_text() == OUTPUT
    session = of(conversation, AcpSessionEvent)[0]
    assert session.how == "new" and session.agent == "codex" and session.agent_name == "codex-acp"
    (action,) = of(conversation, ActionEvent)
    assert action.kind == "execute" and COMMAND in action.title
    (decision,) = of(conversation, ActionDecisionEvent)
    assert (decision.by, decision.option_id) == (user.username, allow)
    (result,) = of(conversation, ObservationEvent)
    assert result.tool_call_id == action.tool_call_id and not result.is_error
    assert result.content == OUTPUT  # the command's output, not the permission prompt
    assert fake_openai.kinds() == ["tool_call", "final"] and OUTPUT in fake_openai.tool_outputs[0]
    assert of(conversation, AgentMessageEvent)[-1].text == FINAL_TEXT
    assert of(conversation, AcpTurnEvent)[-1].stop_reason == "end_turn"
    assert row(conversation).status == Status.FINISHED


def test_a_rejected_command_does_not_run_and_codex_ends_the_turn(
    user, codex, fake_openai, dispatched
):
    conversation = codex()
    turn = drive_in_thread(dispatched)
    pending = held(conversation, fake_openai)
    reject = option(pending, "reject_once")
    approvals.action_approve(
        conversation_id=conversation.pk, action_id=pending.action_id, by=user, option_id=reject
    )
    join_clean(turn, timeout=90)

    assert not written(conversation).exists()
    assert list(Path(row(conversation).workspace_path).iterdir()) == []
    (decision,) = of(conversation, ActionDecisionEvent)
    assert (decision.by, decision.option_id) == (user.username, reject)
    (result,) = of(conversation, ObservationEvent)
    assert result.is_error and OUTPUT not in result.content
    # Codex's "No, and tell Codex what to do differently" aborts its turn: no second call.
    assert fake_openai.kinds() == ["tool_call"] and fake_openai.tool_outputs == []
    assert of(conversation, AcpTurnEvent)[-1].stop_reason == "cancelled"
    assert row(conversation).status == Status.PAUSED  # waiting for what to do instead


def test_an_interrupt_while_codex_waits_answers_it_cancelled(user, codex, fake_openai, dispatched):
    conversation = codex()
    turn = drive_in_thread(dispatched)
    held(conversation, fake_openai)
    run_control.conversation_interrupt(conversation_id=conversation.pk, by=user)
    join_clean(turn, timeout=30)

    assert not written(conversation).exists()
    assert approvals.pending_actions(conversation.pk) == []
    (decision,) = of(conversation, ActionDecisionEvent)
    assert decision.decision == "rejected"
    (result,) = of(conversation, ObservationEvent)
    assert result.is_error and OUTPUT not in result.content
    assert fake_openai.kinds() == ["tool_call"]
    assert of(conversation, AcpTurnEvent)[-1].stop_reason == "cancelled"
    assert row(conversation).status == Status.PAUSED


def test_codex_killed_while_it_waits_is_a_crash_error(user, codex, fake_openai, dispatched):
    conversation = codex()
    turn = drive_in_thread(dispatched)
    held(conversation, fake_openai)
    (pid,) = codex_pids()
    os.kill(pid, signal.SIGKILL)
    join_clean(turn, timeout=30)

    (error,) = of(conversation, AgentErrorEvent)
    assert error.code == "acp_agent_crashed" and "exit" in error.message.lower(), error
    assert row(conversation).status == Status.ERROR
    assert approvals.pending_actions(conversation.pk) == []
    assert not written(conversation).exists()
    assert codex_pids() == []
