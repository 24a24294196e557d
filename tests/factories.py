"""Small builders for test data that bypass services on purpose (fixtures, not behaviour)."""

from __future__ import annotations

from conversations.models import Conversation
from teams.models import Team
from teams.services import team_default_for


def make_conversation(owner=None, team: Team | None = None, **fields) -> Conversation:
    if team is None:
        team = (team_default_for(owner) if owner is not None else None) or (
            Team.objects.get_or_create(name="Test team")[0]
        )
    fields.setdefault("model", "scripted")
    fields.setdefault("workspace_path", "/tmp/canvas-test-workspace")
    return Conversation.objects.create(owner=owner, team=team, **fields)
