"""Celery edges: take ids, check the world, call one function. The runner (and with it
LiteLLM) is imported inside the task body so the web process never loads it."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from .chain.transient import TRANSIENT_FAULTS
from .control.notify_tasks import notify_webhook  # noqa: F401
from .profile_checks import CALL_TIMEOUT_SECONDS, PROFILE_CHECK_TASK
from .title_model import TITLE_TASK
from .tools.terminal import MAX_TIMEOUT_SECONDS

logger = logging.getLogger(__name__)

SLICE_MAX_RETRIES = 30
"""Waits (a queued run, a redelivery racing its original) and transient faults a slice message
retries before it is dropped; the sweeper re-sends a dropped slice once it is due."""


def slice_time_limits() -> tuple[float, float]:
    """(soft, hard) for run_slice: the place it keeps (CANVAS_TASK_SECONDS), then one more
    slice whose last step may be a model call with all its retries followed by the longest
    command the terminal allows, plus a margin. Past the soft limit the slice hands over; past
    the hard one the process is killed and the sweeper revives the run when its lease ends."""
    llm = settings.CANVAS_LLM_TIMEOUT * (settings.CANVAS_LLM_NUM_RETRIES + 1)
    longest = settings.CANVAS_TASK_SECONDS + settings.CANVAS_SLICE_SECONDS + llm
    soft = settings.CANVAS_SLICE_SOFT_TIME_LIMIT or longest + MAX_TIMEOUT_SECONDS + 60
    hard = settings.CANVAS_SLICE_TIME_LIMIT or soft + 60
    return soft, hard


SOFT_TIME_LIMIT, TIME_LIMIT = slice_time_limits()


@shared_task(
    name="orchestration.run_slice", bind=True, acks_late=True,
    soft_time_limit=SOFT_TIME_LIMIT, time_limit=TIME_LIMIT,
    max_retries=SLICE_MAX_RETRIES, autoretry_for=TRANSIENT_FAULTS,
    retry_backoff=1, retry_backoff_max=10, retry_jitter=True,
)  # fmt: skip
def run_slice(self, conversation_id: str, slice_id: str) -> None:
    from .chain.slices import run_slice as run

    wait = run(conversation_id, slice_id, keep_place_for=settings.CANVAS_TASK_SECONDS)
    if wait is None:
        return
    if self.request.retries >= self.max_retries:
        logger.warning("slice %s of conversation %s gave up waiting; the sweeper re-sends it",
                       slice_id, conversation_id)  # fmt: skip
        return
    raise self.retry(countdown=wait)


@shared_task(
    name=PROFILE_CHECK_TASK, ignore_result=True, acks_late=False,
    soft_time_limit=CALL_TIMEOUT_SECONDS + 15, time_limit=CALL_TIMEOUT_SECONDS + 30,
)  # fmt: skip
def profile_check(*, team_id: int, name: str, check_id: str) -> None:
    """One tiny completion through a team's model profile, for its page's "Test connection".
    Not acknowledged late: a check lost with its worker is reported as unanswered, not re-run."""
    from .profile_checks import profile_check_run

    profile_check_run(team_id=team_id, name=name, check_id=check_id)


@shared_task(
    name=TITLE_TASK, ignore_result=True, acks_late=False,
    soft_time_limit=CALL_TIMEOUT_SECONDS + 15, time_limit=CALL_TIMEOUT_SECONDS + 30,
)  # fmt: skip
def write_title(conversation_id: str) -> None:
    """A short title from the conversation's own model (orchestration.title_model). Not
    acknowledged late: a title lost with its worker leaves the default one."""
    from .title_model import title_write

    title_write(conversation_id)


@shared_task(name="orchestration.sweep_runs", ignore_result=True)
def sweep_runs() -> int:
    from .chain.stranded import sweep_stranded_runs
    from .chain.sweep import sweep_runs as sweep
    from .external.home import agent_homes_sweep
    from .subagents.settle import waiting_parents_settle

    return sweep_stranded_runs() + sweep() + waiting_parents_settle() + agent_homes_sweep()


@shared_task(name="orchestration.sweep_containers", ignore_result=True)
def sweep_containers() -> int:
    """Remove the containers of closed or deleted conversations (never one without our labels);
    nothing to do where no Docker engine answers."""
    from workspaces.factory import kind_unavailable

    from .workspace import conversations_open

    if kind_unavailable("docker") is not None:
        return 0
    from workspaces.docker import sweep_orphans

    return sweep_orphans(conversations_open)
