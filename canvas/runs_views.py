"""The team's Runs page (canvas.runs has the rows; canvas.runs_consumer keeps the page's table
current over its socket). Every member sees it; members who may act approve and reject from a
row, through the conversation's own approval endpoints (canvas.approval_views), which check
the role again. The API gives the same rows at GET /api/teams/{id}/runs (canvas.api.runs)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.http import HttpRequest, QueryDict

from teams.models import Team
from teams.permissions import Action, role_allows, team_role

from .runs import KIND_FILTERS, STATUS_FILTERS, RunFilters, TeamRuns, team_runs
from .settings_pages import SettingsPage, administers

TEMPLATE = "canvas/team_runs.html"


def filters_from(query: QueryDict) -> RunFilters:
    """The filters a query string names; unknown values are dropped rather than refused (a
    stale bookmark still shows the page)."""
    status, kind = query.get("status", ""), query.get("kind", "")
    return RunFilters(
        status=status if status in STATUS_FILTERS else "",
        kind=kind if kind in KIND_FILTERS else "",
        person=query.get("person", "")[:150],
    )


def rows_context(team: Team, runs: TeamRuns, *, can_act: bool) -> dict[str, Any]:
    """What the table's partials need (the page and the socket render the same ones)."""
    return {"team": team, "runs": runs, "rows": runs.rows(), "now": runs.now, "can_act": can_act}


def _context(request: HttpRequest, team: Team) -> dict[str, Any]:
    filters = filters_from(request.GET)
    members = (
        get_user_model()
        .objects.filter(memberships__team=team)
        .order_by("username")
        .values_list("username", flat=True)
    )
    can_act = role_allows(team_role(request.user, team.pk), Action.ACT)
    query = request.GET.urlencode() if any((filters.status, filters.kind, filters.person)) else ""
    return {
        **rows_context(team, team_runs(team.pk, filters), can_act=can_act),
        "can_administer": administers(request, team),
        "filters": filters,
        "status_filters": [(k, label) for k, (label, _) in STATUS_FILTERS.items()],
        "kind_filters": list(KIND_FILTERS.items()),
        "members": list(members),
        "socket_query": query,
    }


PAGE = SettingsPage(TEMPLATE, "team-runs", _context, "Runs")

team_runs_page = PAGE.view()
