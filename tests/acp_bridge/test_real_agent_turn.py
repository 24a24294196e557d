"""The real Claude Code ACP adapter through the whole stack: a conversation with a site profile
for it, one turn in a slice (orchestration.external), its real permission request held in our
approval inbox and answered there with the agent's own option, the Write it then runs landing
in the conversation's workspace, and the turn's events in the log.

The model is the fake Anthropic API on 127.0.0.1 (fake_anthropic.py); the agent needs the
host's network to reach it, which the site and the team's policy both have to allow.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conversations.events import (
    AcpSessionEvent,
    AcpTurnEvent,
    ActionDecisionEvent,
    ActionEvent,
    AgentMessageEvent,
    ObservationEvent,
    Status,
)
from orchestration import services
from orchestration.control import approvals
from teams.policies import policy_update
from tests.acp_bridge.fake_anthropic import FINAL_TEXT, FakeAnthropic
from tests.acp_bridge.real_agent import claude_agent, site_profile
from tests.acp_bridge.turns import drive_in_thread, join_clean, of, row
from tests.conftest import wait_for

pytestmark = [pytest.mark.acp, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

CONTENT = "written by Claude Code, approved in our inbox\n"
PLACEHOLDER = "http://127.0.0.1:9"
"""The fake model's address is known only once the workspace (its target) is."""


@pytest.fixture(autouse=True)
def _host_network(settings) -> None:
    settings.CANVAS_SANDBOX_ALLOW_HOST_NETWORK = True
    settings.CANVAS_UNSANDBOXED_COMMANDS = False


def _profile(base_url: str) -> dict:
    return site_profile(claude_agent(base_url))


def test_claude_code_asks_in_our_inbox_and_the_approved_write_lands(
    user, team, dispatched, settings
):
    policy_update(by=user, team=team, network="host")
    settings.CANVAS_ACP_AGENTS = {"claude": _profile(PLACEHOLDER)}
    conversation = services.conversation_create(
        owner=user, prompt="Create hello.txt in the workspace.", model="demo", agent="claude",
        team=team.pk,
    )  # fmt: skip
    target = Path(row(conversation).workspace_path) / "hello.txt"
    with FakeAnthropic(target, CONTENT) as fake:
        settings.CANVAS_ACP_AGENTS = {"claude": _profile(fake.base_url)}
        turn = drive_in_thread(dispatched)
        wait_for(
            lambda: approvals.pending_actions(conversation.pk),
            timeout=60, message="Claude Code asked no permission",
        )  # fmt: skip
        pending = approvals.pending_actions(conversation.pk)[0]
        assert pending.kind == "edit" and str(target) in pending.locations
        assert not target.exists()  # nothing written before a person answers
        allow = next(o for o in pending.options if o.kind == "allow_once")
        assert row(conversation).status == Status.WAITING_FOR_CONFIRMATION
        decided = approvals.action_approve(
            conversation_id=conversation.pk, action_id=pending.action_id, by=user,
            option_id=allow.option_id,
        )  # fmt: skip
        assert decided == "approved"
        join_clean(turn, timeout=90)

    assert target.read_text() == CONTENT
    session = of(conversation, AcpSessionEvent)[0]
    assert session.how == "new" and session.agent == "claude" and session.agent_name
    decision = of(conversation, ActionDecisionEvent)[0]
    assert (decision.by, decision.option_id) == (user.username, allow.option_id)
    write = next(a for a in of(conversation, ActionEvent) if a.kind == "edit")
    results = [
        o for o in of(conversation, ObservationEvent) if o.tool_call_id == write.tool_call_id
    ]
    assert len(results) == 1 and not results[0].is_error, results
    assert FINAL_TEXT in of(conversation, AgentMessageEvent)[-1].text
    assert of(conversation, AcpTurnEvent)[-1].stop_reason == "end_turn"
    assert row(conversation).status == Status.FINISHED
