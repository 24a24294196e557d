"""UserPromptSubmit on the worker: the web process stores a person's message at once and runs
no hook; the runner asks the team's hooks about each user message before the model may read
it (RunState.unchecked says which, from the log alone).

The answer is events for the log: UserMessageCheckedEvent for the messages let through,
UserMessageBlockedEvent for the first one refused (the View withdraws it and the run ends),
and AgentErrorEvent(code="hook_failed") for every hook that broke. Messages after a refused
one stay unchecked until the next run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from conversations.events import (
    AgentErrorEvent,
    BaseEvent,
    UserMessageBlockedEvent,
    UserMessageCheckedEvent,
    UserMessageEvent,
)

from . import hook_points


@dataclass(frozen=True, slots=True)
class PromptCheck:
    events: list[BaseEvent]
    """To append, in order: failures, the checked messages, the block."""
    blocked: UserMessageBlockedEvent | None = None

    @property
    def end_reason(self) -> str:
        """Why the run ends, when a message was blocked."""
        if self.blocked is None:
            return ""
        return f"the hook {self.blocked.hook!r} blocked the message: {self.blocked.reason}"


def prompt_check(
    *, team_id: int, conversation_id: str, messages: Sequence[UserMessageEvent], cwd: str | None,
    hooks: hook_points.TeamHooks | None = None,
) -> PromptCheck:  # fmt: skip
    """Run the team's UserPromptSubmit hooks on `messages`, in order, up to the first refusal.
    Runs hooks synchronously: call from workers only."""
    failures: list[BaseEvent] = []
    allowed: list[str] = []
    blocked: UserMessageBlockedEvent | None = None
    for message in messages:
        verdict = hook_points.user_prompt_submit(
            team_id=team_id, conversation_id=conversation_id, text=message.text,
            sender=message.sender, cwd=cwd, hooks=hooks,
        )  # fmt: skip
        failures += [AgentErrorEvent(code="hook_failed", message=line) for line in verdict.failures]
        if not verdict.allowed:
            blocked = UserMessageBlockedEvent(
                message_id=message.id, hook=verdict.hook, reason=verdict.reason
            )
            break
        allowed.append(message.id)
    events = [*failures]
    if allowed:
        events.append(UserMessageCheckedEvent(message_ids=allowed))
    if blocked is not None:
        events.append(blocked)
    return PromptCheck(events, blocked)
