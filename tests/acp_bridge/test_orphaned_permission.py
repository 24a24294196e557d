"""A permission request left by a dead worker: its turn held the lease while it waited and
died with the agent's process. Until the sweeper comes an approval answers 409 (nothing could
reach the agent); one sweep closes the request as expired, with a decision saying why, and
an approval after that answers 409 in those words. The revived run then ends its lost turn
without closing the request twice.

The dead worker is its log and row as a SIGKILL leaves them (tests/acp_bridge/test_worker.py
kills a real one): a held action with the agent's options, the row waiting for confirmation
under a lease nobody renews any more.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from common.errors import Conflict
from conversations import store
from conversations.events import (
    POLICY_DECIDER,
    AcpPromptEvent,
    ActionDecisionEvent,
    ActionEvent,
    AgentErrorEvent,
    ObservationEvent,
    PermissionChoice,
    Status,
    StatusChangeEvent,
)
from conversations.models import Conversation
from orchestration.chain.sweep import REVIVED, sweep_runs
from orchestration.control import approvals
from orchestration.external.permissions import EXPIRED
from teams.models import AuditRecord
from tests.acp_bridge.turns import of, row, start, use_fixture
from tests.runs import drive

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fixture_agent(settings) -> None:
    use_fixture(settings)


def _left_waiting_by_a_dead_worker(user, dispatched, *, expired: bool) -> tuple:
    conversation = start(user, "edit notes.txt never")
    dispatched.clear()  # the dead worker took that slice
    held = ActionEvent(
        tool_call_id="call-1", tool="edit", arguments="{}", title="Edit notes.txt",
        kind="edit", requires_confirmation=True,
        options=[PermissionChoice(option_id="yes", name="Allow", kind="allow_once"),
                 PermissionChoice(option_id="no", name="Reject", kind="reject_once")],
    )  # fmt: skip
    store.append(
        conversation.pk,
        [
            AcpPromptEvent(message_ids=[]), held,
            StatusChangeEvent(status=Status.WAITING_FOR_CONFIRMATION, previous=Status.RUNNING),
        ],
    )  # fmt: skip
    left = timezone.now() + timedelta(seconds=-1 if expired else 60)
    Conversation.objects.filter(pk=conversation.pk).update(
        status=Status.WAITING_FOR_CONFIRMATION, lease_token=uuid.uuid4().hex,
        lease_expires_at=left,
    )  # fmt: skip
    return conversation, held


def _approve(conversation, held, user) -> str:
    return approvals.action_approve(
        conversation_id=conversation.pk, action_id=held.id, by=user, option_id="yes"
    )


def test_one_sweep_expires_the_request_and_a_late_approval_is_a_409(user, dispatched):
    conversation, held = _left_waiting_by_a_dead_worker(user, dispatched, expired=True)
    assert [a.action_id for a in approvals.pending_actions(conversation.pk)] == [held.id]
    with pytest.raises(Conflict, match="this request has expired: the worker running"):
        _approve(conversation, held, user)  # its lease ran out: nothing could reach the agent
    assert of(conversation, ActionDecisionEvent) == []

    assert sweep_runs() == 1
    (decision,) = of(conversation, ActionDecisionEvent)
    assert (decision.action_id, decision.decision, decision.by) == (
        held.id, "rejected", POLICY_DECIDER,
    )  # fmt: skip
    assert decision.reason == EXPIRED and "stopped while this request waited" in EXPIRED
    (closed,) = of(conversation, ObservationEvent)
    assert closed.tool_call_id == held.tool_call_id and closed.rejected and closed.interrupted
    assert approvals.pending_actions(conversation.pk) == []
    assert row(conversation).status == Status.RUNNING
    assert AuditRecord.objects.filter(kind="action.rejected", data__reason=EXPIRED).count() == 1

    with pytest.raises(
        Conflict, match=r"already decided: rejected by policy:team \(expired: the worker"
    ):
        _approve(conversation, held, user)

    drive(dispatched)  # the revived run: the next runner ends the lost turn
    assert [e.code for e in of(conversation, AgentErrorEvent)] == [REVIVED, "acp_turn_lost"]
    assert len(of(conversation, ActionDecisionEvent)) == len(of(conversation, ObservationEvent))
    assert len(of(conversation, ActionDecisionEvent)) == 1
    assert row(conversation).status == Status.ERROR


def test_a_request_whose_turn_still_holds_its_lease_is_left_to_it(user, dispatched):
    conversation, held = _left_waiting_by_a_dead_worker(user, dispatched, expired=False)
    assert sweep_runs() == 0
    assert of(conversation, ActionDecisionEvent) == []
    assert _approve(conversation, held, user) == "approved"  # the live turn passes it on
    assert not dispatched  # no second slice: the waiting turn takes the answer
