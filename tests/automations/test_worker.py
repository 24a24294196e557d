"""A signed pull_request delivery runs to FINISHED on a real Celery worker (Redis, Postgres)."""

from __future__ import annotations

import pytest
from django.test import Client

from automations.models import AutomationRun
from automations.runs import start_pending_runs
from conversations import store
from conversations.models import Conversation
from tests.conftest import wait_for
from tests.runs import script

from .conftest import PULL_REQUEST_OPENED, github_post

pytestmark = pytest.mark.worker


def test_a_signed_pull_request_runs_to_finished_on_a_worker(start_worker, make_automation):
    start_worker()
    template = script(
        {"tool": "think", "args": {"thought": "PR {{ payload.pull_request.number }} by "
                                              "{{ payload.pull_request.user.login }}"}},
        {"tool": "finish", "args": {"message": "reviewed {{ payload.repository.full_name }}"}},
    )  # fmt: skip
    automation, secret = make_automation(prompt_template=template)
    response = github_post(Client(), automation.pk, secret, PULL_REQUEST_OPENED)
    assert response.status_code == 202, response.content
    conversation_id = response.json()["conversation_id"]

    def finished() -> bool:
        return Conversation.objects.get(pk=conversation_id).status == "finished"

    wait_for(finished, 60, message="the automation's run to finish")
    events = [s.event for s in store.load(conversation_id)]
    said = "PR <untrusted_payload>42</untrusted_payload> by <untrusted_payload>octocat"
    thoughts = [e for e in events if e.type == "tool.call" and said in e.model_dump_json()]
    assert thoughts, [e.type for e in events]
    start_pending_runs(grace_seconds=0)
    assert AutomationRun.objects.get().status == "finished"
