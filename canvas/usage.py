"""A team's model usage over the last N days (UTC): cost and tokens per day, per model, per
member and per automation, with the team's monthly budget, for the Usage page, its CSV and
GET /api/teams/{id}/usage.

The numbers come from the event log: every event that carries a `usage` (an LLM call's cost,
as LiteLLM reported it) counts on the UTC day it was written. `subagents.settled` is left out:
its usage is the sum of its children's, which are conversations of the team and count
themselves. A sub-agent's spend counts for the automation that started its root.

It lives in canvas, not teams: it reads conversations, automations and teams, and only the
top layer may import all three (docs/architecture.md).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import BigIntegerField, Count, FloatField, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, TruncDate

from automations.models import Automation, AutomationRun
from conversations.models import Conversation, ConversationEvent
from teams.budget import spend_this_month
from teams.policies import policy_for_team

DEFAULT_DAYS = 30
MAX_DAYS = 366
ROLLUP_TYPES = ("subagents.settled",)  # usage summed from children that count themselves
MAX_PARENT_HOPS = 10  # sub-agents nest a few deep (the site caps depth); a cycle cannot loop


@dataclass(slots=True)
class Totals:
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    calls: int = 0

    def add(self, tokens_in: int, tokens_out: int, cost: float, calls: int) -> None:
        self.tokens_in += tokens_in
        self.tokens_out += tokens_out
        self.cost_usd += cost
        self.calls += calls

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out


@dataclass(frozen=True, slots=True)
class Day:
    day: date
    totals: Totals


@dataclass(frozen=True, slots=True)
class Group:
    """One model, member or automation's share of the window; `key` is None for the rows
    without one (a conversation nobody owns, one no automation started)."""

    key: str | None
    label: str
    totals: Totals


@dataclass(frozen=True, slots=True)
class TeamUsage:
    start: date
    end: date
    """Inclusive, both UTC days."""
    days: list[Day]
    by_model: list[Group]
    by_member: list[Group]
    by_automation: list[Group]
    total: Totals
    budget_month_usd: Decimal | None
    """The team's monthly budget (its policy's max_cost_per_month_usd), None without one."""
    spent_month_usd: Decimal
    """What the team has spent this calendar month (UTC), as the budget counts it."""

    @property
    def budget_day_usd(self) -> float | None:
        """The monthly budget spread evenly over this month's days: the chart's budget line."""
        if self.budget_month_usd is None:
            return None
        today = self.end
        next_month = (today.replace(day=28) + timedelta(days=4)).replace(day=1)
        days_in_month = (next_month - today.replace(day=1)).days
        return float(self.budget_month_usd) / days_in_month


def today_utc() -> date:
    return datetime.now(UTC).date()


def _rows(team_id: int, since: datetime) -> list[dict[str, Any]]:
    """One grouped query: usage per UTC day and conversation. Conversations not written to since
    `since` (updated_at moves with every append) are pruned before their events are read;
    their events are then reached through the (conversation, seq) index."""
    usage = "payload__usage__"
    return list(
        ConversationEvent.objects.filter(
            conversation__team_id=team_id,
            conversation__updated_at__gte=since,
            created_at__gte=since,
            payload__usage__cost_usd__isnull=False,
        )
        .exclude(type__in=ROLLUP_TYPES)
        .annotate(day=TruncDate("created_at", tzinfo=UTC))
        .values("day", "conversation_id")
        .annotate(
            tokens_in=Sum(Cast(KT(usage + "prompt_tokens"), BigIntegerField())),
            tokens_out=Sum(Cast(KT(usage + "completion_tokens"), BigIntegerField())),
            cost=Sum(Cast(KT(usage + "cost_usd"), FloatField())),
            calls=Count("id"),
        )
    )


def _conversations(ids: Iterable[Any]) -> dict[Any, dict[str, Any]]:
    """model, owner and parent of each conversation, its ancestors' too (for automations)."""
    found: dict[Any, dict[str, Any]] = {}
    wanted = set(ids)
    for _ in range(MAX_PARENT_HOPS):
        if not wanted:
            break
        rows = Conversation.objects.filter(pk__in=wanted).values(
            "id", "model", "owner_id", "parent_id"
        )
        found.update({row["id"]: row for row in rows})
        wanted = {r["parent_id"] for r in found.values() if r["parent_id"]} - found.keys()
    return found


def _root(conversation_id: Any, rows: dict[Any, dict[str, Any]]) -> Any:
    current = conversation_id
    for _ in range(MAX_PARENT_HOPS):
        parent = rows.get(current, {}).get("parent_id")
        if parent is None or parent not in rows:
            return current
        current = parent
    return current


def _groups(totals: dict[Any, Totals], labels: dict[Any, str], none_label: str) -> list[Group]:
    groups = [
        Group(
            key=None if key is None else str(key),
            label=none_label if key is None else labels.get(key, str(key)),
            totals=t,
        )
        for key, t in totals.items()
    ]
    return sorted(groups, key=lambda g: (-g.totals.cost_usd, -g.totals.tokens, g.label))


def team_usage(team_id: int, *, days: int = DEFAULT_DAYS, today: date | None = None) -> TeamUsage:
    """The team's usage for the `days` UTC days ending today (today included)."""
    if not 1 <= days <= MAX_DAYS:
        raise ValueError(f"days must be between 1 and {MAX_DAYS}, not {days}")
    end = today or today_utc()
    start = end - timedelta(days=days - 1)
    since = datetime(start.year, start.month, start.day, tzinfo=UTC)
    rows = _rows(team_id, since)

    conversations = _conversations({row["conversation_id"] for row in rows})
    roots = {cid: _root(cid, conversations) for cid in {r["conversation_id"] for r in rows}}
    automation_of = dict(
        AutomationRun.objects.filter(conversation_id__in=set(roots.values())).values_list(
            "conversation_id", "automation_id"
        )
    )

    per_day: dict[date, Totals] = {start + timedelta(days=i): Totals() for i in range(days)}
    per_model: dict[Any, Totals] = defaultdict(Totals)
    per_member: dict[Any, Totals] = defaultdict(Totals)
    per_automation: dict[Any, Totals] = defaultdict(Totals)
    total = Totals()
    for row in rows:
        counts = (row["tokens_in"] or 0, row["tokens_out"] or 0, row["cost"] or 0.0, row["calls"])
        meta = conversations.get(row["conversation_id"], {})
        if row["day"] in per_day:
            per_day[row["day"]].add(*counts)
        per_model[meta.get("model") or None].add(*counts)
        per_member[meta.get("owner_id")].add(*counts)
        per_automation[automation_of.get(roots[row["conversation_id"]])].add(*counts)
        total.add(*counts)

    members = dict(
        get_user_model()
        .objects.filter(pk__in=[k for k in per_member if k is not None])
        .values_list("pk", "username")
    )
    automations = dict(
        Automation.objects.filter(pk__in=[k for k in per_automation if k is not None]).values_list(
            "pk", "name"
        )
    )
    policy = policy_for_team(team_id)
    return TeamUsage(
        start=start,
        end=end,
        days=[Day(day, t) for day, t in sorted(per_day.items())],
        by_model=_groups(per_model, {}, "(no model)"),
        by_member=_groups(per_member, members, "(no owner)"),
        by_automation=_groups(per_automation, automations, "(started by a person)"),
        total=total,
        budget_month_usd=policy.max_cost_per_month_usd,
        spent_month_usd=spend_this_month(team_id),
    )
