"""Template filters of the conversation sidebar: short words for a row's status and age."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils import timezone

from conversations.events import Status

register = template.Library()

SHORT_STATUS = {
    Status.IDLE: "Idle",
    Status.RUNNING: "Running",
    Status.PAUSED: "Paused",
    Status.WAITING_FOR_CONFIRMATION: "Needs approval",
    Status.WAITING_FOR_SUBAGENTS: "Waiting for sub-agents",
    Status.FINISHED: "Finished",
    Status.STUCK: "Stuck",
    Status.ERROR: "Error",
}
"""What a narrow row has room for; the page's badge keeps the long label."""


@register.filter
def short_status(status: str) -> str:
    try:
        return SHORT_STATUS[Status(status)]
    except ValueError:
        return str(status).replace("_", " ").capitalize()


def ago_text(then: datetime, now: datetime) -> str:
    """ "just now", "5 min ago", "3 h ago", "2 d ago"; a date past four weeks ("3 Nov 2026")."""
    seconds = max(0, int((now - then).total_seconds()))
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{seconds // 60} min ago"
    if seconds < 86400:
        return f"{seconds // 3600} h ago"
    if seconds < 28 * 86400:
        return f"{seconds // 86400} d ago"
    return f"{then.day} {then:%b %Y}"


@register.filter
def ago(then: datetime | None) -> str:
    return ago_text(then, timezone.now()) if then else ""
