"""Run control: starting a run, continuing one, pausing it between steps, interrupting it now,
stopping it, closing the conversation for good.

Pause, Interrupt, Stop and Close act on the conversation's whole subtree of sub-agents, taking
the row locks top-down (a parent before its children, as everything else does); Resume also
resumes the children its open spawn rounds still wait for. Stopping or pausing one child on
its own ends it in its parent's eyes: the parent then reads it as stopped
(orchestration.subagents.settle).

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
from conversations.selectors import latest_run_id, subagent_events
from teams.audit import audit_record
from teams.policies import policy_for_team, tighten

from .archive import ACTIVE
from .chain.dispatch import schedule_next
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
    conversation.interrupt_requested_at = None  # an old Interrupt must not stop the new run
    schedule_next(conversation, also_save=["interrupt_requested_at"])
    return [
        RunStartedEvent(trigger=trigger),
        StatusChangeEvent(status=Status.RUNNING, previous=previous, reason=f"run by {trigger}"),
    ]


def _name(by: AbstractBaseUser | None) -> str:
    return by.get_username() if getattr(by, "is_authenticated", False) else "api"


def _locked(conversation_id) -> Conversation:
    return Conversation.objects.select_for_update().get(pk=conversation_id)


GOING = frozenset({Status.RUNNING, Status.WAITING_FOR_SUBAGENTS})
"""What Pause and Interrupt stop: a run taking steps, or one waiting for its sub-agents."""


def _running(conversation: Conversation, going: frozenset[Status] = GOING) -> None:
    if conversation.status not in going:
        raise Conflict(f"the conversation is not running (it is {conversation.status}).")


def descendants_locked(conversation_id) -> list[Conversation]:
    """Its sub-agents at every depth, locked level by level from the top (parents before
    their children, the order every other lock here takes)."""
    found: list[Conversation] = []
    level = [conversation_id]
    while level:
        rows = list(
            Conversation.objects.select_for_update().filter(parent_id__in=level).order_by("pk")
        )
        found.extend(rows)
        level = [row.pk for row in rows]
    return found


def _end_run(
    conversation: Conversation, reason: str, *, finished_reason: str | None = None,
    interrupt: bool = False,
) -> None:  # fmt: skip
    """Pause `conversation` (row locked) from whatever active status it has."""
    if interrupt:
        conversation.interrupt_requested_at = timezone.now()
        conversation.save(update_fields=["interrupt_requested_at", "updated_at"])
        interrupt_publish_on_commit(conversation.pk)
    store.append(
        conversation.pk,
        run_end_events(
            Status.PAUSED, reason, latest_run_id(conversation.pk),
            finished_reason=finished_reason, previous=Status(conversation.status),
        ),
    )  # fmt: skip
    conversation.status = Status.PAUSED


def _subtree_end(
    conversation: Conversation, statuses: frozenset[Status], reason: str, *,
    finished_reason: str | None = None, interrupt: bool = False,
) -> int:  # fmt: skip
    """End the runs of its sub-agents in `statuses`; returns how many. Call after the
    conversation's own status is no longer active, so children paused with it do not settle."""
    count = 0
    for child in descendants_locked(conversation.pk):
        if child.status in statuses:
            _end_run(child, reason, finished_reason=finished_reason, interrupt=interrupt)
            count += 1
    return count


def _after_change(conversation: Conversation) -> None:
    """After commit: its parent (if any) learns whether it ended; its ancestors' trees redraw."""
    if conversation.parent_id is None:
        return
    from conversations.broadcast import publish_tree_changed
    from conversations.tree import ancestors

    from .subagents.settle import child_ended

    child_id = str(conversation.pk)

    def tell() -> None:
        publish_tree_changed(pk for pk, _ in ancestors(child_id))
        try:
            child_ended(child_id)
        except Exception:  # the sweeper settles a waiting parent within a sweep period
            logger.warning("could not settle the parent of %s", child_id, exc_info=True)

    transaction.on_commit(tell)


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
        _resume_waited_for(conversation, _name(by))
        _after_change(conversation)


