"""The team's redactor for what leaves a worker through a door other than the event log's:
the JSON a hook reads on stdin, a notification webhook's text. The log redacts at its own
door (conversations.store); these texts never pass through it, or pass before it (a tool's
output reaches PostToolUse hooks before it is appended)."""

from __future__ import annotations

from typing import TypeVar

from conversations.redaction import Redactor, redactor_for_team
from teams.models import Team

T = TypeVar("T")


def team_redactor(team_id: int) -> Redactor | None:
    """The team's current redactor (one indexed read for its secrets_version; None when the
    team never had a secret)."""
    version = Team.objects.filter(pk=team_id).values_list("secrets_version", flat=True).first()
    return redactor_for_team(team_id, version or 0)


def redact_for_team(team_id: int, value: T) -> T:
    """`value` (a string, or JSON-like data) with the team's secrets redacted."""
    redactor = team_redactor(team_id)
    return redactor.redact_value(value) if redactor is not None else value
