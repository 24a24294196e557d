"""A team's runs at a glance, for the Runs page, its socket and GET /api/teams/{id}/runs: every
active and recent top-level conversation and automation run, each with its sub-agent tree under
it, and for every row its status in words, agent or model, who or what started it, when, for
how long, its steps and cost, and what it waits for (an approval, its sub-agents, a worker).

An entry is a top-level conversation (started by a person, or by an automation when an
automation run names it) or an automation run that never got a conversation (queued, skipped,
failed before it started). Every active entry is listed, then the most recent others up to the
limit. Filters keep whole entries: an entry matches a status when any row of its tree has it
(a root waiting for its sub-agents shows under "waiting for approval" when a child does).

Every query is filtered by the team: a sub-agent is read only under a root of the team, and
its own row must name the team too. A fixed number of queries however many rows.

It lives in canvas, not conversations: it reads conversations, automations, worker hosts and
pending approvals, and only the top layer may import them all (docs/architecture.md).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import Count, Max
from django.utils import timezone

from automations.models import AutomationRun
from automations.vocabulary import RunStatus
from conversations.events import Status
from conversations.models import Conversation
from orchestration.chain.workers import alive_after
from orchestration.control.approvals import pending_actions_for
from orchestration.models import WorkerHost

from .event_rows import ApprovalCard, approval_card

LIMIT = 50
"""Entries listed at most (every active one is, whatever this says)."""
CANDIDATES = 200
"""Recent entries of each source read before filtering: a narrow filter still finds some."""
MAX_NODES = 500
"""Sub-agent rows read at most across all entries."""
MAX_DEPTH = 16

KINDS = {
    "conversation": "Conversation",
    "automation": "Automation run",
    "subagent": "Sub-agent",
}
"""A row's kind: what started it (a person, an automation, its parent)."""
KIND_FILTERS = {
    "conversation": "Started by a person",
    "automation": "Automation runs",
    "subagents": "With sub-agents",
}
ACTIVE_CONVERSATION = (
    Status.RUNNING,
    Status.WAITING_FOR_CONFIRMATION,
    Status.WAITING_FOR_SUBAGENTS,
)
ACTIVE = frozenset({*ACTIVE_CONVERSATION, RunStatus.ACCEPTED, RunStatus.QUEUED, RunStatus.STARTED})
STATUS_FILTERS: dict[str, tuple[str, frozenset[str]]] = {
    "active": ("Active", frozenset(ACTIVE)),
    "approval": ("Waiting for approval", frozenset({Status.WAITING_FOR_CONFIRMATION})),
    "finished": ("Finished", frozenset({Status.FINISHED, RunStatus.FINISHED})),
    "failed": ("Failed or stuck", frozenset({Status.ERROR, Status.STUCK, RunStatus.FAILED})),
    "stopped": (
        "Paused, idle, cancelled or skipped",
        frozenset({Status.PAUSED, Status.IDLE, RunStatus.CANCELLED, RunStatus.SKIPPED}),
    ),
}
WORDS = {
    Status.RUNNING: "Running",
    Status.WAITING_FOR_CONFIRMATION: "Waiting for approval",
    Status.WAITING_FOR_SUBAGENTS: "Waiting for sub-agents",
    Status.PAUSED: "Paused",
    Status.IDLE: "Idle",
    Status.FINISHED: "Finished",
    Status.STUCK: "Stuck",
    Status.ERROR: "Failed",
    RunStatus.ACCEPTED: "Queued",
    RunStatus.QUEUED: "Queued",
    RunStatus.STARTED: "Starting",
    RunStatus.SKIPPED: "Skipped",
    RunStatus.FAILED: "Failed",
    RunStatus.CANCELLED: "Cancelled",
    RunStatus.FINISHED: "Finished",
}
OTHERWISE_WAITING = {Status.IDLE: "A message", Status.PAUSED: "Someone to resume it"}
"""What a top-level conversation in these waits for (a sub-agent waits for its parent)."""
_FIELDS = (
    "id", "parent_id", "title", "name", "subagent_type", "status", "model", "agent", "steps",
    "cost_usd", "created_at", "updated_at", "closed_at", "worker_host", "owner__username",
)  # fmt: skip


@dataclass(slots=True)
class RunRow:
    """One row: a conversation (top-level or a sub-agent) or a conversation-less automation run."""

    key: str
    """Unique on the page: "c-<conversation id>" or "a-<automation run id>"."""
    kind: str
    status: str
    """The conversation's status, or the automation run's."""
    title: str
    agent: str
    """An external agent's profile name; "" for our own agent (then `model` says which)."""
    model: str
    started_by_kind: str
    """person, automation or parent; "" when nobody is known (an owner who left)."""
    started_by: str
    started_at: datetime
    ended_at: datetime | None
    steps: int
    cost_usd: Decimal
    conversation_id: uuid.UUID | None = None
    parent_id: uuid.UUID | None = None
    parent_title: str = ""
    automation_id: int | None = None
    depth: int = 0
    person: str = ""
    """The username that started the entry (filters by person)."""
    waiting_kind: str = ""
    """approval, children, worker, or ""."""
    waiting_for: str = ""
    pending: list[ApprovalCard] = field(default_factory=list)
    error: str = ""
    children: list[RunRow] = field(default_factory=list)
    worker_host: str = ""

    @property
    def status_label(self) -> str:
        return WORDS.get(self.status, self.status.replace("_", " ").capitalize())

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    @property
    def kind_label(self) -> str:
        return KINDS[self.kind]

    def duration(self, now: datetime) -> timedelta:
        end = now if self.active or self.ended_at is None else self.ended_at
        return max(end - self.started_at, timedelta(0))


