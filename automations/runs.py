"""Giving a recorded run its conversation, under the automation's concurrency rule, and the
sweeper's half: ended runs settled, and runs still waiting started.

A run is recorded (committed) before anything starts, so a crash between the record and its
conversation leaves an `accepted` run without one; `start_pending_runs` finds it and starts
it. `run_start` is idempotent: it locks the automation, then the run, and acts only on a run
still waiting, so the web request and the sweeper may race for the same run safely.

"Still going" means the conversation is active (running, waiting for an approval or for its
sub-agents); a paused or finished conversation does not hold the next run back.
"""

from __future__ import annotations

import logging
from contextlib import suppress
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from common.errors import Conflict, ServiceError
from conversations.events import Status
from teams.permissions import Action, role_allows, team_role
from workspaces.spec import spec_of

from .models import Automation, AutomationRun
from .templating import readable
from .vocabulary import OPEN_STATUSES, Concurrency, RunStatus

logger = logging.getLogger(__name__)

GOING = frozenset({Status.RUNNING, Status.WAITING_FOR_CONFIRMATION, Status.WAITING_FOR_SUBAGENTS})
ENDED = {Status.FINISHED: RunStatus.FINISHED, Status.ERROR: RunStatus.FAILED,
         Status.STUCK: RunStatus.FAILED}  # fmt: skip
PENDING_GRACE_SECONDS = 10
"""The sweeper leaves a run this young to the request that recorded it."""
GIVE_UP_AFTER = timedelta(hours=1)
"""A run that could not be started for this long (an unforeseen error each time) fails."""
BATCH = 200


@dataclass(frozen=True, slots=True)
class RunOutcome:
    run: AutomationRun
    failure: ServiceError | None = None
    """Why its conversation could not be made (recorded on the run as its error)."""


def _owner(automation: Automation):
    """The automation's creator while they may still start conversations in its team, else
    nobody (a trusted start, like the CLI's): a run must not fail because its author left."""
    creator = automation.created_by
    if creator is not None and role_allows(team_role(creator, automation.team_id), Action.ACT):
        return creator
    return None


def _going(automation: Automation, run: AutomationRun) -> list[AutomationRun]:
    return list(
        AutomationRun.objects.filter(automation=automation, conversation__status__in=GOING)
        .exclude(pk=run.pk)
        .order_by("created_at", "id")
    )


def _queued_before(automation: Automation, run: AutomationRun) -> bool:
    earlier = AutomationRun.objects.filter(
        automation=automation, status=RunStatus.QUEUED, created_at__lt=run.created_at
    )
    return earlier.exclude(pk=run.pk).exists()


def _set(run: AutomationRun, status: RunStatus, error: str = "") -> None:
    run.status = status
    run.error = error
    fields = ["status", "error"]
    if status not in OPEN_STATUSES:
        run.finished_at = timezone.now()
        fields.append("finished_at")
    run.save(update_fields=fields)


def _cancel(previous: list[AutomationRun]) -> None:
    from orchestration.run_control import conversation_stop

    for old in previous:
        with suppress(Conflict):  # it ended on its own meanwhile
            conversation_stop(conversation_id=old.conversation_id, by=None)
        # A stopped conversation is paused, not ended: settle its run here.
        _set(old, RunStatus.CANCELLED, "stopped for a newer run (concurrency: cancel).")


def _create(automation: Automation, run: AutomationRun):
    from orchestration.services import conversation_create
    from orchestration.titles import default_title

    return conversation_create(
        owner=_owner(automation), team=automation.team_id, prompt=run.prompt,
        title=default_title(readable(run.prompt)), model=automation.model, agent=automation.agent or None,
        workspace_spec=spec_of(automation.workspace_spec),
        max_cost_usd=float(automation.max_cost_usd) if automation.max_cost_usd else None,
        secret_names=list(automation.allowed_secrets), **(automation.limits or {}),
    )  # fmt: skip


