"""One-line text renderings of events, for terminals and logs."""

from __future__ import annotations

from conversations.events import (
    ActionEvent,
    AgentErrorEvent,
    AgentMessageEvent,
    AnyEvent,
    CondensationEvent,
    ObservationEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StatusChangeEvent,
    SubagentsSettledEvent,
    SubagentsSpawnedEvent,
    SystemPromptEvent,
    UserMessageBlockedEvent,
    UserMessageCheckedEvent,
    UserMessageEvent,
)


def _clip(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def event_summary(event: AnyEvent) -> str:
    match event:
        case SystemPromptEvent():
            return f"{len(event.tools)} tools"
        case UserMessageEvent():
            return _clip(event.text)
        case UserMessageCheckedEvent():
            return f"{len(event.message_ids)} message(s) may reach the agent"
        case UserMessageBlockedEvent():
            return f"hook {event.hook}: {_clip(event.reason)}"
        case AgentMessageEvent():
            return _clip(event.text)
        case ActionEvent():
            return f"{event.tool}({_clip(event.arguments, 120)})"
        case ObservationEvent():
            flags = " ERROR" if event.is_error else ""
            code = f" exit={event.exit_code}" if event.exit_code is not None else ""
            return f"{event.tool}{code}{flags}: {_clip(event.content)}"
        case AgentErrorEvent():
            return f"{event.code}: {_clip(event.message)}"
        case StatusChangeEvent():
            return f"{event.status.value} ({event.reason})" if event.reason else event.status.value
        case RunStartedEvent():
            return f"run {event.run_id[:8]} by {event.trigger}"
        case RunFinishedEvent():
            return f"run {event.run_id[:8]} {event.status.value}: {event.reason}"
        case SubagentsSpawnedEvent():
            names = ", ".join(f"{c.name} ({c.conversation_id[:8]})" for c in event.children)
            return f"{event.tool}: {_clip(names)}"
        case SubagentsSettledEvent():
            return _clip(", ".join(f"{r.name} {r.status}" for r in event.results))
        case CondensationEvent():
            how = "dropped (hard reset)" if event.hard_reset else "summarised"
            return f"{len(event.forgotten_ids)} events {how}: {_clip(event.summary)}"
    return ""


def event_line(seq: int, event: AnyEvent) -> str:
    return f"#{seq} {event.type} {event_summary(event)}".rstrip()
