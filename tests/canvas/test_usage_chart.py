"""The Usage page's bar charts as numbers (canvas.usage_chart): a round axis top holding the
tallest bar and the budget line, bars standing on the axis in day order, today labelled, and
the budget line spread over the month's days (canvas.usage.TeamUsage.budget_day_usd)."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

import pytest

from canvas.usage import TeamUsage, Totals
from canvas.usage_chart import bar_chart, count, money, nice_ceiling

DAYS = [date(2026, 2, 1) + timedelta(days=i) for i in range(30)]


@pytest.mark.parametrize(
    ("value", "top"),
    [(0, 1.0), (0.0123, 0.02), (0.3, 0.5), (1, 1), (2.2, 2.5), (7, 10), (4126, 5000)],
)
def test_the_axis_top_is_a_round_number_at_least_the_value(value, top):
    assert nice_ceiling(value) == pytest.approx(top)


def test_bars_stand_on_the_axis_in_day_order_under_the_budget_line():
    points = [(day, 0.0) for day in DAYS[:-1]] + [(DAYS[-1], 0.75)]
    chart = bar_chart(points, fmt=money, line=1.5, line_label="Budget")
    assert [b.day for b in chart.bars] == DAYS
    assert all(round(b.y + b.height, 2) == chart.bottom for b in chart.bars)
    assert [b.height for b in chart.bars[:-1]] == [0] * 29
    tallest = chart.bars[-1]
    assert tallest.label == "2026-03-02: $0.75" and chart.top <= tallest.y < chart.bottom
    # The axis goes to 2 (holding the line at 1.5): the bar is half as tall as the line is high.
    assert chart.y_ticks[-1].label == "$2.00" and chart.y_ticks[0].label == "$0"
    assert chart.line_y == pytest.approx(tallest.y - tallest.height)
    assert chart.x_ticks[0].label == "Feb 01" and chart.x_ticks[-1].label == "Mar 02"
    assert all(chart.left <= b.x and b.x + b.width <= chart.right for b in chart.bars)


def test_without_a_line_there_is_none():
    chart = bar_chart([(DAYS[0], 1200.0)], fmt=count)
    assert chart.line_y is None and chart.y_ticks[-1].label == "2k"


def test_the_budget_line_is_the_monthly_budget_over_the_months_days():
    def usage(end: date, budget: str | None) -> TeamUsage:
        return TeamUsage(
            start=end, end=end, days=[], by_model=[], by_member=[], by_automation=[],
            total=Totals(), budget_month_usd=Decimal(budget) if budget else None,
            spent_month_usd=Decimal(0),
        )  # fmt: skip

    assert usage(date(2026, 2, 14), "56").budget_day_usd == pytest.approx(2.0)
    assert usage(date(2026, 12, 31), "62").budget_day_usd == pytest.approx(2.0)
    assert usage(date(2026, 12, 31), None).budget_day_usd is None
