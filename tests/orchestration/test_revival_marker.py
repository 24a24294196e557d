"""A run revived after its worker died says so in its log and on its page: the sweeper's
marker event, then the dead worker's action marked interrupted inside its call's card."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from conversations import store
from conversations.events import ActionEvent, AgentErrorEvent, ObservationEvent
from conversations.models import Conversation
from orchestration import services
from orchestration.chain.lease import lease_claim
from orchestration.chain.sweep import REVIVED, sweep_runs
from tests.runs import drive, script

pytestmark = pytest.mark.django_db(transaction=True)  # the slice runs as a worker would

COMMAND = "echo once >> once.txt"


def test_a_revived_run_shows_a_marker_and_the_interrupted_call(user, dispatched):
    prompt = script({"tool": "terminal", "args": {"command": COMMAND}}, {"say": "after"})
    conversation = services.conversation_create(owner=user, model="scripted", prompt=prompt)
    conversation_id, first_slice = dispatched.pop()
    # A worker took the slice, wrote its action, and died before the result.
    lease_claim(conversation_id, first_slice)
    arguments = json.dumps({"command": COMMAND})
    action = ActionEvent(tool_call_id="call_0_0", tool="terminal", arguments=arguments)
    store.append(conversation.pk, [action])
    Conversation.objects.filter(pk=conversation_id).update(
        lease_expires_at=timezone.now() - timedelta(seconds=5)
    )
    assert sweep_runs() == 1
    drive(dispatched)

    events = [s.event for s in store.load(conversation.pk)]
    marker = next(i for i, e in enumerate(events) if isinstance(e, AgentErrorEvent))
    assert events[marker].code == REVIVED and events[marker - 1] == action
    result = next(e for e in events if isinstance(e, ObservationEvent))
    assert result.interrupted and events.index(result) > marker
    assert events[-1].type == "run.finished"

    client = Client()
    client.force_login(user)
    page = client.get(reverse("conversation-detail", args=[conversation.pk])).content.decode()
    assert 'data-marker="revived"' in page and "Run revived on another worker" in page
    card = page.split('id="call-log-c-call_0_0"', 1)[1].split("</article>", 1)[0]
    assert 'class="tag interrupted"' in card and "stopped" in card
