"""The View withdraws blocked user messages; which messages still need a UserPromptSubmit check
is derived from the log alone."""

from conversations.events import (
    AgentMessageEvent,
    SystemPromptEvent,
    UserMessageBlockedEvent,
    UserMessageCheckedEvent,
    UserMessageEvent,
)
from conversations.projections import unchecked_messages
from conversations.view import llm_view
from orchestration.step.messages import messages_from_events

SYSTEM = SystemPromptEvent(content="be useful")
FIRST = UserMessageEvent(text="hello", sender="alice")
SECOND = UserMessageEvent(text="the forbidden part", sender="alice")
THIRD = UserMessageEvent(text="later", sender="alice")
NUDGE = UserMessageEvent(text="[Stop hook t] run the tests", sender="hook:t")


def test_a_blocked_message_leaves_the_view() -> None:
    log = [
        SYSTEM, FIRST, UserMessageCheckedEvent(message_ids=[FIRST.id]), AgentMessageEvent(text="hi"),
        SECOND, UserMessageBlockedEvent(message_id=SECOND.id, hook="guard", reason="no"), THIRD,
    ]  # fmt: skip
    assert llm_view(log) == [SYSTEM, FIRST, log[3], THIRD]
    assert "forbidden" not in str(messages_from_events(llm_view(log)))


def test_unchecked_messages_come_from_the_log() -> None:
    assert unchecked_messages([SYSTEM, FIRST, SECOND]) == [FIRST, SECOND]
    checked = UserMessageCheckedEvent(message_ids=[FIRST.id])
    assert unchecked_messages([SYSTEM, FIRST, checked, SECOND]) == [SECOND]
    blocked = UserMessageBlockedEvent(message_id=SECOND.id, hook="guard")
    assert unchecked_messages([FIRST, checked, SECOND, blocked, THIRD]) == [THIRD]


def test_the_systems_own_messages_need_no_check() -> None:
    assert unchecked_messages([SYSTEM, NUDGE]) == []
