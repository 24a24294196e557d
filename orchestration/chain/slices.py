"""The run chain: claim a slice's lease, let the conversation's agent take its steps, hand
over to the next slice. Nothing here knows how an agent thinks.

A run is a chain of short tasks so no conversation holds a worker for long and any worker can
continue any run. Exactly one runner per conversation: a slice runs only if its id is the one
recorded on the row and it holds the lease (token + expiry, renewed by the heartbeat while
the agent works). A duplicate delivery finds a different slice id and does nothing.

The agent is whatever `agent_for` builds from the conversation: today our own loop
(runner.SliceRunner); an external agent or a parent waiting for its children plugs in there
and reuses the lease, the heartbeat, the fault handling and the hand-over as they are.
"""

from __future__ import annotations

import logging
import threading
import time
from functools import partial
from typing import Protocol

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import close_old_connections

from conversations import store
from conversations.events import AgentErrorEvent, Status
from conversations.models import Conversation
from workspaces.base import WorkspaceUnavailable

from ..step.history import history_refresh
from ..step.llm import LLMClient
from ..step.loop import run_end_events
from ..tasks import slice_time_limits
from .dispatch import acp_time_limits
from .heartbeat import Heartbeat
from .lease import lease_claim, release
from .transient import TRANSIENT_FAULTS, close_broken, retry_transient
from .workers import draining

logger = logging.getLogger(__name__)


class SliceAgent(Protocol):
    """An agent's side of one slice: take steps until the slice's budget is spent, the run
    stops, or `cancel` (the heartbeat's) is set; append only under the slice's lease token."""

    def run(self, *, max_steps: int, max_seconds: float) -> None: ...


def agent_for(
    conversation: Conversation, token: str, cancel: threading.Event, llm: LLMClient | None
) -> SliceAgent:
    if conversation.agent:  # an external agent over ACP
        from ..external.turn import AcpTurn

        return AcpTurn(conversation, token, cancel)
    from ..step.runner import SliceRunner

    return SliceRunner(conversation, token, llm, cancel)


def run_slice(
    conversation_id: str, slice_id: str, *, llm: LLMClient | None = None,
    keep_place_for: float = 0.0,
) -> float | None:  # fmt: skip
    """Run one slice; then, until `keep_place_for` seconds have passed since the start, the
    run's next slices in the same call, so a busy conversation keeps its worker instead of
    going to the back of the queue. Each next slice is recorded and claimed like any other
    (a new slice id, a fresh lease): duplicate deliveries and the sweeper see one protocol.

    Transient database and broker faults are retried briefly (orchestration.chain.transient),
    the agent's appends under the lease on a fresh connection for up to half the lease
    (lease_writes: a finished command's result is not lost to one dropped connection); a slice
    they still interrupt hands the run over instead of failing it, and a hand-over that still
    cannot be saved or sent is left for the sweeper. Returns the seconds to wait before
    retrying `slice_id`, or None when done."""
    close_old_connections()
    started = time.monotonic()
    first = True
    while True:
        claim = retry_transient(
            partial(lease_claim, conversation_id, slice_id), what=f"claiming slice {slice_id}"
        )
        if claim.token is None:
            # A next slice that cannot be claimed at once (not expected: this call just
            # released the lease) is recorded with its due time; the sweeper sends it.
            return claim.retry_after if first else None
        first = False
        ended_well = _run_claimed(conversation_id, claim.token, llm)
        keep = ended_well and time.monotonic() - started < keep_place_for and not draining.is_set()
        next_slice = _hand_over(conversation_id, claim.token, keep=keep)
        if next_slice is None:
            _settle_parent(conversation_id)
            return None
        slice_id = next_slice


def _run_claimed(conversation_id: str, token: str, llm: LLMClient | None) -> bool:
    """Run the steps of a claimed slice. False when it ended on a fault: the run then goes
    back through the queue (or, with the lease lost, to whoever holds it now)."""
    try:
        # The task's time limits bound each slice too: Celery enforces them only in the
        # prefork pool, the lease keeper in every pool (heartbeat.py).
        conversation = Conversation.objects.select_related("team").get(pk=conversation_id)
        limits = acp_time_limits() if conversation.agent else slice_time_limits()
        with Heartbeat(conversation_id, token, limits=limits) as heartbeat:
            agent_for(conversation, token, heartbeat.cancel, llm).run(
                max_steps=settings.CANVAS_SLICE_STEPS,
                max_seconds=settings.CANVAS_SLICE_SECONDS,
            )
            return not heartbeat.lost.is_set()
    except store.StaleLeaseError:
        return False
    except TRANSIENT_FAULTS:
        # Postgres or Redis went away mid-slice and stayed away past the appends' retry, or a
        # read met the fault: not the run's fault. The next slice answers any action left
        # without a result (the agent's recovery).
        logger.warning("slice of conversation %s hit a transient fault", conversation_id,
                       exc_info=True)  # fmt: skip
        close_broken()  # the hand-over starts on a fresh connection
        return False
    except SoftTimeLimitExceeded:
        logger.warning("slice of conversation %s reached the task's soft time limit",
                       conversation_id)  # fmt: skip
        return False
    except Exception as exc:
        try:
            retry_transient(partial(_fail, conversation_id, token, exc), what="recording a crash")
        except TRANSIENT_FAULTS:
            logger.warning("could not record the crash of conversation %s", conversation_id)
        return False


def _fail(conversation_id: str, token: str, exc: BaseException) -> None:
    logger.exception("run slice crashed for conversation %s", conversation_id)
    history = history_refresh(conversation_id)
    if history.state.status != Status.RUNNING:
        return
    if isinstance(exc, WorkspaceUnavailable):  # not a bug: the message says what to do
        error = AgentErrorEvent(code="workspace_unavailable", message=str(exc))
        reason = "the workspace is unavailable"
    else:
        error = AgentErrorEvent(code="internal_error", message=f"{type(exc).__name__}: {exc}")
        reason = "internal error"
    store.append(
        conversation_id,
        [error, *run_end_events(Status.ERROR, reason, history.state.run_id)],
        lease_token=token,
    )


def _settle_parent(conversation_id: str) -> None:
    """A sub-agent whose run stopped here tells its parent at once (settle.py); if that
    fails, the sweeper finds the waiting parent within a sweep period."""
    from ..subagents.settle import child_ended

    try:
        retry_transient(partial(child_ended, conversation_id), what="settling a parent")
    except Exception:
        logger.warning("could not settle the parent of %s; the sweeper will", conversation_id,
                       exc_info=True)  # fmt: skip


def _hand_over(conversation_id: str, token: str, *, keep: bool) -> str | None:
    """Release the lease (see lease.release); None when the run does not continue here."""
    try:
        return retry_transient(
            lambda: release(conversation_id, token, keep=keep), what="handing over"
        )
    except TRANSIENT_FAULTS:
        logger.warning(
            "could not hand over conversation %s; the sweeper revives it when its lease ends",
            conversation_id, exc_info=True,
        )  # fmt: skip
        return None