@dataclass(slots=True)
class Entry:
    root: RunRow

    def rows(self) -> list[RunRow]:
        """The root, then its sub-agents depth first, oldest first at each level."""
        out: list[RunRow] = []
        stack = [self.root]
        while stack:
            row = stack.pop()
            out.append(row)
            stack.extend(reversed(row.children))
        return out


@dataclass(frozen=True, slots=True)
class RunFilters:
    status: str = ""
    kind: str = ""
    person: str = ""

    def __post_init__(self) -> None:
        if self.status and self.status not in STATUS_FILTERS:
            raise ValueError(
                f"status must be one of {', '.join(STATUS_FILTERS)}, not {self.status!r}"
            )
        if self.kind and self.kind not in KIND_FILTERS:
            raise ValueError(f"kind must be one of {', '.join(KIND_FILTERS)}, not {self.kind!r}")

    def keeps(self, entry: Entry) -> bool:
        rows = entry.rows()
        if self.status and not any(r.status in STATUS_FILTERS[self.status][1] for r in rows):
            return False
        if self.kind == "subagents" and not entry.root.children:
            return False
        if self.kind in ("conversation", "automation") and entry.root.kind != self.kind:
            return False
        return not self.person or entry.root.person == self.person


@dataclass(frozen=True, slots=True)
class TeamRuns:
    entries: list[Entry]
    now: datetime

    def rows(self) -> list[RunRow]:
        return [row for entry in self.entries for row in entry.rows()]

    @property
    def waiting_for_approval(self) -> int:
        return sum(1 for r in self.rows() if r.status == Status.WAITING_FOR_CONFIRMATION)


def _conversation_row(values: dict[str, Any]) -> RunRow:
    person = values["owner__username"] or ""
    return RunRow(
        key=f"c-{values['id']}", kind="conversation", status=values["status"],
        title=values["title"] or values["name"] or "Untitled conversation",
        agent=values["agent"], model=values["model"],
        started_by_kind="person" if person else "", started_by=person, person=person,
        started_at=values["created_at"], ended_at=values["updated_at"], steps=values["steps"],
        cost_usd=values["cost_usd"], conversation_id=values["id"],
        parent_id=values["parent_id"], worker_host=values["worker_host"],
    )  # fmt: skip


def _roots(team_id: int, count: int) -> list[dict[str, Any]]:
    """The team's recent top-level conversations (not archived) and every active one (two
    queries)."""
    top = Conversation.objects.filter(team_id=team_id, parent__isnull=True)
    # Archived ones are out of the team's lists unless they still run.
    recent = top.filter(archived_at__isnull=True).order_by("-created_at")
    recent = list(recent.values(*_FIELDS)[:count])
    seen = {r["id"] for r in recent}
    active = top.filter(status__in=ACTIVE_CONVERSATION)
    return recent + [r for r in active.values(*_FIELDS) if r["id"] not in seen]


def _attach_subagents(team_id: int, roots: list[RunRow]) -> None:
    """Read the roots' descendants level by level (one query per level) and hang them on
    their parents."""
    by_id = {row.conversation_id: row for row in roots}
    parent_ids = list(by_id)
    remaining = MAX_NODES
    for _ in range(MAX_DEPTH):
        if not parent_ids or remaining <= 0:
            return
        level = list(
            Conversation.objects.filter(team_id=team_id, parent__in=parent_ids)
            .order_by("created_at", "id")
            .values(*_FIELDS)[:remaining]
        )
        remaining -= len(level)
        parent_ids = []
        for values in level:
            parent = by_id[values["parent_id"]]
            row = _conversation_row(values)
            row.kind, row.depth, row.person = "subagent", parent.depth + 1, parent.person
            row.started_by_kind, row.started_by = "parent", parent.title
            row.parent_title = parent.title
            parent.children.append(row)
            by_id[row.conversation_id] = row
            parent_ids.append(row.conversation_id)


def _automation_runs(team_id: int, root_ids: Iterable[uuid.UUID]) -> list[AutomationRun]:
    """The runs that started these roots, and the recent runs that started no conversation."""
    runs = AutomationRun.objects.filter(automation__team_id=team_id).select_related(
        "automation", "started_by"
    )
    started = list(runs.filter(conversation_id__in=list(root_ids)).order_by("created_at"))
    # A run still "started" without a conversation lost it to a delete: nothing goes on.
    alone = runs.filter(conversation__isnull=True).exclude(
        status__in=[RunStatus.IGNORED, RunStatus.STARTED]
    )
    return started + list(alone.order_by("-created_at")[:CANDIDATES])


