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


def test_a_parent_waiting_for_its_sub_agents_can_be_paused_and_interrupted(
    browser, user, dispatched
):
    from orchestration.chain.slices import run_slice

    child = script({"tool": "finish", "args": {"message": "later"}})
    parent = services.conversation_create(
        owner=user, model="scripted",
        prompt=script({"tool": "task", "args": {"prompt": child}}, {"say": "done"}),
    )  # fmt: skip
    mine = [d for d in dispatched if d[0] == str(parent.pk)]
    dispatched.remove(mine[0])
    assert run_slice(*mine[0]) is None
    assert Conversation.objects.get(pk=parent.pk).status == "waiting_for_subagents"
    page = browser.get(reverse("conversation-detail", args=[parent.pk])).content.decode()
    controls = page[page.index('id="controls"') :]
    controls = controls[: controls.index("</div>")]
    assert "Interrupt" in controls
    assert 'title="Stop after the step in flight"\n            >Pause' in controls or (
        "disabled" not in controls[: controls.index(">Pause<")]
    )
    answer = browser.post(reverse("conversation-pause", args=[parent.pk]), HTTP_HX_REQUEST="true")
    assert answer.status_code == 200
    assert {c.status for c in Conversation.objects.filter(parent=parent)} == {"paused"}
