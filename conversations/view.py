"""The LLM's View of a conversation: the events a model should read, in order.

Pure: no ORM. Condensations (CondensationEvent: forgotten ids, a summary and its offset) are
applied here, in log order, so every reader of the View gets them: the forgotten events leave,
and the latest condensation itself stands in the View at its offset as the summary. A user
message a hook blocked (UserMessageBlockedEvent, always later in the log than the message) is
withdrawn here too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .events import (
    ActionEvent,
    AgentMessageEvent,
    AnyEvent,
    CondensationEvent,
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
    """The LLM-convertible events, in log order, without blocked user messages, with
    condensations applied.

    Given a slice of the log, it withdraws only what that slice blocks: a reader that builds
    incrementally must rebuild when a later slice holds a UserMessageBlockedEvent."""
    return view_extend([], events)


def view_extend(view: list[AnyEvent], events: Iterable[AnyEvent]) -> list[AnyEvent]:
    """`view` (a View built from the log before `events`) brought up to date with `events`.

    The same as `llm_view` over the whole log, except for a blocked message read earlier
    (see there). A condensation only touches what its View held, so applying it to the View
    instead of the log costs the View's size, not the log's. Returns a new list when a
    condensation applies; otherwise extends `view` in place and returns it."""
    events = list(events)
    blocked = {e.message_id for e in events if isinstance(e, UserMessageBlockedEvent)}
    for event in events:
        if isinstance(event, CondensationEvent):
            view = condense_view(view, event)
        elif isinstance(event, LLM_EVENT_TYPES) and not (
            isinstance(event, UserMessageEvent) and event.id in blocked
        ):
            view.append(event)
    return view


def condense_view(view: Sequence[AnyEvent], condensation: CondensationEvent) -> list[AnyEvent]:
    """`view` with the forgotten events and any earlier summary gone, and `condensation`
    standing at its offset (clamped to the View)."""
    forgotten = set(condensation.forgotten_ids)
    kept = [e for e in view if not isinstance(e, CondensationEvent) and e.id not in forgotten]
    offset = max(0, min(condensation.offset, len(kept)))
    return [*kept[:offset], condensation, *kept[offset:]]


def unanswered_actions(events: Sequence[AnyEvent]) -> list[ActionEvent]:
    """Actions with no observation yet, in order: what a crash or a pause left pending."""
    answered = {e.tool_call_id for e in events if isinstance(e, ObservationEvent)}
    return [e for e in events if isinstance(e, ActionEvent) and e.tool_call_id not in answered]
