"""What both append paths share (store.py's portable ORM path and store_postgres.py's single
statement): the lease error, redaction, the row delta and the shape of an append's result.

Lower than both, so neither imports the other's internals: store imports store_postgres, and
both import this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from . import redaction
from .events import (
    BaseEvent,
    RunStartedEvent,
    StatusChangeEvent,
    SubagentsSpawnedEvent,
    is_llm_step,
)


class StaleLeaseError(RuntimeError):
    """The caller's run lease is gone: another runner owns the conversation now."""


@dataclass(frozen=True, slots=True)
class RowDelta:
    """What a batch of events implies for the conversation row."""

    status: str | None
    tokens_in: int
    tokens_out: int
    cost_usd: Decimal
    steps: int
    run_started: bool
    """The batch starts a run: the run_* counts below replace the row's instead of adding."""
    run_steps: int
    run_cost: float
    run_children: int
    """The run's counts (RunState's: steps, cost, sub-agents spawned), over the events after
    the batch's last run.started when it has one."""


def row_delta(events: Sequence[BaseEvent]) -> RowDelta:
    status: str | None = None
    tokens_in = tokens_out = steps = run_steps = run_children = 0
    cost = Decimal(0)
    run_cost = 0.0
    run_started = False
    for event in events:
        if isinstance(event, StatusChangeEvent):
            status = event.status.value
        elif isinstance(event, RunStartedEvent):
            run_started = True
            run_steps, run_cost, run_children = 0, 0.0, 0
        elif isinstance(event, SubagentsSpawnedEvent):
            run_children += len(event.children)
        usage = getattr(event, "usage", None)
        if usage is not None:
            tokens_in += usage.prompt_tokens
            tokens_out += usage.completion_tokens
            cost += Decimal(str(usage.cost_usd))
            run_cost += usage.cost_usd
        if is_llm_step(event):
            steps += 1
            run_steps += 1
    return RowDelta(
        status, tokens_in, tokens_out, cost, steps, run_started, run_steps, run_cost, run_children
    )


def redact(team_id: int, secrets_version: int, events: Sequence[BaseEvent]) -> list[BaseEvent]:
    redactor = redaction.redactor_for_team(team_id, secrets_version)
    return redactor.redact_events(events) if redactor is not None else list(events)


@dataclass(frozen=True, slots=True)
class AppendedRows:
    """What an append path wrote: the events as stored (redacted), their payloads and seqs,
    the rows' created_at and the conversation's status after the append."""

    events: list[BaseEvent]
    payloads: list[dict[str, Any]]
    seqs: list[int]
    created_at: datetime
    status: str
