"""Template filters of the Runs page: a run's duration as GitHub Actions writes it."""

from __future__ import annotations

from datetime import datetime, timedelta

from django import template

register = template.Library()


def duration_text(elapsed: timedelta) -> str:
    """ "45s", "3m 7s", "2h 5m", "3d 4h": two units at most, the larger first."""
    seconds = int(elapsed.total_seconds())
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {seconds}s"
    return f"{seconds}s"


@register.filter
def run_duration(row, now: datetime) -> str:
    """A canvas.runs.RunRow's time so far (active) or in all (ended), at `now`."""
    return duration_text(row.duration(now))
