"""Settling: when every child of a spawn round has ended, its parent reads their results.

Whoever notices a child's end calls `child_ended` (the child's own worker after its last
slice, run control after a person stopped it, the sweeper as the backstop for anything lost
in between). Settling takes the parent's row lock and reads the parent's log under it, so
exactly one caller writes a round's `subagents.settled` event (and, for task and delegate,
the call's observation), and exactly one moves the waiting parent back to RUNNING with a new
slice, however many children end at the same moment on however many workers.

A child counts as ended when it finished, failed or got stuck, when it is gone (deleted), or
when it is paused while its parent is not: a person stopped that one child. Children paused
together with their parent (a subtree pause) have not ended; they resume with it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from decimal import Decimal

from django.db import transaction
from django.db.models import Exists, OuterRef

from conversations import store
from conversations.broadcast import publish_tree_changed
from conversations.events import (
    AgentErrorEvent,
    AgentMessageEvent,
    AnyEvent,
    ChildResult,
    ChildSpawn,
    ObservationEvent,
    RunFinishedEvent,
    Status,
    StatusChangeEvent,
    SubagentsSettledEvent,
    SubagentsSpawnedEvent,
    Usage,
)
from conversations.models import Conversation
from conversations.selectors import answer_events, subagent_events
from conversations.tree import ancestors

from ..chain.dispatch import schedule_next
from .results import observation_for

logger = logging.getLogger(__name__)

ENDED = frozenset({Status.FINISHED, Status.ERROR, Status.STUCK})
GOING = (Status.RUNNING, Status.WAITING_FOR_CONFIRMATION, Status.WAITING_FOR_SUBAGENTS)
DELETED = "deleted"
MAX_ANSWER_CHARS = 20_000
"""Of one child's answer, as its parent reads it: a long one keeps its end."""


def unsettled_rounds(events: Iterable[AnyEvent]) -> list[SubagentsSpawnedEvent]:
    """Spawn rounds of this log with no settled event yet, in log order."""
    spawned: dict[tuple[str, int], SubagentsSpawnedEvent] = {}
    for event in events:
        if isinstance(event, SubagentsSpawnedEvent):
            spawned[(event.tool_call_id, event.round)] = event
        elif isinstance(event, SubagentsSettledEvent):
            spawned.pop((event.tool_call_id, event.round), None)
    return list(spawned.values())


def has_ended(child_status: str | None, parent_status: str) -> bool:
    if child_status is None:  # deleted
        return True
    if child_status in ENDED:
        return True
    return child_status == Status.PAUSED and parent_status != Status.PAUSED


def child_ended(child_id: str) -> bool:
    """Settle the parent of `child_id` if that child has ended; True when the parent was
    moved back to RUNNING. Cheap for a conversation without a parent (one small query)."""
    row = Conversation.objects.filter(pk=child_id).values("parent_id", "status").first()
    if row is None or row["parent_id"] is None:
        return False
    return parent_settle(str(row["parent_id"]))


