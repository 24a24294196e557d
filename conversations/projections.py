"""Pure folds from events to state. No ORM: runners, views and tests share them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .events import (
    AnyEvent,
    RunStartedEvent,
    Status,
    StatusChangeEvent,
    SubagentsSpawnedEvent,
    UserMessageBlockedEvent,
    UserMessageCheckedEvent,
    UserMessageEvent,
    is_llm_step,
)


@dataclass(slots=True)
class RunState:
    """What a runner needs to know about the run in progress, derived from the log alone."""

    status: Status = Status.IDLE
    run_id: str | None = None
    run_steps: int = 0
    """LLM responses since the current run started: what max_iterations bounds."""
    run_cost: float = 0.0
    """Dollars the model cost since the current run started: what a per-run budget bounds.
    Children's spend rolls up into it as their rounds settle (SubagentsSettledEvent.usage)."""
    run_children: int = 0
    """Sub-agents spawned since the current run started: what max_children_per_run bounds."""
    unchecked: dict[str, UserMessageEvent] = field(default_factory=dict)
    """User messages no UserPromptSubmit check has answered yet, by id, in log order. From
    the log alone, so a check survives a crash and is never run twice once recorded."""

    def apply(self, events: Iterable[AnyEvent]) -> RunState:
        for event in events:
            if isinstance(event, StatusChangeEvent):
                self.status = event.status
            elif isinstance(event, RunStartedEvent):
                self.run_id = event.run_id
                self.run_steps = 0
                self.run_cost = 0.0
                self.run_children = 0
            elif isinstance(event, SubagentsSpawnedEvent):
                self.run_children += len(event.children)
            elif is_llm_step(event):
                self.run_steps += 1
            elif isinstance(event, UserMessageEvent) and event.needs_prompt_check:
                self.unchecked[event.id] = event
            elif isinstance(event, UserMessageCheckedEvent):
                for message_id in event.message_ids:
                    self.unchecked.pop(message_id, None)
            elif isinstance(event, UserMessageBlockedEvent):
                self.unchecked.pop(event.message_id, None)
            usage = getattr(event, "usage", None)
            if usage is not None:
                self.run_cost += usage.cost_usd
        return self

    @classmethod
    def resumed(
        cls, window: Iterable[AnyEvent], recent: Iterable[AnyEvent], counts: RunCounts
    ) -> RunState:
        """The state from a window of the log (conversations.window) and the row's counts.
        The window holds the run's start, but not every step since; `recent`, its events from
        its start seq on, holds every message not checked yet (a condensation is only ever
        written after the messages before it were checked)."""
        state = cls().apply(window)
        state.unchecked = cls().apply(recent).unchecked
        state.status = Status(counts.status)
        state.run_steps = counts.run_steps
        state.run_cost = counts.run_cost
        state.run_children = counts.run_children
        return state


@dataclass(frozen=True, slots=True)
class RunCounts:
    """What the conversation row mirrors of the log at its last_seq (store.append keeps it)."""

    last_seq: int
    status: str
    run_steps: int
    run_cost: float
    run_children: int


def unchecked_messages(events: Iterable[AnyEvent]) -> list[UserMessageEvent]:
    """User messages no UserPromptSubmit check has answered yet, in log order."""
    return list(RunState().apply(events).unchecked.values())
