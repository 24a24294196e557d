"""The real Claude Code ACP adapter kept warm and resumed (issue 28): its second turn goes to
the same process and session; once that process is gone (the pool closed, as a worker's
shutdown does) the next turn loads the session with session/load from the agent's home, kept
across turns. Each turn asks to write the file (fake_anthropic.py scripts a Write), answered
in our inbox. The model is the fake Anthropic API on 127.0.0.1.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conversations.events import AcpSessionEvent, AcpTurnEvent, Status
from orchestration import services
from orchestration.control import approvals
from orchestration.external import pool
from teams.policies import policy_update
from tests.acp_bridge.fake_anthropic import FakeAnthropic
from tests.acp_bridge.test_real_agent_turn import (  # noqa: F401  (an autouse fixture)
    PLACEHOLDER,
    _host_network,
    _profile,
)
from tests.acp_bridge.turns import drive_in_thread, join_clean, of, row
from tests.conftest import wait_for

pytestmark = [pytest.mark.acp, pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

CONTENT = "written by Claude Code\n"


def _turn(conversation, dispatched, user) -> None:
    """Run the pending turn, allowing its write once when asked."""
    turn = drive_in_thread(dispatched)
    asked = len(of(conversation, AcpTurnEvent))

    def pending():
        return approvals.pending_actions(conversation.pk)

    wait_for(pending, timeout=90, message="Claude Code asked no permission")
    action = pending()[0]
    allow = next(o for o in action.options if o.kind == "allow_once")
    approvals.action_approve(
        conversation_id=conversation.pk, action_id=action.action_id, by=user,
        option_id=allow.option_id,
    )  # fmt: skip
    join_clean(turn, timeout=90)
    assert len(of(conversation, AcpTurnEvent)) == asked + 1
    assert row(conversation).status == Status.FINISHED


def test_claude_code_answers_warm_then_resumes_with_session_load(user, team, dispatched, settings):
    policy_update(by=user, team=team, network="host")
    settings.CANVAS_ACP_AGENTS = {"claude": _profile(PLACEHOLDER)}
    conversation = services.conversation_create(
        owner=user, prompt="Create hello.txt in the workspace.", model="demo", agent="claude",
        team=team.pk,
    )  # fmt: skip
    target = Path(row(conversation).workspace_path) / "hello.txt"
    with FakeAnthropic(target, CONTENT) as fake:
        settings.CANVAS_ACP_AGENTS = {"claude": _profile(fake.base_url)}
        _turn(conversation, dispatched, user)
        kept = pool.kept_agent(str(conversation.pk))
        assert kept is not None and kept.agent.pid is not None
        pid, session_id = kept.agent.pid, kept.session_id

        target.unlink()
        services.conversation_post_message(
            conversation_id=conversation.pk, text="Write it again.", sender=user
        )
        _turn(conversation, dispatched, user)
        assert pool.kept_agent(str(conversation.pk)).agent.pid == pid
        assert [(s.how, s.session_id) for s in of(conversation, AcpSessionEvent)] == [
            ("new", session_id)
        ]
        assert target.read_text() == CONTENT

        pool.close_all()  # a worker restart: the process is gone, its home is not
        assert not Path(f"/proc/{pid}").exists()
        target.unlink()
        services.conversation_post_message(
            conversation_id=conversation.pk, text="Once more, please.", sender=user
        )
        _turn(conversation, dispatched, user)
    sessions = of(conversation, AcpSessionEvent)
    assert [(s.how, s.session_id) for s in sessions] == [
        ("new", session_id), ("loaded", session_id),
    ]  # fmt: skip
    assert sessions[1].load_supported and target.read_text() == CONTENT
