"""Run control: starting a run, continuing one, pausing it between steps, interrupting it now,
closing the conversation for good.

Each is an event appended through the store, together with the row's run bookkeeping, under
the conversation's row lock in one transaction; a slice is sent, an interrupt published, or
the workspace's container paused, resumed or removed, only after commit. Approve and reject
decisions live in orchestration.control.approvals.

The workspace follows (workspaces.factory Lifecycle; nothing for a local one): Resume thaws
its container, Pause freezes it when no step is in flight (freezing a running command would
stall that step until its timeout; the container then stays up until the next pause), Close
removes it. The engine's failures are logged, never a refusal: the run's state is what
counts, and the orphan sweep removes what Close could not.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from common.errors import Conflict
from conversations import store
from conversations.events import RunStartedEvent, Status, StatusChangeEvent
from conversations.models import Conversation
from conversations.selectors import latest_run_id
from teams.audit import audit_record
from teams.policies import policy_for_team, tighten

from .archive import ACTIVE
from .chain.dispatch import enqueue_slice_on_commit, new_slice_id, slice_due_at
from .chain.interrupts import interrupt_publish_on_commit
from .step.agent import AgentConfig
from .step.loop import run_end_events
from .workspace import workspace_of

logger = logging.getLogger(__name__)


def refuse_closed(conversation: Conversation) -> None:
    """Conflict when the conversation was closed: it takes no messages and no runs."""
    if conversation.closed_at is not None:
        raise Conflict("the conversation is closed: it takes no new messages or runs.")


def _workspace_on_commit(conversation: Conversation, what: str) -> None:
    """Call `what` (pause, resume, close) on the conversation's workspace after commit."""
    workspace = workspace_of(conversation)
    change: Callable[[], None] = getattr(workspace, what)

    def call() -> None:
        try:
            change()
        except Exception:  # the engine's own errors; see the module docstring
            logger.warning("could not %s the workspace of %s", what, conversation.pk,
                           exc_info=True)  # fmt: skip

    transaction.on_commit(call)


def run_start(conversation: Conversation, previous: Status, trigger: str) -> list:
    """Record a new slice on the row (inside the caller's transaction), send it after commit,
    and return the events that say the run started, for the caller to append. Conflict when
    the conversation is closed."""
    refuse_closed(conversation)
    conversation.run_slice = new_slice_id()
    conversation.run_slice_due_at = slice_due_at()
    conversation.interrupt_requested_at = None  # an old Interrupt must not stop the new run
    conversation.save(
        update_fields=["run_slice", "run_slice_due_at", "interrupt_requested_at", "updated_at"]
    )
    enqueue_slice_on_commit(
        conversation.pk, conversation.run_slice, worker_host=conversation.worker_host
    )
    return [
        RunStartedEvent(trigger=trigger),
        StatusChangeEvent(status=Status.RUNNING, previous=previous, reason=f"run by {trigger}"),
    ]


def _name(by: AbstractBaseUser | None) -> str:
    return by.get_username() if getattr(by, "is_authenticated", False) else "api"


def _locked(conversation_id) -> Conversation:
    return Conversation.objects.select_for_update().get(pk=conversation_id)


def _running(conversation: Conversation) -> None:
    if conversation.status != Status.RUNNING:
        raise Conflict(f"the conversation is not running (it is {conversation.status}).")


def conversation_run(
    *,
    conversation_id,
    by: AbstractBaseUser | None,
    max_iterations: int | None = None,
    max_cost_usd: float | None = None,
) -> None:
    """Continue a conversation that is not running (after a pause, an error, a limit).

    `max_iterations` / `max_cost_usd` raise (or lower) this conversation's own per-run limits
    first, within its team's policy: how a person continues a run that hit a limit."""
    with transaction.atomic():
        conversation = _locked(conversation_id)
        if conversation.status == Status.RUNNING:
            raise Conflict("the conversation is already running.")
        if max_iterations is not None or max_cost_usd is not None:
            _set_run_limits(conversation, max_iterations, max_cost_usd, by=by)
        store.append(
            conversation.pk, run_start(conversation, Status(conversation.status), _name(by))
        )
        _workspace_on_commit(conversation, "resume")


def _set_run_limits(conversation: Conversation, iterations, cost, *, by) -> None:
    config = AgentConfig.model_validate(conversation.agent_config)
    requested = {
        "max_iterations": iterations if iterations is not None else config.max_iterations,
        "max_cost_usd": cost if cost is not None else config.max_cost_usd,
    }
    allowed = tighten(policy_for_team(conversation.team_id), requested)
    updated = config.model_copy(
        update={
            "max_iterations": allowed["max_iterations"],
            "max_cost_usd": allowed["max_cost_usd"],
        }
    )
    conversation.agent_config = updated.model_dump(mode="json")
    conversation.save(update_fields=["agent_config", "updated_at"])
    audit_record(
        actor=by, kind="conversation.limits_changed", team=conversation.team_id,
        target=str(conversation.pk),
        data={"max_iterations": updated.max_iterations, "max_cost_usd": updated.max_cost_usd},
    )  # fmt: skip


def conversation_pause(*, conversation_id, by: AbstractBaseUser | None) -> None:
    """Stop the run between steps; the step in flight completes and is recorded."""
    with transaction.atomic():
        conversation = _locked(conversation_id)
        _running(conversation)
        store.append(
            conversation.pk,
            run_end_events(
                Status.PAUSED,
                f"paused by {_name(by)}",
                latest_run_id(conversation.pk),
                finished_reason="paused",
            ),
        )
        if conversation.lease_token is None:  # no step in flight (module docstring)
            _workspace_on_commit(conversation, "pause")


def conversation_interrupt(*, conversation_id, by: AbstractBaseUser | None) -> None:
    """Stop the run now: the LLM call or command in flight is abandoned within seconds and the
    interrupted action gets an observation saying so. Resume continues the conversation."""
    with transaction.atomic():
        conversation = _locked(conversation_id)
        _running(conversation)
        conversation.interrupt_requested_at = timezone.now()
        conversation.save(update_fields=["interrupt_requested_at", "updated_at"])
        interrupt_publish_on_commit(conversation.pk)  # the fast path to the running slice
        store.append(
            conversation.pk,
            run_end_events(
                Status.PAUSED, f"interrupted by {_name(by)}", latest_run_id(conversation.pk)
            ),
        )


def conversation_close(*, conversation_id, by: AbstractBaseUser | None) -> None:
    """Close the conversation: a run going (or waiting for approval) is stopped as Interrupt
    stops it, the workspace's container is removed, and no message or run is taken from now
    on. The folder stays (Changes, Files, archive) until the conversation is deleted."""
    with transaction.atomic():
        conversation = _locked(conversation_id)
        if conversation.closed_at is not None:
            raise Conflict("the conversation is already closed.")
        now = timezone.now()
        if conversation.status in ACTIVE:
            conversation.interrupt_requested_at = now
            interrupt_publish_on_commit(conversation.pk)
            store.append(
                conversation.pk,
                run_end_events(
                    Status.PAUSED, f"closed by {_name(by)}", latest_run_id(conversation.pk),
                    finished_reason="closed",
                ),
            )  # fmt: skip
        conversation.closed_at = now
        conversation.save(update_fields=["closed_at", "interrupt_requested_at", "updated_at"])
        audit_record(
            actor=by, kind="conversation.closed", team=conversation.team_id,
            target=str(conversation.pk), data={},
        )  # fmt: skip
        _workspace_on_commit(conversation, "close")