def _by_automation(row: RunRow, run: AutomationRun) -> None:
    row.kind, row.automation_id = "automation", run.automation_id
    row.started_by_kind, row.started_by = "automation", run.automation.name
    row.person = run.started_by.get_username() if run.started_by else ""
    row.error = run.error


def _run_row(run: AutomationRun) -> RunRow:
    row = RunRow(
        key=f"a-{run.pk}", kind="automation", status=run.status,
        title=f"{run.automation.name} #{run.pk}", agent=run.automation.agent,
        model=run.automation.model, started_by_kind="", started_by="",
        started_at=run.created_at, ended_at=run.finished_at, steps=0, cost_usd=run.cost_usd,
    )  # fmt: skip
    _by_automation(row, run)
    row.waiting_for = {
        RunStatus.ACCEPTED: "A worker to start it",
        RunStatus.QUEUED: "An earlier run of its automation to end",
    }.get(run.status, "")
    return row


def _waiting(rows: list[RunRow]) -> None:
    """What each row waits for: its approvals (two queries for all), its sub-agents, or a
    worker host that is not alive (one query)."""
    waiting = [r for r in rows if r.status == Status.WAITING_FOR_CONFIRMATION]
    pending = pending_actions_for(r.conversation_id for r in waiting) if waiting else {}
    for row in waiting:
        row.pending = [approval_card(p) for p in pending.get(row.conversation_id, [])]
        count = len(row.pending)
        row.waiting_kind = "approval"
        row.waiting_for = f"Approval of {count} action{'' if count == 1 else 's'}"
    for row in rows:
        if row.status == Status.WAITING_FOR_SUBAGENTS:
            going = sum(1 for c in row.children if c.active)
            row.waiting_kind = "children"
            row.waiting_for = f"Sub-agents: {going} of {len(row.children)} still going"
    if not settings.CANVAS_PIN_TO_HOST:
        return
    running = [r for r in rows if r.status == Status.RUNNING and r.worker_host]
    hosts = {r.worker_host for r in running}
    if not hosts:
        return
    alive = set(
        WorkerHost.objects.filter(
            host__in=hosts, stopped_at__isnull=True, last_seen__gte=alive_after()
        ).values_list("host", flat=True)
    )
    for row in running:
        if row.worker_host not in alive:
            row.waiting_kind = "worker"
            row.waiting_for = (
                "The worker built into the server"
                if settings.EMBEDDED
                else f"Worker host {row.worker_host}"
            )


def team_runs(
    team_id: int, filters: RunFilters | None = None, *, limit: int = LIMIT,
    now: datetime | None = None,
) -> TeamRuns:  # fmt: skip
    """The team's entries, newest first: every active one and the most recent others, up to
    `limit` in all, those `filters` keep."""
    filters = filters or RunFilters()
    # Unfiltered, no root past the newest `limit` can be shown: nor read (a filter needs
    # every candidate's tree to decide).
    filtered = bool(filters.status or filters.kind or filters.person)
    roots = [_conversation_row(v) for v in _roots(team_id, CANDIDATES if filtered else limit)]
    for row in roots:
        row.waiting_for = OTHERWISE_WAITING.get(row.status, "")
    _attach_subagents(team_id, roots)
    by_conversation = {row.conversation_id: row for row in roots}
    alone: list[RunRow] = []
    for run in _automation_runs(team_id, by_conversation):
        if run.conversation_id in by_conversation:
            _by_automation(by_conversation[run.conversation_id], run)
        else:
            alone.append(_run_row(run))
    entries = [Entry(r) for r in roots + alone]
    entries = [e for e in entries if filters.keeps(e)]
    entries.sort(key=lambda e: e.root.started_at, reverse=True)
    active = [e for e in entries if any(r.active for r in e.rows())]
    others = [e for e in entries if not any(r.active for r in e.rows())]
    kept = {id(e) for e in active + others[: max(limit - len(active), 0)]}
    entries = [e for e in entries if id(e) in kept]
    _waiting([row for e in entries for row in e.rows()])
    return TeamRuns(entries=entries, now=now or timezone.now())


def runs_signature(team_id: int) -> tuple[Any, ...]:
    """What changes whenever a row of `team_runs` may: every append moves its conversation's
    updated_at, and an automation run changes one of its times or its count. Two queries,
    each one aggregate: the socket asks this every second and reads the rows only when it
    changed."""
    conversations = Conversation.objects.filter(team_id=team_id).aggregate(
        at=Max("updated_at"), n=Count("id")
    )
    runs = AutomationRun.objects.filter(automation__team_id=team_id).aggregate(
        created=Max("created_at"), started=Max("started_at"), finished=Max("finished_at"),
        n=Count("id"),
    )  # fmt: skip
    return (conversations["at"], conversations["n"], *runs.values())
