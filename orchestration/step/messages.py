"""The View as LiteLLM chat messages. Pure and incremental: the log only grows, so messages
for a prefix never change and a runner can extend its list with new events alone, except when
a condensation (or a blocked message) rewrites the View; the history rebuilds them then."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from conversations.events import (
    ActionEvent,
    AgentMessageEvent,
    AnyEvent,
    CondensationEvent,
    ObservationEvent,
    SystemPromptEvent,
    UserMessageEvent,
)


def extend_messages(messages: list[dict[str, Any]], events: Iterable[AnyEvent]) -> None:
    """Append the chat messages for `events` (View events, in log order) to `messages`."""
    for event in events:
        if isinstance(event, SystemPromptEvent):
            messages.append({"role": "system", "content": event.content})
        elif isinstance(event, UserMessageEvent):
            messages.append({"role": "user", "content": event.text})
        elif isinstance(event, AgentMessageEvent):
            messages.append({"role": "assistant", "content": event.text})
        elif isinstance(event, ActionEvent):
            call = {
                "id": event.tool_call_id,
                "type": "function",
                "function": {"name": event.tool, "arguments": event.arguments},
            }
            # Parallel calls of one response form one assistant message, as the model sent them.
            if event.batch_index > 0 and messages and messages[-1].get("tool_calls"):
                messages[-1]["tool_calls"].append(call)
            else:
                messages.append(
                    {"role": "assistant", "content": event.thought or None, "tool_calls": [call]}
                )
        elif isinstance(event, ObservationEvent):
            messages.append(
                {"role": "tool", "tool_call_id": event.tool_call_id, "content": event.content}
            )
        elif isinstance(event, CondensationEvent):
            messages.append({"role": "user", "content": summary_message(event)})


SUMMARY_OPENING = "<condensed_history>"
SUMMARY_CLOSING = "</condensed_history>"


def summary_message(event: CondensationEvent) -> str:
    """What the model reads where a condensation stands in its View."""
    return (
        f"{SUMMARY_OPENING}\nEarlier parts of this conversation were condensed to save context. "
        f"Summary of what happened:\n{event.summary}\n{SUMMARY_CLOSING}"
    )


def messages_from_events(events: Iterable[AnyEvent]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    extend_messages(messages, events)
    return messages