def _waits(automation: Automation, run: AutomationRun) -> RunStatus | None:
    """The status the run takes instead of starting, or None to start it (after stopping
    the previous runs under `cancel`)."""
    previous = _going(automation, run)
    rule = automation.concurrency
    if rule == Concurrency.QUEUE and (previous or _queued_before(automation, run)):
        return RunStatus.QUEUED
    if previous and rule == Concurrency.CANCEL:
        _cancel(previous)
    elif previous:
        return RunStatus.SKIPPED
    return None


def run_start(*, run_id: int) -> RunOutcome:
    """Start the conversation of an accepted or queued run, or record why not: `skipped` or
    `queued` by the concurrency rule, `failed` with the service's reason (also returned).
    A run that no longer waits is returned as it is. Errors other than a ServiceError leave
    the run waiting (for the sweeper) and propagate."""
    automation_id = (
        AutomationRun.objects.filter(pk=run_id).values_list("automation_id", flat=True).get()
    )
    try:
        with transaction.atomic():
            automation = Automation.objects.select_for_update().get(pk=automation_id)
            run = AutomationRun.objects.select_for_update().get(pk=run_id)
            if run.status not in OPEN_STATUSES or run.conversation_id is not None:
                return RunOutcome(run)
            waiting = _waits(automation, run)
            if waiting is not None:
                _set(
                    run,
                    waiting,
                    "" if waiting == RunStatus.QUEUED else "the previous run is still going.",
                )
                return RunOutcome(run)
            run.conversation = _create(automation, run)
            run.status = RunStatus.STARTED
            run.started_at = timezone.now()
            run.save(update_fields=["conversation", "status", "started_at"])
            return RunOutcome(run)
    except ServiceError as exc:
        detail = str(exc.detail)
        AutomationRun.objects.filter(pk=run_id, status__in=OPEN_STATUSES).update(
            status=RunStatus.FAILED, error=detail, finished_at=timezone.now()
        )
        return RunOutcome(AutomationRun.objects.get(pk=run_id), failure=exc)


def runs_settle() -> int:
    """Started runs whose conversation ended (or was deleted): finished or failed, with the
    conversation's cost. Returns how many were settled."""
    settled = 0
    rows = AutomationRun.objects.filter(status=RunStatus.STARTED).select_related("conversation")
    for run in rows.order_by("created_at")[:BATCH]:
        conversation = run.conversation
        if conversation is None:
            status, error = RunStatus.FAILED, "its conversation was deleted."
        elif conversation.status in ENDED:
            status = ENDED[Status(conversation.status)]
            error = (
                ""
                if status == RunStatus.FINISHED
                else f"the conversation ended {conversation.status}."
            )
            run.cost_usd = conversation.cost_usd
        else:
            continue
        settled += AutomationRun.objects.filter(pk=run.pk, status=RunStatus.STARTED).update(
            status=status, error=error, cost_usd=run.cost_usd, finished_at=timezone.now()
        )
    return settled


def start_pending_runs(*, grace_seconds: float = PENDING_GRACE_SECONDS) -> int:
    """The sweeper's pass: settle ended runs, then start, oldest first, accepted runs without
    a conversation (a crash between the record and the conversation) and queued runs whose
    predecessor has ended. Returns how many conversations it started."""
    runs_settle()
    now = timezone.now()
    waiting = AutomationRun.objects.filter(
        status__in=OPEN_STATUSES, conversation__isnull=True,
        created_at__lte=now - timedelta(seconds=grace_seconds),
    ).order_by("created_at", "id")  # fmt: skip
    started = 0
    for run_id, created_at in waiting.values_list("pk", "created_at")[:BATCH]:
        try:
            outcome = run_start(run_id=run_id)
        except Exception:  # one broken run must not stop the others
            logger.exception("automation run %s could not be started", run_id)
            if now - created_at > GIVE_UP_AFTER:
                AutomationRun.objects.filter(pk=run_id, status__in=OPEN_STATUSES).update(
                    status=RunStatus.FAILED, finished_at=now,
                    error="the run could not be started (an internal error; see the logs).",
                )  # fmt: skip
            continue
        started += outcome.run.status == RunStatus.STARTED
    return started
