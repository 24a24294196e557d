"""The team's Usage page and its CSV (canvas.usage has the numbers, canvas.usage_chart the
charts' geometry). Every member sees it, like the team's other pages; the API gives the same
numbers at GET /api/teams/{id}/usage (canvas.api.usage)."""

from __future__ import annotations

import csv
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from teams.models import Team

from .settings_pages import SettingsPage, administers
from .usage import Group, TeamUsage, team_usage
from .usage_chart import bar_chart, count, money

TEMPLATE = "canvas/team_usage.html"
CSV_COLUMNS = ["breakdown", "key", "label", "day", "calls", "tokens_in", "tokens_out", "cost_usd"]
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _context(request: HttpRequest, team: Team) -> dict[str, Any]:
    usage = team_usage(team.pk)
    budget_day = usage.budget_day_usd
    cost_points = [(d.day, d.totals.cost_usd) for d in usage.days]
    token_points = [(d.day, float(d.totals.tokens)) for d in usage.days]
    return {
        "team": team,
        "can_administer": administers(request, team),
        "usage": usage,
        "cost_chart": bar_chart(
            cost_points,
            fmt=money,
            line=budget_day,
            line_label=f"Budget {money(budget_day)}/day" if budget_day is not None else "",
        ),  # fmt: skip
        "token_chart": bar_chart(token_points, fmt=count),
        "days_newest_first": list(reversed(usage.days)),
        "breakdowns": [
            ("Per model", "Model", usage.by_model),
            ("Per member", "Member", usage.by_member),
            ("Per automation", "Automation", usage.by_automation),
        ],
    }


PAGE = SettingsPage(TEMPLATE, "team-usage", _context, "Usage")

team_usage_page = PAGE.view()


def _cell(value: Any) -> Any:
    """A text cell a spreadsheet would read as a formula gets a leading quote (CSV injection:
    model, member and automation names are typed by people)."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def _group_rows(breakdown: str, groups: list[Group]) -> list[list[Any]]:
    return [
        [breakdown, g.key or "", g.label, "", g.totals.calls, g.totals.tokens_in,
         g.totals.tokens_out, f"{g.totals.cost_usd:.6f}"]
        for g in groups
    ]  # fmt: skip


def csv_rows(usage: TeamUsage) -> list[list[Any]]:
    """One row per day, then one per model, member and automation (`breakdown` says which)."""
    rows: list[list[Any]] = [
        ["day", "", "", f"{d.day:%Y-%m-%d}", d.totals.calls, d.totals.tokens_in,
         d.totals.tokens_out, f"{d.totals.cost_usd:.6f}"]
        for d in usage.days
    ]  # fmt: skip
    rows += _group_rows("model", usage.by_model)
    rows += _group_rows("member", usage.by_member)
    rows += _group_rows("automation", usage.by_automation)
    return rows


@login_required
@require_GET
def team_usage_csv(request: HttpRequest, team_id: int) -> HttpResponse:
    team = PAGE.team(request, team_id)
    usage = team_usage(team.pk)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    name = f"usage-team{team.pk}-{usage.start:%Y%m%d}-{usage.end:%Y%m%d}.csv"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    writer = csv.writer(response)
    writer.writerow(CSV_COLUMNS)
    writer.writerows([[_cell(v) for v in row] for row in csv_rows(usage)])
    return response
