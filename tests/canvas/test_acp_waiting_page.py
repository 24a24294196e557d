"""The page while an external agent waits for permission: Interrupt is offered (its turn goes
on while it waits, and Interrupt cancels it; Pause stays disabled), never for our own agent's
held calls; and a decided call stops saying "held for approval", live (the decision's frame
swaps its tag) and after a reload."""

from __future__ import annotations

import pytest
from django.template.loader import render_to_string
from django.urls import reverse

from canvas.event_rows import event_row
from conversations import store
from conversations.events import (
    ActionDecisionEvent,
    ActionEvent,
    PermissionChoice,
    Status,
    StatusChangeEvent,
)
from conversations.models import Conversation
from orchestration import services
from orchestration.control import approvals
from orchestration.step.loop import rejected_observation
from tests.acp_bridge.turns import start, use_fixture

pytestmark = pytest.mark.django_db

PAGE = "canvas/conversation_detail.html"


def _waiting(conversation) -> ActionEvent:
    held = ActionEvent(
        tool_call_id="call-1", tool="execute", arguments="{}", title="Run ls", kind="execute",
        requires_confirmation=True,
        options=[PermissionChoice(option_id="no", name="Reject", kind="reject_once")],
    )  # fmt: skip
    store.append(
        conversation.pk,
        [held, StatusChangeEvent(status=Status.WAITING_FOR_CONFIRMATION, previous=Status.RUNNING)],
    )
    Conversation.objects.filter(pk=conversation.pk).update(status=Status.WAITING_FOR_CONFIRMATION)
    return held


def _controls(page: str) -> str:
    start = page.index('id="controls"')
    return page[start : page.index("</div>", start)]


def test_interrupt_is_offered_while_an_external_agent_waits(browser, user, settings, dispatched):
    use_fixture(settings)
    external = start(user, "permission")
    _waiting(external)
    controls = _controls(browser.get(reverse("conversation-detail", args=[external.pk])).text)
    assert 'class="danger interrupt"' in controls
    assert 'class="secondary pause"' in controls and "disabled" in controls
    own = services.conversation_create(owner=user, prompt="hello", model="demo")
    _waiting(own)
    controls = _controls(browser.get(reverse("conversation-detail", args=[own.pk])).text)
    assert "interrupt" not in controls  # our own agent waits in no task: reject instead

    response = browser.post(
        reverse("conversation-interrupt", args=[external.pk]), HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200, response.content.decode()
    assert Conversation.objects.get(pk=external.pk).status == Status.PAUSED
    assert approvals.pending_actions(external.pk) == []


def test_a_decided_call_no_longer_says_held(browser, user, settings, dispatched):
    use_fixture(settings)
    conversation = start(user, "permission")
    held = _waiting(conversation)
    page = browser.get(reverse("conversation-detail", args=[conversation.pk])).text
    assert f'id="held-{held.id}">held for approval</span>' in page

    decision = ActionDecisionEvent(
        action_id=held.id, tool_call_id=held.tool_call_id, decision="rejected", by="alice",
        option_id="no",
    )  # fmt: skip
    frame = render_to_string(f"{PAGE}#event-frame", {"row": event_row(9, decision), "oob": True})
    assert f'id="held-{held.id}" hx-swap-oob="true">rejected</span>' in frame

    store.append(
        conversation.pk,
        [decision, rejected_observation(held, source="user", by="alice")],
    )
    page = browser.get(reverse("conversation-detail", args=[conversation.pk])).text
    assert f'id="held-{held.id}">rejected</span>' in page and "held for approval" not in page


def test_after_a_reload_a_pending_call_is_held_and_an_approved_one_running(
    browser, user, settings, dispatched
):
    """An external agent's approved call runs with no start event of ours: before its result,
    a reload showed it "held for approval" again. The decision in the log says it was let."""
    use_fixture(settings)
    conversation = start(user, "permission")
    held = _waiting(conversation)
    url = reverse("conversation-detail", args=[conversation.pk])
    page = browser.get(url).text
    assert f'id="held-{held.id}">held for approval</span>' in page
    assert "Waiting for a decision…" in page

    decision = ActionDecisionEvent(
        action_id=held.id, tool_call_id=held.tool_call_id, decision="approved", by="alice",
        option_id="no",
    )  # fmt: skip
    store.append(conversation.pk, [decision])
    page = browser.get(url).text
    assert f'id="held-{held.id}">approved</span>' in page and "held for approval" not in page
    assert "Waiting for a decision…" not in page and "Running…" in page
