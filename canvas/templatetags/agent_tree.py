"""Template filters of the agent tree: a node's status in words."""

from __future__ import annotations

from django import template

from canvas.event_rows import status_label as _status_label

register = template.Library()


@register.filter
def status_label(status: str) -> str:
    """A status value in sentence case ("Waiting for subagents"), as the header shows it."""
    return _status_label(status)
