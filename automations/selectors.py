"""Read queries: a team's automations and an automation's runs."""

from __future__ import annotations

from django.db.models import OuterRef, QuerySet, Subquery

from common.errors import NotFound
from teams.models import Team

from .models import Automation, AutomationRun

MAX_RUNS_PAGE = 200


def automation_list(*, team: Team) -> QuerySet[Automation]:
    return Automation.objects.filter(team=team).select_related("created_by").order_by("name")


def automation_get(*, team: Team, automation_id: int) -> Automation:
    """NotFound for an automation of another team, as for one that does not exist."""
    automation = automation_list(team=team).filter(pk=automation_id).first()
    if automation is None:
        raise NotFound("no such automation.")
    return automation


def run_list(
    *, automation: Automation, status: str | None = None, limit: int = 50
) -> list[AutomationRun]:
    """Newest first, with each run's conversation (for its status) in the same query."""
    rows = AutomationRun.objects.filter(automation=automation).select_related(
        "conversation", "started_by"
    )
    if status:
        rows = rows.filter(status=status)
    return list(rows.order_by("-created_at", "-id")[: max(1, min(limit, MAX_RUNS_PAGE))])


def run_get(*, automation: Automation, run_id: int) -> AutomationRun:
    """NotFound for a run of another automation, as for one that does not exist."""
    run = AutomationRun.objects.filter(automation=automation, pk=run_id).first()
    if run is None:
        raise NotFound("no such run.")
    return run


def last_runs(*, automations: list[Automation]) -> dict[int, AutomationRun]:
    """Each automation's newest run, by automation id (none: no key); one query, on
    Postgres and SQLite alike (no DISTINCT ON)."""
    newest = (
        AutomationRun.objects.filter(automation=OuterRef("automation"))
        .order_by("-created_at", "-id")
        .values("pk")[:1]
    )
    rows = AutomationRun.objects.filter(automation__in=automations, pk=Subquery(newest))
    return {run.automation_id: run for run in rows}
