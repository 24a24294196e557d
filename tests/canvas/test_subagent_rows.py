"""The conversation page shows a parent's spawn and settle events as rows linking to each
child, with how each ended."""

from __future__ import annotations

import pytest
from django.urls import reverse

from conversations.models import Conversation
from orchestration import services
from tests.runs import drive, script

pytestmark = pytest.mark.django_db(transaction=True)


def test_spawned_and_settled_rows_link_to_the_children(browser, user, dispatched):
    child = script({"tool": "finish", "args": {"message": "child says hi"}})
    parent = services.conversation_create(
        owner=user, model="scripted",
        prompt=script({"tool": "delegate", "args": {"tasks": [
            {"name": "alpha", "prompt": child}, {"name": "beta", "prompt": child}]}},
            {"tool": "finish", "args": {"message": "done"}}),
    )  # fmt: skip
    drive(dispatched)
    page = browser.get(reverse("conversation-detail", args=[parent.pk])).content.decode()
    assert "Sub-agents started" in page and "Sub-agents ended" in page
    for kid in Conversation.objects.filter(parent=parent):
        assert page.count(reverse("conversation-detail", args=[kid.pk])) >= 2
    assert 'class="badge status-finished">finished<' in page


def test_the_cli_lines_name_each_child_and_how_it_ended():
    from canvas.formatting import event_line
    from conversations.events import (
        ChildResult,
        ChildSpawn,
        SubagentsSettledEvent,
        SubagentsSpawnedEvent,
    )

    kid = "0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e"
    spawned = SubagentsSpawnedEvent(
        tool_call_id="c", tool="delegate",
        children=[ChildSpawn(conversation_id=kid, name="a", subagent_type="general")],
    )  # fmt: skip
    settled = SubagentsSettledEvent(
        tool_call_id="c", results=[ChildResult(conversation_id=kid, name="a", status="error")]
    )
    assert event_line(7, spawned) == "#7 subagents.spawned delegate: a (0b1c2d3e)"
    assert event_line(9, settled) == "#9 subagents.settled a error"
