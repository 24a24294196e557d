"""Read queries: a team's automations and an automation's runs."""

from __future__ import annotations

from django.db.models import QuerySet

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
    rows = AutomationRun.objects.filter(automation=automation).select_related("conversation")
    if status:
        rows = rows.filter(status=status)
    return list(rows.order_by("-created_at", "-id")[: max(1, min(limit, MAX_RUNS_PAGE))])
