"""The real Codex ACP adapter as a *team's* profile (not the site's): its binary shown through
the team's `readonly` (inside the site's CANVAS_ACP_TEAM_READONLY_PATHS), its network the
default "outbound", so it reaches the fake Responses API on 127.0.0.1 only through the outbound
guard (its HTTP proxy), which the site lets reach that address (CANVAS_ALLOWED_PRIVATE_NETWORKS).
One turn: Codex asks to run the command, the inbox approves, its output is the result.
"""

from __future__ import annotations

import pytest

from acp_bridge.team_profiles import acp_agent_create
from conversations.events import AcpTurnEvent, ObservationEvent, Status
from orchestration import services
from teams.models import AcpAgentProfile
from tests.acp_bridge.codex_agent import codex_agent
from tests.acp_bridge.codex_turns import allow_when_asked, written
from tests.acp_bridge.fake_openai_responses import OUTPUT, PROMPT
from tests.acp_bridge.turns import drive_in_thread, join_clean, of, row

pytestmark = [pytest.mark.acp, pytest.mark.django_db(transaction=True), pytest.mark.timeout(150)]


def test_a_team_codex_reaches_its_model_through_the_outbound_guard(
    user, team, dispatched, settings, fake_openai
):
    settings.CANVAS_UNSANDBOXED_COMMANDS = False
    settings.CANVAS_ALLOWED_PRIVATE_NETWORKS = ["127.0.0.1/32"]
    agent = codex_agent(fake_openai.base_url)
    readonly = [str(path) for path in agent.readonly]
    settings.CANVAS_ACP_TEAM_READONLY_PATHS = readonly
    acp_agent_create(
        by=user, team=team, name="team-codex", command=agent.command, args=list(agent.args),
        env=agent.env, readonly=readonly,
    )  # fmt: skip
    assert AcpAgentProfile.objects.get(name="team-codex").network == "outbound"
    conversation = services.conversation_create(
        owner=user, prompt=PROMPT, model="demo", agent="team-codex", team=team.pk
    )
    turn = drive_in_thread(dispatched)
    allow_when_asked(conversation, fake_openai, user)
    join_clean(turn, timeout=90)

    assert written(conversation).read_text() == OUTPUT
    (result,) = of(conversation, ObservationEvent)
    assert result.content == OUTPUT and not result.is_error
    assert fake_openai.kinds() == ["tool_call", "final"]
    assert of(conversation, AcpTurnEvent)[-1].stop_reason == "end_turn"
    assert row(conversation).status == Status.FINISHED
