"""The audit page's Target column as links: a record names its target by text (a conversation
id, a username, a secret, profile or hook name); where that thing still exists in the team,
the cell links to the page that shows it. A deleted one stays plain text, as recorded.

One query per kind of target on the page, whatever its length.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.urls import reverse
from django.utils.text import slugify

from automations.models import Automation
from conversations.models import Conversation
from teams.models import (
    AcpAgentProfile,
    AuditRecord,
    Hook,
    Membership,
    ModelProfile,
    Secret,
    Team,
    TeamAgent,
)


@dataclass(frozen=True)
class AuditTarget:
    text: str
    url: str = ""
    """Empty when the target no longer exists (or is not a page of its own)."""
    hint: str = ""
    """What the link text leaves out (a conversation's id when its title is shown)."""


def _conversations(team: Team, targets: set[str]) -> dict[str, AuditTarget]:
    ids = set()
    for target in targets:
        try:
            ids.add(uuid.UUID(target))
        except ValueError:
            continue
    rows = Conversation.objects.filter(team=team, pk__in=ids).values_list("pk", "title")
    return {
        str(pk): AuditTarget(
            text=title or str(pk), url=reverse("conversation-detail", args=[pk]), hint=str(pk)
        )
        for pk, title in rows
    }


def _members(team: Team, targets: set[str]) -> dict[str, AuditTarget]:
    page = reverse("team-detail", args=[team.pk])
    names = Membership.objects.filter(team=team, user__username__in=targets).values_list(
        "user__username", flat=True
    )
    return {name: AuditTarget(text=name, url=f"{page}#member-{slugify(name)}") for name in names}


def _named(model, url_name: str, anchor: str = "") -> Callable:
    """Targets named by a per-team unique `name` on a settings page (`anchor` formats a row
    id from the name, when the page gives its rows one)."""

    def find(team: Team, targets: set[str]) -> dict[str, AuditTarget]:
        page = reverse(url_name, args=[team.pk])
        names = model.objects.filter(team=team, name__in=targets).values_list("name", flat=True)
        return {
            name: AuditTarget(text=name, url=page + (anchor.format(name) if anchor else ""))
            for name in names
        }

    return find


FINDERS: dict[str, Callable[[Team, set[str]], dict[str, AuditTarget]]] = {
    "conversation": _conversations,
    "action": _conversations,  # an approval decision names its conversation
    "member": _members,
    "secret": _named(Secret, "team-secrets", "#secret-{}"),
    "profile": _named(ModelProfile, "team-profiles"),
    "hook": _named(Hook, "team-hooks"),
    "agent": _named(TeamAgent, "team-agents"),
    "acp_agent": _named(AcpAgentProfile, "team-acp-agents", "#acp-agent-{}"),
    "automation": _named(Automation, "team-automations"),
}
"""By the part of a record's kind before the dot."""


def audit_targets(team: Team, records: Iterable[AuditRecord]) -> dict[int, AuditTarget]:
    """Each record's target by record id, linked where it still exists in `team`."""
    records = list(records)
    wanted: dict[str, set[str]] = {}
    for record in records:
        family = record.kind.partition(".")[0]
        if family in FINDERS and record.target:
            wanted.setdefault(family, set()).add(record.target)
    found = {family: FINDERS[family](team, targets) for family, targets in wanted.items()}
    policy = reverse("team-policy", args=[team.pk])
    targets = {}
    for record in records:
        family = record.kind.partition(".")[0]
        if family == "policy":
            targets[record.pk] = AuditTarget(text=record.target, url=policy)
        else:
            plain = AuditTarget(text=record.target)
            targets[record.pk] = found.get(family, {}).get(record.target, plain)
    return targets
