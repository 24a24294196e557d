"""The LLM's View of a conversation: the events a model should read, in order.

Pure: no ORM. Condensation (a later event that forgets a range and adds a summary) will be
applied here, so every reader of the View gets it for free.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .events import (
    ActionEvent,
    AgentMessageEvent,
    AnyEvent,
    ObservationEvent,
    SystemPromptEvent,
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
    """The LLM-convertible events, in log order."""
    return [e for e in events if isinstance(e, LLM_EVENT_TYPES)]


def unanswered_actions(events: Sequence[AnyEvent]) -> list[ActionEvent]:
    """Actions with no observation yet, in order: what a crash or a pause left pending."""
    answered = {e.tool_call_id for e in events if isinstance(e, ObservationEvent)}
    return [e for e in events if isinstance(e, ActionEvent) and e.tool_call_id not in answered]
