"""The real Claude Code ACP adapter as a *team's* profile (not the site's): its installation
shown through the team's `readonly` (inside the site's CANVAS_ACP_TEAM_READONLY_PATHS), its
network the default "outbound", so it reaches the fake Anthropic API on 127.0.0.1 only through
the outbound guard, which the site lets reach that address (CANVAS_ALLOWED_PRIVATE_NETWORKS).
One turn: the model asks to Write, the inbox approves, the file lands.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_bridge.team_profiles import acp_agent_create, acp_agent_update
from conversations.events import AcpTurnEvent, AgentMessageEvent, Status
from orchestration import services
from orchestration.control import approvals
from teams.models import AcpAgentProfile
from teams.policies import policy_update
from tests.acp_bridge.fake_anthropic import FINAL_TEXT, FakeAnthropic
from tests.acp_bridge.real_agent import claude_agent
from tests.acp_bridge.turns import drive_in_thread, join_clean, of, row
from tests.conftest import wait_for

pytestmark = [pytest.mark.acp, pytest.mark.django_db(transaction=True), pytest.mark.timeout(150)]

CONTENT = "written by a team's Claude Code, through the outbound guard\n"
PLACEHOLDER = "http://127.0.0.1:9"
"""The fake model's address is known only once the workspace (its target) is."""


def test_a_team_profile_reaches_its_model_through_the_outbound_guard(
    user, team, dispatched, settings
):
    settings.CANVAS_UNSANDBOXED_COMMANDS = False
    settings.CANVAS_SANDBOX_ALLOW_HOST_NETWORK = True  # for the policy below, not the agent
    settings.CANVAS_ALLOWED_PRIVATE_NETWORKS = ["127.0.0.1/32"]
    policy_update(by=user, team=team, network="host")
    agent = claude_agent(PLACEHOLDER)
    readonly = [str(path) for path in agent.readonly]
    settings.CANVAS_ACP_TEAM_READONLY_PATHS = readonly
    profile = {"command": agent.command, "args": list(agent.args), "readonly": readonly}
    acp_agent_create(by=user, team=team, name="claude-code", env=agent.env, **profile)
    assert AcpAgentProfile.objects.get(name="claude-code").network == "outbound"
    conversation = services.conversation_create(
        owner=user, prompt="Create hello.txt in the workspace.", model="demo",
        agent="claude-code", team=team.pk,
    )  # fmt: skip
    target = Path(row(conversation).workspace_path) / "hello.txt"
    with FakeAnthropic(target, CONTENT) as fake:
        env = claude_agent(fake.base_url).env
        acp_agent_update(by=user, team=team, name="claude-code", env=env, **profile)
        turn = drive_in_thread(dispatched)
        wait_for(
            lambda: approvals.pending_actions(conversation.pk), timeout=90,
            message="Claude Code asked no permission (did it reach its model?)",
        )  # fmt: skip
        pending = approvals.pending_actions(conversation.pk)[0]
        allow = next(o for o in pending.options if o.kind == "allow_once")
        approvals.action_approve(
            conversation_id=conversation.pk, action_id=pending.action_id, by=user,
            option_id=allow.option_id,
        )  # fmt: skip
        join_clean(turn, timeout=90)

    assert target.read_text() == CONTENT
    assert FINAL_TEXT in of(conversation, AgentMessageEvent)[-1].text
    assert of(conversation, AcpTurnEvent)[-1].stop_reason == "end_turn"
    assert row(conversation).status == Status.FINISHED
