"""The request that asks the agent's own model to summarise the oldest part of its View.

Pure. The user message opens with the task verbatim (the first user message, which the View
keeps anyway), then the previous summary, then the forgotten events as a transcript, each
clipped so the request stays inside the context it is meant to relieve.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conversations.events import (
    ActionEvent,
    AgentMessageEvent,
    AnyEvent,
    ObservationEvent,
    UserMessageEvent,
)

SUMMARY_INSTRUCTION = """\
You condense the working history of an AI software agent so that it can carry on within its \
context window. The user's message starts with the agent's task as it was given, then the \
previous summary (if any), then the oldest events of its history, which it will no longer see.

Write a summary the agent can continue from, in exactly these sections:

## Task
What the agent was asked to do, including any later instructions from people.
## Progress
What has been done and found so far, most important first; keep exact names, commands, \
versions and numbers.
## Files touched
Each file created, changed or read that matters, with what happened to it.
## Open problems
What is still unresolved or failing, and the next steps the agent meant to take.

Carry forward everything from the previous summary that still matters. Be concise; no \
preamble."""

MIN_EVENT_CHARS = 200
"""However many events are summarised, each keeps at least this much of its text."""


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [... {len(text) - limit} characters cut]"


def _line(event: AnyEvent) -> str | None:
    if isinstance(event, UserMessageEvent):
        return f"[user] {event.text}"
    if isinstance(event, AgentMessageEvent):
        return f"[agent] {event.text}"
    if isinstance(event, ActionEvent):
        thought = f"{event.thought}\n" if event.thought else ""
        return f"[agent] {thought}[tool call {event.tool}] {event.arguments}"
    if isinstance(event, ObservationEvent):
        failed = " (error)" if event.is_error else ""
        return f"[tool result {event.tool}{failed}] {event.content}"
    return None  # system prompts and summaries are not history to summarise


def summary_request(
    *, task: str, previous: str | None, forgotten: Sequence[AnyEvent], max_chars: int
) -> list[dict[str, Any]]:
    """The chat messages of one summarising call; the transcript fits about `max_chars`."""
    lines = [line for e in forgotten if (line := _line(e)) is not None]
    room = max(max_chars - len(task) - len(previous or ""), 0)
    per_event = max(room // max(len(lines), 1), MIN_EVENT_CHARS)
    transcript = "\n\n".join(_clip(line, per_event) for line in lines)
    parts = [task]
    if previous:
        parts.append(f"<previous_summary>\n{previous}\n</previous_summary>")
    parts.append(f"<events>\n{transcript}\n</events>")
    return [
        {"role": "system", "content": SUMMARY_INSTRUCTION},
        {"role": "user", "content": "\n\n".join(parts)},
    ]
