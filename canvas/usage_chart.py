"""A bar chart per day as plain numbers for an SVG template (canvas/usage_chart.html): bar
rectangles, labelled axes and an optional horizontal line (the budget). Drawn on the server, so
the page needs no script and no CDN, and its CSP stays strict."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date

WIDTH = 720
HEIGHT = 240
LEFT = 64  # room for the y labels
RIGHT = 12
TOP = 12
BOTTOM = 28  # room for the x labels
TICKS = 4
X_LABEL_EVERY = 5


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    day: date
    label: str
    """What a reader's tooltip says ("2026-12-03: $0.0123")."""


@dataclass(frozen=True, slots=True)
class Tick:
    position: float
    label: str


@dataclass(frozen=True, slots=True)
class Chart:
    width: int
    height: int
    left: int
    right: float
    top: int
    bottom: float
    """The plot area's edges: x from left to right, y from top down to bottom (the axis)."""
    bars: list[Bar]
    y_ticks: list[Tick]
    x_ticks: list[Tick]
    line_y: float | None
    line_label: str


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2, 2.5 or 5 times a power of ten at least `value` (an axis' top)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * power * (1 + 1e-9):
            return step * power
    return 10 * power


def bar_chart(
    points: Sequence[tuple[date, float]],
    *,
    fmt: Callable[[float], str],
    line: float | None = None,
    line_label: str = "",
) -> Chart:
    """Bars for `points` (one per day, in order), the y axis from 0 to a round top that holds
    the largest bar and the line, labelled with `fmt`."""
    top_value = nice_ceiling(max([v for _, v in points] + [line or 0.0, 0.0]))
    plot_width = WIDTH - LEFT - RIGHT
    plot_height = HEIGHT - TOP - BOTTOM
    axis_y = TOP + plot_height
    slot = plot_width / max(len(points), 1)
    bar_width = max(slot * 0.7, 1.0)

    def y_of(value: float) -> float:
        return round(axis_y - plot_height * value / top_value, 2)

    bars = []
    for i, (day, value) in enumerate(points):
        y = y_of(value)
        x = round(LEFT + i * slot + (slot - bar_width) / 2, 2)
        bars.append(
            Bar(
                x,
                y,
                round(bar_width, 2),
                round(axis_y - y, 2),
                day,
                f"{day:%Y-%m-%d}: {fmt(value)}",
            )
        )
    y_ticks = [
        Tick(y_of(top_value * i / TICKS), fmt(top_value * i / TICKS)) for i in range(TICKS + 1)
    ]
    # The last day is labelled too: it is today's bar, the one a reader looks for first.
    marked = {i for i in range(0, len(points), X_LABEL_EVERY)} | {len(points) - 1}
    x_ticks = [
        Tick(round(LEFT + i * slot + slot / 2, 2), f"{points[i][0]:%b %d}")
        for i in sorted(marked)
        if i >= 0 and (i == len(points) - 1 or len(points) - 1 - i >= 2)
    ]
    return Chart(
        width=WIDTH, height=HEIGHT, left=LEFT, right=WIDTH - RIGHT, top=TOP, bottom=axis_y,
        bars=bars, y_ticks=y_ticks, x_ticks=x_ticks,
        line_y=y_of(line) if line is not None else None, line_label=line_label,
    )  # fmt: skip


def money(value: float) -> str:
    if value == 0:
        return "$0"
    return f"${value:,.2f}" if value >= 1 else f"${value:.4f}".rstrip("0")


def count(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1_000:
        return f"{value / 1_000:g}k"
    return f"{value:g}"
