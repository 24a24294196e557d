"""A workspace that cannot run anything here (no sandbox, no Docker engine, a missing image)
ends the run with an error event that says so in its own words, not as an internal error."""

from __future__ import annotations

import pytest

from conversations import store
from conversations.events import AgentErrorEvent
from conversations.models import Conversation
from orchestration import services
from tests.runs import drive, script
from workspaces.base import WorkspaceUnavailable
from workspaces.factory import PlainWorkspace

pytestmark = pytest.mark.django_db(transaction=True)

REASON = "no Docker engine answers at unix:///nowhere.sock; start one or ask your admin."


def test_an_unavailable_workspace_ends_the_run_with_its_reason(user, dispatched, monkeypatch):
    def unavailable(self) -> int:
        raise WorkspaceUnavailable(REASON)

    monkeypatch.setattr(PlainWorkspace, "stop_leftovers", unavailable)
    conversation = services.conversation_create(
        owner=user, model="scripted", prompt=script({"tool": "finish", "args": {"message": "x"}})
    )
    drive(dispatched)
    assert Conversation.objects.get(pk=conversation.pk).status == "error"
    errors = [e.event for e in store.load(conversation.pk) if isinstance(e.event, AgentErrorEvent)]
    assert [(e.code, e.message) for e in errors] == [("workspace_unavailable", REASON)]
