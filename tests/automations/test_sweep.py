"""The sweeper's pass (automations.tasks.start_pending_runs): ended runs settled with their
conversation's cost, waiting runs started, runs that keep failing given up."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from automations import runs, tasks
from automations.models import AutomationRun
from conversations.models import Conversation

from .conftest import PULL_REQUEST_OPENED, github_post

pytestmark = pytest.mark.django_db


def _down(*args):
    raise RuntimeError("the database went away")


@pytest.fixture
def started(make_automation, dispatched) -> AutomationRun:
    automation, secret = make_automation()
    assert github_post(Client(), automation.pk, secret, PULL_REQUEST_OPENED).status_code == 202
    return AutomationRun.objects.get()


@pytest.mark.parametrize(
    "status, run_status, error",
    [
        ("finished", "finished", ""),
        ("error", "failed", "ended error"),
        ("stuck", "failed", "ended stuck"),
    ],
)
def test_an_ended_conversation_settles_its_run_with_its_cost(started, status, run_status, error):
    Conversation.objects.filter(pk=started.conversation_id).update(status=status, cost_usd="0.25")
    assert tasks.start_pending_runs() == 0
    started.refresh_from_db()
    assert started.status == run_status and error in started.error
    assert float(started.cost_usd) == 0.25 and started.finished_at is not None


def test_running_and_paused_conversations_leave_their_run_started(started):
    for status in ("running", "paused", "waiting_for_confirmation"):
        Conversation.objects.filter(pk=started.conversation_id).update(status=status)
        assert runs.runs_settle() == 0
    started.refresh_from_db()
    assert started.status == "started"


def test_a_young_waiting_run_is_left_to_its_request(make_automation, monkeypatch, dispatched):
    automation, secret = make_automation()
    monkeypatch.setattr(runs, "_create", _down)
    assert github_post(Client(), automation.pk, secret, PULL_REQUEST_OPENED).status_code == 202
    monkeypatch.undo()
    assert tasks.start_pending_runs() == 0  # within PENDING_GRACE_SECONDS
    assert AutomationRun.objects.get().status == "accepted"


def test_a_run_that_keeps_failing_is_given_up_after_an_hour(make_automation, monkeypatch,
                                                          dispatched):  # fmt: skip
    automation, secret = make_automation()
    monkeypatch.setattr(runs, "_create", _down)
    github_post(Client(), automation.pk, secret, PULL_REQUEST_OPENED)
    assert runs.start_pending_runs(grace_seconds=0) == 0
    assert AutomationRun.objects.get().status == "accepted"  # tried again next time
    AutomationRun.objects.update(created_at=timezone.now() - timedelta(hours=2))
    assert runs.start_pending_runs(grace_seconds=0) == 0
    run = AutomationRun.objects.get()
    assert run.status == "failed" and "could not be started" in run.error
    assert Conversation.objects.count() == 0


def test_beat_sends_the_pending_runs_sweep_as_a_registered_task(settings):
    from canvas.celery import app

    entry = settings.CELERY_BEAT_SCHEDULE["automations-start-pending-runs"]
    assert entry["task"] in app.tasks
    assert entry["schedule"] == settings.CANVAS_SWEEP_SECONDS
