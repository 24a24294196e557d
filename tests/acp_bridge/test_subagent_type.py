"""An ACP profile as a sub-agent type: our own agent hands a sub-task to the external agent
with `task` and reads its last message as the answer."""

from __future__ import annotations

import pytest

from conversations.events import AcpSessionEvent, ObservationEvent, Status, SystemPromptEvent
from conversations.models import Conversation
from orchestration import services
from teams.models import Policy
from tests.acp_bridge.turns import of, row, use_fixture
from tests.runs import drive, script

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fixture_agent(settings) -> None:
    use_fixture(settings)


def parent_asking(subagent_type: str, prompt: str) -> Conversation:
    return services.conversation_create(
        owner=None, model="scripted",
        prompt=script(
            {"tool": "task", "args": {"subagent_type": subagent_type, "prompt": prompt,
                                      "description": "hand it over"}},
            {"tool": "finish", "args": {"message": "parent done"}},
        ),
    )  # fmt: skip


def task_result(parent: Conversation) -> ObservationEvent:
    return next(o for o in of(parent, ObservationEvent) if o.tool == "task")


def test_the_external_agent_answers_our_agents_task(dispatched):
    parent = parent_asking("fixture", "stream")
    drive(dispatched)
    child = Conversation.objects.get(parent=parent)
    assert (child.agent, child.subagent_type, child.status) == ("fixture", "fixture", "finished")
    assert of(child, AcpSessionEvent)[0].agent == "fixture"
    assert of(child, SystemPromptEvent) == []  # the agent has its own
    result = task_result(parent)
    assert result.content == "one two three" and not result.is_error
    assert row(parent).status == Status.FINISHED


def test_the_spawning_tools_list_configured_profiles_never_bare_presets(dispatched):
    parent = parent_asking("claude-code", "stream")
    drive(dispatched)
    result = task_result(parent)
    assert result.is_error and "Unknown sub-agent type 'claude-code'" in result.content
    assert "Available: general, fixture." in result.content  # the configured one is offered
    assert not Conversation.objects.filter(parent=parent).exists()


def test_a_profile_the_policy_does_not_allow_is_no_sub_agent_type(dispatched):
    Policy.objects.create(team=None, allowed_agent_kinds=["native"])
    parent = parent_asking("fixture", "stream")
    drive(dispatched)
    result = task_result(parent)
    assert result.is_error and "Unknown sub-agent type 'fixture'" in result.content
    assert "Available: general." in result.content
    assert not Conversation.objects.filter(parent=parent).exists()
