"""A team's runs: every active and recent conversation, automation run and sub-agent, with
status, who started it, duration, steps, cost and what it waits for (canvas.runs; the Runs
page shows the same rows). Decide a pending action with
POST /api/conversations/{id}/actions/{action_id}/approve or /reject."""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from typing import Literal

from django.http import HttpRequest
from ninja import Query, Router, Schema
from pydantic import Field

from canvas.runs import LIMIT, RunFilters, RunRow, team_runs
from common.inputs import Text
from teams.permissions import Action
from teams.services import team_get_for

from . import ERRORS

router = Router(tags=["runs"])


class RunsQuery(Schema):
    status: Literal["", "active", "approval", "finished", "failed", "stopped"] = Field(
        default="", description="Entries with a row in this state (any row of its tree)."
    )
    kind: Literal["", "conversation", "automation", "subagents"] = Field(
        default="", description="Started by a person, by an automation, or with sub-agents."
    )
    person: Text(150) = Field(default="", description="Entries this username started.")
    limit: int = Field(default=LIMIT, ge=1, le=200, description="Entries besides active ones.")


class PendingOut(Schema):
    action_id: str
    tool: str
    risk: str
    summary: str


class RunOut(Schema):
    key: str = Field(description='"c-<conversation id>", or "a-<automation run id>" for a run '
                     "that has no conversation.")  # fmt: skip
    kind: Literal["conversation", "automation", "subagent"]
    conversation_id: uuid.UUID | None
    parent_id: uuid.UUID | None
    automation_id: int | None
    depth: int = Field(description="0 for an entry; its sub-agents follow it, one deeper each.")
    title: str
    status: str = Field(description="The conversation's status, or the automation run's.")
    status_label: str
    agent: str
    model: str
    started_by_kind: Literal["person", "automation", "parent", ""]
    started_by: str
    person: str
    started_at: datetime
    ended_at: datetime | None = Field(description="Null while active.")
    duration_seconds: float
    steps: int
    cost_usd: Decimal
    waiting_kind: Literal["approval", "children", "worker", ""]
    waiting_for: str
    pending: list[PendingOut]
    error: str


class RunsOut(Schema):
    runs: list[RunOut]
    waiting_for_approval: int


def _run(row: RunRow, now: datetime) -> dict:
    return {
        "key": row.key, "kind": row.kind, "conversation_id": row.conversation_id,
        "parent_id": row.parent_id, "automation_id": row.automation_id, "depth": row.depth,
        "title": row.title, "status": row.status, "status_label": row.status_label,
        "agent": row.agent, "model": row.model, "started_by_kind": row.started_by_kind,
        "started_by": row.started_by, "person": row.person, "started_at": row.started_at,
        "ended_at": None if row.active else row.ended_at,
        "duration_seconds": round(row.duration(now).total_seconds(), 3), "steps": row.steps,
        "cost_usd": row.cost_usd, "waiting_kind": row.waiting_kind,
        "waiting_for": row.waiting_for, "error": row.error,
        "pending": [{"action_id": c.action_id, "tool": c.tool, "risk": c.risk,
                     "summary": c.summary} for c in row.pending],
    }  # fmt: skip


@router.get("/{team_id}/runs", response={200: RunsOut, **ERRORS})
def runs_list(request: HttpRequest, team_id: int, query: Query[RunsQuery]):
    team = team_get_for(request.user, team_id, Action.VIEW)
    filters = RunFilters(status=query.status, kind=query.kind, person=query.person)
    runs = team_runs(team.pk, filters, limit=query.limit)
    return {
        "runs": [_run(row, runs.now) for row in runs.rows()],
        "waiting_for_approval": runs.waiting_for_approval,
    }
