"""Stuck detection: is the agent going round in circles since the person last spoke?

Pure: looks at the events after the last message a person wrote and names the first pattern it
sees. A Stop hook's nudge is a user message too, but not a person speaking: an agent that keeps
answering nudges without acting is the monologue this looks for.
Actions compare by tool and arguments (ignoring the model's risk label and its prose);
observations by content.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from conversations.events import (
    ActionEvent,
    AgentMessageEvent,
    AnyEvent,
    ObservationEvent,
    UserMessageEvent,
    is_llm_step,
)

SAME_ACTION_OBSERVATION = 4
SAME_ACTION_ERROR = 3
MONOLOGUE = 3
ALTERNATING = 6
IGNORED_ARGUMENTS = frozenset({"security_risk"})


@dataclass(frozen=True, slots=True)
class Stuck:
    pattern: str
    """Stable id: repeated_action, repeated_error, monologue, alternating."""
    message: str


def _action_key(action: ActionEvent) -> str:
    parsed = action.parsed_arguments
    if parsed.error is not None:
        return f"{action.tool}:{action.arguments}"
    args = parsed.value
    if isinstance(args, dict):
        args = {k: v for k, v in args.items() if k not in IGNORED_ARGUMENTS}
    return f"{action.tool}:{json.dumps(args, sort_keys=True)}"


@dataclass(frozen=True, slots=True)
class _Step:
    action: str
    observation: str
    is_error: bool


WINDOW = 64
"""Events examined: enough for every pattern (parallel batches included), and a bound so the
check costs the same at step 10 and step 10,000."""


def _since_last_user_message(events: Sequence[AnyEvent]) -> list[AnyEvent]:
    tail = list(events[-WINDOW:])
    for index in range(len(tail) - 1, -1, -1):
        event = tail[index]
        if isinstance(event, UserMessageEvent) and event.needs_prompt_check:
            return tail[index + 1 :]
    return tail


def _steps(events: Sequence[AnyEvent]) -> list[_Step]:
    actions = {e.tool_call_id: e for e in events if isinstance(e, ActionEvent)}
    return [
        _Step(_action_key(actions[e.tool_call_id]), e.content, e.is_error)
        for e in events
        if isinstance(e, ObservationEvent) and e.tool_call_id in actions
    ]


def _monologue(events: Sequence[AnyEvent]) -> bool:
    """The last MONOLOGUE model outputs were all plain messages."""
    outputs = [e for e in events if is_llm_step(e)]
    tail = outputs[-MONOLOGUE:]
    return len(tail) == MONOLOGUE and all(isinstance(e, AgentMessageEvent) for e in tail)


def detect_stuck(events: Sequence[AnyEvent]) -> Stuck | None:
    recent = _since_last_user_message(events)
    steps = _steps(recent)

    tail = steps[-SAME_ACTION_OBSERVATION:]
    if len(tail) == SAME_ACTION_OBSERVATION and len(set(tail)) == 1:
        return Stuck(
            "repeated_action",
            f"The agent repeated the same action with the same result {len(tail)} times.",
        )
    tail = steps[-SAME_ACTION_ERROR:]
    if (
        len(tail) == SAME_ACTION_ERROR
        and len({s.action for s in tail}) == 1
        and all(s.is_error for s in tail)
    ):
        return Stuck(
            "repeated_error",
            f"The agent tried the same failing action {len(tail)} times in a row.",
        )
    if _monologue(recent):
        return Stuck("monologue", f"The agent talked to itself {MONOLOGUE} times without acting.")
    tail = steps[-ALTERNATING:]
    if len(tail) == ALTERNATING:
        a, b = tail[0], tail[1]
        if a != b and all(s == (a if i % 2 == 0 else b) for i, s in enumerate(tail)):
            return Stuck(
                "alternating",
                f"The agent alternated between the same two actions {ALTERNATING} times.",
            )
    return None