def _resume_waited_for(conversation: Conversation, by: str) -> None:
    """Resume the paused children its open spawn rounds wait for, and theirs, so a subtree
    paused together goes on together. Children a person stopped alone were settled already."""
    from .subagents.settle import unsettled_rounds

    waited = {
        child.conversation_id
        for spawn in unsettled_rounds(subagent_events(conversation.pk))
        for child in spawn.children
    }
    if not waited:
        return
    for child in (
        Conversation.objects.select_for_update()
        .filter(pk__in=waited, status=Status.PAUSED, closed_at__isnull=True)
        .order_by("pk")
    ):
        store.append(child.pk, run_start(child, Status.PAUSED, by))
        _resume_waited_for(child, by)


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
    """Stop the run between steps, its sub-agents' too; the step in flight completes and is
    recorded."""
    with transaction.atomic():
        conversation = _locked(conversation_id)
        _running(conversation)
        reason = f"paused by {_name(by)}"
        lease = conversation.lease_token
        _end_run(conversation, reason, finished_reason="paused")
        _subtree_end(conversation, GOING, reason, finished_reason="paused")
        if lease is None:  # no step in flight (module docstring)
            _workspace_on_commit(conversation, "pause")
        _after_change(conversation)


def conversation_interrupt(*, conversation_id, by: AbstractBaseUser | None) -> None:
    """Stop the run now: the LLM call or command in flight is abandoned within seconds and the
    interrupted action gets an observation saying so; its sub-agents stop the same way.
    Resume continues the conversation."""
    with transaction.atomic():
        conversation = _locked(conversation_id)
        # An external agent's turn goes on while it waits for a person: Interrupt cancels it.
        _running(conversation, STOPPABLE if conversation.agent else GOING)
        reason = f"interrupted by {_name(by)}"
        _end_run(conversation, reason, interrupt=True)
        _subtree_end(conversation, GOING, reason, interrupt=True)
        _after_change(conversation)


STOPPABLE = frozenset(
    {Status.RUNNING, Status.WAITING_FOR_SUBAGENTS, Status.WAITING_FOR_CONFIRMATION}
)


def conversation_stop(*, conversation_id, by: AbstractBaseUser | None) -> None:
    """Stop a conversation and every sub-agent below it now, as Interrupt stops a run, held
    approvals included. A sub-agent stopped this way reports to its parent as stopped, and
    the parent goes on without it. Conflict when nothing in the subtree is active."""
    with transaction.atomic():
        conversation = _locked(conversation_id)
        reason = f"stopped by {_name(by)}"
        stopped = 0
        if conversation.status in STOPPABLE:
            _end_run(conversation, reason, interrupt=True)
            stopped = 1
        stopped += _subtree_end(conversation, STOPPABLE, reason, interrupt=True)
        if not stopped:
            raise Conflict(
                f"nothing to stop: the conversation is {conversation.status} and none of its "
                "sub-agents is active."
            )
        _after_change(conversation)


def conversation_close(*, conversation_id, by: AbstractBaseUser | None) -> None:
    """Close the conversation and its sub-agents: a run going (or waiting for approval or
    children) is stopped as Interrupt stops it, the workspaces' containers are removed, and
    no message or run is taken from now on. The folder stays (Changes, Files, archive) until
    the conversation is deleted."""
    with transaction.atomic():
        conversation = _locked(conversation_id)
        if conversation.closed_at is not None:
            raise Conflict("the conversation is already closed.")
        reason = f"closed by {_name(by)}"
        for row in [conversation, *descendants_locked(conversation.pk)]:
            if row.closed_at is not None:
                continue
            if row.status in ACTIVE:
                _end_run(row, reason, finished_reason="closed", interrupt=True)
            row.closed_at = timezone.now()
            row.save(update_fields=["closed_at", "interrupt_requested_at", "updated_at"])
            _workspace_on_commit(row, "close")
        audit_record(
            actor=by, kind="conversation.closed", team=conversation.team_id,
            target=str(conversation.pk), data={},
        )  # fmt: skip
        _after_change(conversation)
