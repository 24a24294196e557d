"""One run slice: take the lease, run a bounded number of steps, hand over to the next slice.

A run is a chain of short tasks so no conversation holds a worker for long and any worker can
continue any run. Exactly one runner per conversation: a slice runs only if its id is the one
recorded on the row and it holds the lease (token + expiry, renewed by a heartbeat while a
tool runs). A duplicate delivery finds a different slice id and does nothing.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.db.models import Q
from django.utils import timezone

from conversations import store
from conversations.events import (
    ActionEvent,
    AgentErrorEvent,
    BaseEvent,
    RunFinishedEvent,
    Status,
    StatusChangeEvent,
)
from conversations.models import Conversation
from conversations.view import unanswered_actions
from teams.budget import spend_add
from teams.policies import policy_for_team
from workspaces.local import workspace_for

from .admission import QUEUE_RETRY_SECONDS, admitted_runs, lock_team, note_queued
from .agent import AgentConfig
from .dispatch import enqueue_slice_on_commit, new_slice_id, send_slice
from .history import History, history_refresh
from .limits import LIMIT_REASONS, limit_reached, run_limits, tool_refused
from .llm import LiteLLMClient, LLMClient, LLMError
from .loop import events_from_response, execute_action, interrupted_observation
from .profiles import UnknownProfileError, profile_get, profile_with_api_key
from .tools.base import Tool, ToolContext, team_secrets, tool_schema
from .tools.registry import tools_for

logger = logging.getLogger(__name__)


def _lease_ttl() -> timedelta:
    return timedelta(seconds=settings.CANVAS_LEASE_SECONDS)


def lease_claim(conversation_id: str, slice_id: str) -> str | float | None:
    """Claim the run for this slice.

    Returns the lease token when claimed; the seconds to wait when this slice is current but
    another runner still holds a live lease (a redelivery racing its original), or when the
    team is at its limit of concurrent runs (the run is queued, with one notice in its log);
    None when there is nothing to do here: the slice is stale, the conversation is not
    running, or it is pinned to another host (the slice is forwarded to that host's queue).
    """
    row = (
        Conversation.objects.filter(pk=conversation_id)
        .values(
            "run_slice", "status", "lease_token", "lease_expires_at", "worker_host", "team_id",
            "run_steps",
        )
        .first()
    )  # fmt: skip
    if row is None or row["run_slice"] != slice_id or row["status"] != Status.RUNNING:
        return None
    here = settings.CANVAS_WORKER_HOST
    if settings.CANVAS_PIN_TO_HOST and row["worker_host"] and row["worker_host"] != here:
        send_slice(conversation_id, slice_id, worker_host=row["worker_host"])
        return None
    limit = policy_for_team(row["team_id"]).max_concurrent_runs
    if limit is None or row["run_steps"] > 0:  # no limit, or this run already holds a place
        return _claim(conversation_id, slice_id, row)
    with transaction.atomic():
        team_name = lock_team(row["team_id"])
        if admitted_runs(row["team_id"], excluding=conversation_id) >= limit:
            note_queued(conversation_id, team_name, limit)
            return QUEUE_RETRY_SECONDS
        return _claim(conversation_id, slice_id, row)


def _claim(conversation_id: str, slice_id: str, row: dict) -> str | float | None:
    now = timezone.now()
    here = settings.CANVAS_WORKER_HOST
    token = uuid.uuid4().hex
    claimed = (
        Conversation.objects.filter(pk=conversation_id, run_slice=slice_id, status=Status.RUNNING)
        .filter(Q(lease_token__isnull=True) | Q(lease_expires_at__lt=now))
        .update(
            lease_token=token,
            lease_expires_at=now + _lease_ttl(),
            worker_host=row["worker_host"] or (here if settings.CANVAS_PIN_TO_HOST else ""),
        )
    )
    if claimed:
        return token
    if row["lease_expires_at"] is not None and row["lease_expires_at"] >= now:
        return max(0.5, (row["lease_expires_at"] - now).total_seconds() + 0.1)
    return None


class _Heartbeat:
    """Renews the lease in the background so a long tool call does not lose it."""

    def __init__(self, conversation_id: str, token: str) -> None:
        self.conversation_id = conversation_id
        self.token = token
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease-heartbeat", daemon=True)

    def _run(self) -> None:
        interval = max(0.2, settings.CANVAS_LEASE_SECONDS / 3)
        try:
            while not self._stop.wait(interval):
                renewed = Conversation.objects.filter(
                    pk=self.conversation_id, lease_token=self.token
                ).update(lease_expires_at=timezone.now() + _lease_ttl())
                if not renewed:
                    self.lost.set()
                    return
        finally:
            connection.close()

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class SliceRunner:
    def __init__(self, conversation: Conversation, token: str, llm: LLMClient | None = None):
        self.conversation_id = str(conversation.pk)
        self.token = token
        self.config = AgentConfig.model_validate(conversation.agent_config)
        self.team_id: int = conversation.team_id
        # Re-read at every slice: a policy tightened mid-run applies from the next slice.
        self.limits = run_limits(self.config, policy_for_team(self.team_id))
        self.tools: dict[str, Tool] = {
            t.name: t for t in tools_for(self.config.tools) if self.limits.tool_allowed(t.name)
        }
        self.schemas = [tool_schema(t) for t in self.tools.values()]
        self.ctx = ToolContext(
            conversation_id=self.conversation_id,
            workspace=workspace_for(self.conversation_id, conversation.workspace_path or None),
            secrets=team_secrets(conversation.team_id),
        )
        self._llm = llm
        self.history: History = history_refresh(self.conversation_id)

    @property
    def llm(self) -> LLMClient:
        if self._llm is None:
            profile = profile_get(self.config.model, self.team_id)
            self._llm = LiteLLMClient(profile_with_api_key(profile))
        return self._llm

    def append(self, events: list[BaseEvent], *, spend: float = 0.0) -> None:
        """Append under the lease; `spend` (dollars) goes on the team's monthly bill in the
        same transaction, so a crash can neither lose nor double-count it."""
        with transaction.atomic():
            stored = store.append(self.conversation_id, events, lease_token=self.token)
            if spend:
                spend_add(self.team_id, spend)
        self.history.extend(stored, self.conversation_id)

    def end(self, status: Status, reason: str, error: AgentErrorEvent | None = None) -> None:
        events: list[BaseEvent] = [error] if error else []
        events.append(StatusChangeEvent(status=status, previous=Status.RUNNING, reason=reason))
        events.append(
            RunFinishedEvent(run_id=self.history.state.run_id or "", status=status, reason=reason)
        )
        self.append(events)

    def recover(self) -> None:
        """Give every action left without a result one, before the model is asked anything."""
        for action in unanswered_actions(self.history.events):
            tool = self.tools.get(action.tool)
            if tool is not None and tool.read_only:
                outcome = execute_action(action, self.tools, self.ctx)
                self.append([outcome.observation])
            else:
                self.append([interrupted_observation(action)])

    def step(self) -> bool:
        """One LLM response and its tool calls. Returns False once the run has ended."""
        reached = limit_reached(self.limits, self.history.state, self.team_id)
        if reached is not None:
            self.end(Status.ERROR, LIMIT_REASONS[reached.code], reached)
            return False
        try:
            response = self.llm.complete(self.history.messages, self.schemas)
        except (LLMError, UnknownProfileError) as exc:
            code = getattr(exc, "code", "unknown_model")
            self.end(Status.ERROR, "model error", AgentErrorEvent(code=code, message=str(exc)))
            return False
        produced = events_from_response(response)
        self.append(produced, spend=response.usage.cost_usd)
        if not response.tool_calls:
            self.end(Status.FINISHED, "the agent answered")
            return False
        finished = False
        for action in (e for e in produced if isinstance(e, ActionEvent)):
            if not self.limits.tool_allowed(action.tool):
                self.append([tool_refused(action.tool_call_id, action.tool)])
                continue
            outcome = execute_action(action, self.tools, self.ctx)
            self.append([outcome.observation])
            finished = finished or outcome.finish
        if finished:
            self.end(Status.FINISHED, "the agent called finish")
            return False
        return True

    def run(self, *, max_steps: int, max_seconds: float) -> None:
        self.recover()
        deadline = time.monotonic() + max_seconds
        for _ in range(max_steps):
            self.history = history_refresh(self.conversation_id)
            if self.history.state.status != Status.RUNNING:
                return
            if not self.step() or time.monotonic() >= deadline:
                return


def _release(conversation_id: str, token: str) -> None:
    """Drop the lease; if the run goes on, record and enqueue the next slice atomically."""
    with transaction.atomic():
        row = (
            Conversation.objects.select_for_update()
            .filter(pk=conversation_id, lease_token=token)
            .only("id", "status", "run_slice", "worker_host")
            .first()
        )
        if row is None:
            return
        if row.status == Status.RUNNING:
            row.run_slice = new_slice_id()
            enqueue_slice_on_commit(row.pk, row.run_slice, worker_host=row.worker_host)
        else:
            row.run_slice = None
        row.lease_token = None
        row.lease_expires_at = None
        row.save(update_fields=["run_slice", "lease_token", "lease_expires_at", "updated_at"])


def _fail(conversation_id: str, token: str, exc: BaseException) -> None:
    logger.exception("run slice crashed for conversation %s", conversation_id)
    history = history_refresh(conversation_id)
    if history.state.status != Status.RUNNING:
        return
    reason = "internal error"
    store.append(
        conversation_id,
        [
            AgentErrorEvent(code="internal_error", message=f"{type(exc).__name__}: {exc}"),
            StatusChangeEvent(status=Status.ERROR, previous=Status.RUNNING, reason=reason),
            RunFinishedEvent(run_id=history.state.run_id or "", status=Status.ERROR, reason=reason),
        ],
        lease_token=token,
    )


def run_slice(conversation_id: str, slice_id: str, *, llm: LLMClient | None = None) -> float | None:
    """Run one slice. Returns seconds to wait before retrying, or None when done."""
    close_old_connections()
    claim = lease_claim(conversation_id, slice_id)
    if not isinstance(claim, str):
        return claim
    token = claim
    try:
        with _Heartbeat(conversation_id, token):
            conversation = Conversation.objects.get(pk=conversation_id)
            try:
                SliceRunner(conversation, token, llm).run(
                    max_steps=settings.CANVAS_SLICE_STEPS,
                    max_seconds=settings.CANVAS_SLICE_SECONDS,
                )
            except store.StaleLeaseError:
                return None
            except Exception as exc:
                _fail(conversation_id, token, exc)
    finally:
        _release(conversation_id, token)
    return None


def sweep_runs() -> int:
    """Re-enqueue running conversations whose runner died (lease expired) or whose next
    slice was never picked up. Returns how many were re-enqueued."""
    now = timezone.now()
    stale_queue = now - timedelta(seconds=max(60.0, settings.CANVAS_SWEEP_SECONDS * 4))
    stalled = Q(lease_expires_at__lt=now) | Q(lease_token__isnull=True) & (
        Q(updated_at__lt=stale_queue) | Q(run_slice__isnull=True)
    )
    candidates = Conversation.objects.filter(stalled, status=Status.RUNNING)
    count = 0
    for pk in candidates.values_list("pk", flat=True)[:500]:
        with transaction.atomic():
            row = (
                Conversation.objects.select_for_update()
                .filter(stalled, pk=pk, status=Status.RUNNING)
                .first()
            )
            if row is None:
                continue
            row.run_slice = new_slice_id()
            row.lease_token = None
            row.lease_expires_at = None
            row.save(update_fields=["run_slice", "lease_token", "lease_expires_at", "updated_at"])
            enqueue_slice_on_commit(row.pk, row.run_slice, worker_host=row.worker_host)
            count += 1
    return count
