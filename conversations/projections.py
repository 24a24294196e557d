"""Pure folds from events to state. No ORM: runners, views and tests share them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .events import (
    AnyEvent,
    RunStartedEvent,
    Status,
    StatusChangeEvent,
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
    """Dollars the model cost since the current run started: what a per-run budget bounds."""

    def apply(self, events: Iterable[AnyEvent]) -> RunState:
        for event in events:
            if isinstance(event, StatusChangeEvent):
                self.status = event.status
            elif isinstance(event, RunStartedEvent):
                self.run_id = event.run_id
                self.run_steps = 0
                self.run_cost = 0.0
            elif is_llm_step(event):
                self.run_steps += 1
            usage = getattr(event, "usage", None)
            if usage is not None:
                self.run_cost += usage.cost_usd
        return self
