"""A team's model usage: cost and tokens per UTC day, per model, per member and per
automation, with its monthly budget (canvas.usage; the Usage page shows the same numbers)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from django.http import HttpRequest
from ninja import Query, Router, Schema
from pydantic import Field

from canvas.usage import DEFAULT_DAYS, MAX_DAYS, Group, Totals, team_usage
from teams.permissions import Action
from teams.services import team_get_for

from . import ERRORS

router = Router(tags=["usage"])


class UsageQuery(Schema):
    days: int = Field(
        default=DEFAULT_DAYS, ge=1, le=MAX_DAYS, description="UTC days, today included."
    )


class TotalsOut(Schema):
    calls: int = Field(description="Model calls (events carrying a usage).")
    tokens_in: int
    tokens_out: int
    cost_usd: float


class DayOut(TotalsOut):
    day: date


class GroupOut(TotalsOut):
    key: str | None = Field(
        description="The model profile's name, the member's user id or the automation's id; "
        "null: none (a conversation nobody owns, one a person started)."
    )
    label: str


class UsageOut(Schema):
    start: date
    end: date = Field(description="Inclusive; days are UTC.")
    days: list[DayOut]
    by_model: list[GroupOut]
    by_member: list[GroupOut]
    by_automation: list[GroupOut]
    total: TotalsOut
    budget_month_usd: Decimal | None = Field(description="The policy's max_cost_per_month_usd.")
    budget_day_usd: float | None = Field(description="The monthly budget / this month's days.")
    spent_month_usd: Decimal = Field(description="Spent this calendar month (UTC).")


def _totals(t: Totals) -> dict:
    return {"calls": t.calls, "tokens_in": t.tokens_in, "tokens_out": t.tokens_out,
            "cost_usd": round(t.cost_usd, 6)}  # fmt: skip


def _group(g: Group) -> dict:
    return {"key": g.key, "label": g.label, **_totals(g.totals)}


@router.get("/{team_id}/usage", response={200: UsageOut, **ERRORS})
def usage_get(request: HttpRequest, team_id: int, query: Query[UsageQuery]):
    team = team_get_for(request.user, team_id, Action.VIEW)
    usage = team_usage(team.pk, days=query.days)
    return {
        "start": usage.start,
        "end": usage.end,
        "days": [{"day": d.day, **_totals(d.totals)} for d in usage.days],
        "by_model": [_group(g) for g in usage.by_model],
        "by_member": [_group(g) for g in usage.by_member],
        "by_automation": [_group(g) for g in usage.by_automation],
        "total": _totals(usage.total),
        "budget_month_usd": usage.budget_month_usd,
        "budget_day_usd": usage.budget_day_usd,
        "spent_month_usd": usage.spent_month_usd,
    }
