"""Concurrent-run limits: a team over its limit queues new runs instead of dropping them.

A run is admitted when its first slice claims the lease. From then on it holds its place
until it stops running, including between slices (when it holds no lease): a run with steps
(`run_steps > 0` on the row) or a live lease counts. Admitted runs are never pre-empted, even
if the limit is lowered mid-run; a lower limit only holds back runs not yet admitted.

Callers count and claim while holding the team row lock (`lock_team`), so two slices racing
for the last place cannot both get it.
"""

from __future__ import annotations

from django.db.models import Q
from django.utils import timezone

from conversations import store
from conversations.events import AgentErrorEvent, RunStartedEvent, Status
from conversations.models import Conversation
from teams.models import Team

from ..step.history import history_refresh

QUEUED = "queued"
QUEUE_RETRY_SECONDS = 2.0
"""How often a queued slice asks again. Short, since a place frees as soon as a run stops;
each retry costs two small queries."""


def lock_team(team_id: int) -> str:
    """Lock the team row until the transaction ends; returns the team's name.

    FOR NO KEY UPDATE: serialises admissions without blocking inserts that reference the team
    (new conversations, spend rows), which only take KEY SHARE locks."""
    return (
        Team.objects.select_for_update(no_key=True)
        .filter(pk=team_id)
        .values_list("name", flat=True)
        .get()
    )


def admitted_runs(team_id: int, *, excluding: str) -> int:
    """The team's runs holding a place, other than `excluding`'s."""
    holding = Q(lease_token__isnull=False, lease_expires_at__gte=timezone.now()) | Q(
        run_steps__gt=0
    )
    return (
        Conversation.objects.filter(holding, team_id=team_id, status=Status.RUNNING)
        .exclude(pk=excluding)
        .count()
    )


def _already_noted(conversation_id: str) -> bool:
    for event in reversed(history_refresh(conversation_id).events):
        if isinstance(event, RunStartedEvent):
            return False
        if isinstance(event, AgentErrorEvent) and event.code == QUEUED:
            return True
    return False


def note_queued(conversation_id: str, team_name: str, limit: int) -> None:
    """Tell the conversation once per run that it waits for a place. Call holding the team
    lock, which also keeps two deliveries of the slice from both writing it."""
    if _already_noted(conversation_id):
        return
    store.append(
        conversation_id,
        [
            AgentErrorEvent(
                code=QUEUED,
                message=f"waiting: team {team_name!r} is at its limit of {limit} concurrent "
                f"run{'s' if limit != 1 else ''}. This run starts when another one stops; a "
                "team admin can raise the limit in the team policy.",
            )
        ],
    )
