"""schedule_next, the one way a run's next slice is recorded and sent: the row gets the slice
id and its due time, and the broker gets the slice once, only if the transaction commits."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.utils import timezone

import orchestration.chain.dispatch
from conversations.models import Conversation
from orchestration import services
from orchestration.chain.dispatch import schedule_next
from tests.runs import script

pytestmark = pytest.mark.django_db(transaction=True)  # real commits: on_commit fires for real


@pytest.fixture
def broker(monkeypatch) -> list[tuple[str, str, dict]]:
    """What the broker took (the publish itself; enqueue_slice_on_commit runs unpatched)."""
    sent: list[tuple[str, str, dict]] = []
    monkeypatch.setattr(
        orchestration.chain.dispatch, "send_slice",
        lambda pk, slice_id, **routing: sent.append((str(pk), slice_id, routing)),
    )  # fmt: skip
    return sent


@pytest.fixture
def conversation(broker) -> Conversation:
    """A conversation whose first slice was sent (and is forgotten here)."""
    created = services.conversation_create(
        owner=None, model="scripted", prompt=script({"say": "hi"})
    )
    broker.clear()
    return created


def locked(pk) -> Conversation:
    return Conversation.objects.select_for_update().get(pk=pk)


def test_a_new_slice_is_recorded_due_and_sent_once_on_commit(conversation, broker, settings):
    settings.CANVAS_SWEEP_SECONDS = 30
    before = Conversation.objects.get(pk=conversation.pk).run_slice
    with transaction.atomic():
        slice_id = schedule_next(locked(conversation.pk))
        assert broker == []  # not before commit: a worker would not find the slice yet
    row = Conversation.objects.get(pk=conversation.pk)
    assert row.run_slice == slice_id and slice_id != before
    seconds = (row.run_slice_due_at - timezone.now()).total_seconds()
    assert 25 < seconds <= 30  # one sweep period from now
    assert broker == [(str(conversation.pk), slice_id, {"worker_host": "", "agent": ""})]


def test_nothing_is_recorded_or_sent_when_the_transaction_rolls_back(conversation, broker):
    before = Conversation.objects.get(pk=conversation.pk)
    with pytest.raises(RuntimeError), transaction.atomic():
        schedule_next(locked(conversation.pk))
        raise RuntimeError("the caller's next write failed")
    after = Conversation.objects.get(pk=conversation.pk)
    assert (after.run_slice, after.run_slice_due_at) == (before.run_slice, before.run_slice_due_at)
    assert broker == []


def test_a_lost_slice_is_sent_again_under_its_own_id_with_a_new_due_time(conversation, broker):
    Conversation.objects.filter(pk=conversation.pk).update(run_slice_due_at=timezone.now())
    before = Conversation.objects.get(pk=conversation.pk)
    with transaction.atomic():
        slice_id = schedule_next(locked(conversation.pk), new_slice=False)
    after = Conversation.objects.get(pk=conversation.pk)
    assert slice_id == after.run_slice == before.run_slice
    assert after.run_slice_due_at > before.run_slice_due_at
    assert [sent[1] for sent in broker] == [slice_id]


def test_a_caller_may_save_the_row_and_send_the_slice_itself(conversation, broker):
    with transaction.atomic():
        row = locked(conversation.pk)
        slice_id = schedule_next(row, send=False, save=False)
        assert row.run_slice == slice_id and row.run_slice_due_at is not None
        assert Conversation.objects.get(pk=row.pk).run_slice != slice_id  # not saved yet
    assert broker == []
