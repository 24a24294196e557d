"""The LLM's View of a conversation: the events a model should read, in order.

Pure: no ORM. Condensation (a later event that forgets a range and adds a summary) will be
applied here, so every reader of the View gets it for free. A user message a hook blocked
(UserMessageBlockedEvent, always later in the log than the message) is withdrawn here the
same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .events import (
    ActionEvent,
    AgentMessageEvent,
    AnyEvent,
    ObservationEvent,
    SystemPromptEvent,
    UserMessageBlockedEvent,
    UserMessageEvent,
)

LLM_EVENT_TYPES = (
    SystemPromptEvent,
    UserMessageEvent,
    AgentMessageEvent,
    ActionEvent,
    ObservationEvent,
)


def llm_view(events: Iterable[AnyEvent]) -> list[AnyEvent]:
    """The LLM-convertible events, in log order, without blocked user messages.

    Given a slice of the log, it withdraws only what that slice blocks: a reader that builds
    incrementally must rebuild when a later slice holds a UserMessageBlockedEvent."""
    events = list(events)
    blocked = {e.message_id for e in events if isinstance(e, UserMessageBlockedEvent)}
    return [
        e
        for e in events
        if isinstance(e, LLM_EVENT_TYPES)
        and not (isinstance(e, UserMessageEvent) and e.id in blocked)
    ]


def unanswered_actions(events: Sequence[AnyEvent]) -> list[ActionEvent]:
    """Actions with no observation yet, in order: what a crash or a pause left pending."""
    answered = {e.tool_call_id for e in events if isinstance(e, ObservationEvent)}
    return [e for e in events if isinstance(e, ActionEvent) and e.tool_call_id not in answered]
