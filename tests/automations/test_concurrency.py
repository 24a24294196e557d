"""The concurrency rules, when a delivery arrives while the previous run still goes:
skip, queue (started by the sweeper once the previous ends) and cancel."""

from __future__ import annotations

import pytest
from django.test import Client

from automations.models import AutomationRun
from automations.runs import start_pending_runs
from conversations.models import Conversation
from tests.runs import drive, script

from .conftest import github_post

pytestmark = pytest.mark.django_db(transaction=True)  # drive() runs real slices

SAY = script({"say": "PR {{ payload.number }} reviewed"})


def deliver(automation, secret, number: int):
    return github_post(Client(), automation.pk, secret, {"number": number}, delivery=f"d{number}")


def statuses(automation) -> list[str]:
    return list(automation.runs.order_by("id").values_list("status", flat=True))


def test_skip_records_the_run_and_starts_nothing(make_automation, dispatched):
    automation, secret = make_automation(prompt_template=SAY, concurrency="skip")
    assert deliver(automation, secret, 1).status_code == 202
    second = deliver(automation, secret, 2)
    assert second.status_code == 200 and second.json()["status"] == "skipped"
    assert statuses(automation) == ["started", "skipped"]
    assert Conversation.objects.count() == 1
    assert "still going" in AutomationRun.objects.get(status="skipped").error
    drive(dispatched)  # once the first has finished, a new delivery starts again
    assert deliver(automation, secret, 3).status_code == 202
    assert Conversation.objects.count() == 2


def test_queue_starts_the_next_run_when_the_previous_ends(make_automation, dispatched):
    automation, secret = make_automation(prompt_template=SAY, concurrency="queue")
    first = deliver(automation, secret, 1)
    queued = [deliver(automation, secret, n) for n in (2, 3)]
    assert [q.status_code for q in queued] == [202, 202]
    assert [q.json()["status"] for q in queued] == ["queued", "queued"]
    assert all(q.json()["conversation_id"] is None for q in queued)
    assert start_pending_runs(grace_seconds=0) == 0  # the first still runs
    assert statuses(automation) == ["started", "queued", "queued"]

    drive(dispatched)
    assert Conversation.objects.get(pk=first.json()["conversation_id"]).status == "finished"
    assert start_pending_runs(grace_seconds=0) == 1  # one at a time, oldest first
    assert statuses(automation) == ["finished", "started", "queued"]
    drive(dispatched)
    assert start_pending_runs(grace_seconds=0) == 1
    drive(dispatched)
    start_pending_runs(grace_seconds=0)
    assert statuses(automation) == ["finished", "finished", "finished"]
    prompts = automation.runs.order_by("id").values_list("prompt", flat=True)
    assert [f"PR <untrusted_payload>{n}</untrusted_payload> reviewed" in p
            for n, p in enumerate(prompts, start=1)] == [True] * 3  # fmt: skip


def test_cancel_stops_the_previous_conversation_then_starts(make_automation, dispatched):
    automation, secret = make_automation(prompt_template=SAY, concurrency="cancel")
    first = deliver(automation, secret, 1).json()
    second = deliver(automation, secret, 2)
    assert second.status_code == 202 and second.json()["conversation_id"]
    old = Conversation.objects.get(pk=first["conversation_id"])
    assert old.status == "paused"
    assert statuses(automation) == ["cancelled", "started"]
    assert Conversation.objects.get(pk=second.json()["conversation_id"]).status == "running"