def parent_settle(parent_id: str) -> bool:
    """Write the results of every round of `parent_id` whose children have all ended, and
    continue the parent when it waits for nothing more. True when it was continued."""
    with transaction.atomic():
        parent = (
            Conversation.objects.select_for_update()
            .filter(pk=parent_id)
            .only(
                "id", "status", "worker_host", "run_slice", "run_slice_due_at", "parent_id", "agent"
            )
            .first()
        )
        if parent is None:
            return False
        rounds = unsettled_rounds(subagent_events(parent_id))
        if not rounds:
            return False
        ids = [c.conversation_id for r in rounds for c in r.children]
        rows = {
            str(row["pk"]): row
            for row in Conversation.objects.filter(pk__in=ids).values(
                "pk", "status", "cost_usd", "tokens_in", "tokens_out"
            )
        }
        appended: list = []
        waiting = False
        for spawn in rounds:
            children = [rows.get(c.conversation_id) for c in spawn.children]
            if not all(
                has_ended(row["status"] if row else None, parent.status) for row in children
            ):
                waiting = True
                continue
            answers = answer_events(c.conversation_id for c in spawn.children)
            results = [
                _result(child, rows.get(child.conversation_id), answers[child.conversation_id])
                for child in spawn.children
            ]
            appended.append(
                SubagentsSettledEvent(
                    tool_call_id=spawn.tool_call_id, round=spawn.round, results=results,
                    usage=_usage(row for row in children if row),
                )
            )  # fmt: skip
            observation = observation_for(spawn, results)
            if observation is not None:
                appended.append(observation)
        if not appended:
            return False
        resume = parent.status == Status.WAITING_FOR_SUBAGENTS and not waiting
        if resume:
            schedule_next(parent)
            appended.append(
                StatusChangeEvent(
                    status=Status.RUNNING, previous=Status.WAITING_FOR_SUBAGENTS,
                    reason="its sub-agents ended",
                )
            )  # fmt: skip
        store.append(parent.pk, appended)
        if parent.parent_id is not None:  # its ancestors' trees show this node's stats
            transaction.on_commit(
                lambda: publish_tree_changed(pk for pk, _ in ancestors(parent_id))
            )
    return resume


def _usage(rows: Iterable[dict]) -> Usage | None:
    cost, tokens_in, tokens_out = Decimal(0), 0, 0
    for row in rows:
        cost += row["cost_usd"] or 0
        tokens_in += row["tokens_in"] or 0
        tokens_out += row["tokens_out"] or 0
    if not (cost or tokens_in or tokens_out):
        return None
    return Usage(prompt_tokens=tokens_in, completion_tokens=tokens_out, cost_usd=float(cost))


def _result(child: ChildSpawn, row: dict | None, events: Sequence[AnyEvent]) -> ChildResult:
    if row is None:
        return ChildResult(
            conversation_id=child.conversation_id, name=child.name, key=child.key,
            status=DELETED, reason="the sub-agent's conversation was deleted",
        )  # fmt: skip
    answer, reason = final_answer(events)
    status = row["status"]
    if status == Status.PAUSED:
        reason = reason or "stopped by a person"
    return ChildResult(
        conversation_id=child.conversation_id, name=child.name, key=child.key, status=status,
        answer=answer[-MAX_ANSWER_CHARS:], reason="" if status == Status.FINISHED else reason,
    )  # fmt: skip


def final_answer(events: Sequence[AnyEvent]) -> tuple[str, str]:
    """A child's answer (its finish message, else its last message to the user) and why its
    run ended, as the log says."""
    answer = reason = ""
    error = ""
    for event in events:
        if isinstance(event, ObservationEvent) and event.tool == "finish" and not event.is_error:
            answer = event.content
        elif isinstance(event, AgentMessageEvent) and event.text:
            answer = event.text
        elif isinstance(event, AgentErrorEvent):
            error = event.message
        elif isinstance(event, RunFinishedEvent):
            reason = event.reason
    if error and reason and error not in reason:
        reason = f"{reason}: {error}"
    return answer, reason or error


def waiting_parents_settle(limit: int = 200) -> int:
    """The sweeper's backstop: settle parents left waiting (a child's end noticed by nobody,
    its worker killed in between). Returns how many were continued."""
    # Only parents none of whose children is still going: one indexed NOT EXISTS per sweep,
    # however many parents wait.
    going = Conversation.objects.filter(parent=OuterRef("pk"), status__in=GOING)
    ids = list(
        Conversation.objects.filter(status=Status.WAITING_FOR_SUBAGENTS)
        .exclude(Exists(going))
        .order_by("updated_at")
        .values_list("pk", flat=True)[:limit]
    )
    continued = 0
    for pk in ids:
        try:
            continued += parent_settle(str(pk))
        except Exception:  # one parent's fault must not stop the others' sweep
            logger.warning("could not settle the sub-agents of %s", pk, exc_info=True)
    return continued
