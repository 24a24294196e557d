"""Writing and reading the audit log. Callers pass what happened, never secret values."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from .models import AuditRecord, Team


def audit_record(
    *, actor, kind: str, team: Team | int | None = None, target: str = "",
    data: dict[str, Any] | None = None,
) -> AuditRecord:  # fmt: skip
    """Record one action. Call inside the transaction that made the change, so the record
    exists exactly when the change does."""
    user = actor if getattr(actor, "is_authenticated", False) else None
    return AuditRecord.objects.create(
        team_id=team.pk if isinstance(team, Team) else team,
        actor=user,
        actor_name=user.get_username() if user is not None else (actor or "system"),
        kind=kind,
        target=target[:255],
        data=data or {},
    )


def audit_records(
    team: Team, *, actor: str | None = None, kind: str | None = None, kind_prefix: bool = False
) -> QuerySet[AuditRecord]:
    """A team's records, newest first; `kind_prefix` matches "secret." to every secret kind.
    The caller has checked that its user may administer the team."""
    rows = AuditRecord.objects.filter(team=team)
    if actor:
        rows = rows.filter(actor_name=actor)
    if kind:
        rows = rows.filter(kind__startswith=kind) if kind_prefix else rows.filter(kind=kind)
    return rows
