"""The automations' vocabularies, declared once: triggers, concurrency rules, missed-slot
rules, run statuses."""

from __future__ import annotations

from enum import StrEnum


class Trigger(StrEnum):
    WEBHOOK = "webhook"
    SCHEDULE = "schedule"
    MANUAL = "manual"
    """A run a person started (Run now, Retry); never an automation's own trigger."""


AUTOMATION_TRIGGERS = (Trigger.WEBHOOK, Trigger.SCHEDULE)
"""What an automation may be triggered by; runs may also be `manual`."""


class Concurrency(StrEnum):
    """What a new run does while the automation's previous run is still going."""

    SKIP = "skip"
    """Record the run as skipped; nothing starts."""
    QUEUE = "queue"
    """Record it as queued; the sweeper starts it once the previous run has ended."""
    CANCEL = "cancel"
    """Stop the previous run's conversation, then start."""


class Missed(StrEnum):
    """What a schedule does with slots it missed (the beat or the workers were down);
    automations.schedules has the exact rule."""

    SKIP = "skip"
    """Fire the latest slot only while it is fresh (within the grace window); else nothing."""
    ONCE = "once"
    """Fire one run for all the missed slots (keyed by the latest), however late."""


class RunStatus(StrEnum):
    ACCEPTED = "accepted"
    """Recorded, its conversation not made yet (a crash here is picked up by the sweeper)."""
    IGNORED = "ignored"
    """The filter was falsy."""
    SKIPPED = "skipped"
    QUEUED = "queued"
    STARTED = "started"
    """Its conversation exists and runs."""
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"
    """Stopped by a newer run under the `cancel` rule."""


RETRYABLE_STATUSES = frozenset({RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.SKIPPED})
"""Runs a person may start again (automations.manual.run_retry)."""
REPORTED_STATUSES = frozenset({RunStatus.FINISHED, RunStatus.FAILED, RunStatus.CANCELLED})
"""Ends a completion callback reports (automations.outbox)."""

OPEN_STATUSES = frozenset({RunStatus.ACCEPTED, RunStatus.QUEUED})
"""Runs still waiting for a conversation: start_pending_runs' work list."""
