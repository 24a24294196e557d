"""What each team has spent on models this calendar month (UTC), for monthly budgets."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

from django.db import connection

from .models import TeamSpend

SPEND_PRECISION = Decimal("0.000001")  # TeamSpend.cost_usd's decimal places


def current_month() -> date:
    return datetime.now(UTC).date().replace(day=1)


def spend_add(team_id: int, usd: float | Decimal) -> None:
    """Add `usd` to the team's spend for the current month.

    One INSERT ... ON CONFLICT DO UPDATE statement (Postgres and SQLite both speak it), so
    concurrent workers recording costs for the same team never lose an increment and never
    race to create the month's row. Joins the caller's transaction when there is one.
    """
    amount = Decimal(str(usd)).quantize(SPEND_PRECISION)
    if amount == 0:
        return
    quote = connection.ops.quote_name
    table = quote(TeamSpend._meta.db_table)
    cost = quote("cost_usd")
    sql = (
        f"INSERT INTO {table} ({quote('team_id')}, {quote('month')}, {cost}) "
        f"VALUES (%s, %s, %s) "
        f"ON CONFLICT ({quote('team_id')}, {quote('month')}) "
        f"DO UPDATE SET {cost} = {table}.{cost} + excluded.{cost}"
    )
    # SQLite stores decimals as REAL anyway; its driver has no Decimal adapter for arithmetic.
    value = amount if connection.vendor == "postgresql" else float(amount)
    with connection.cursor() as cursor:
        cursor.execute(sql, [team_id, current_month(), value])


def spend_this_month(team_id: int) -> Decimal:
    value = (
        TeamSpend.objects.filter(team_id=team_id, month=current_month())
        .values_list("cost_usd", flat=True)
        .first()
    )
    return Decimal(str(value)) if value is not None else Decimal(0)
