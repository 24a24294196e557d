"""Doors besides the event log's: what hooks read on stdin and what a team's notification
webhook receives go through the team's redactor too."""

from __future__ import annotations

import json
import uuid

import pytest
from django.db import transaction

from orchestration.control import hook_points, notify
from orchestration.control.notify import build_payload, notify_status_on_commit
from teams.hooks import hook_create
from teams.notifications import notification_set
from teams.secrets import secret_create

pytestmark = pytest.mark.django_db

VALUE = "tok-outgoing-5521-hidden"
CONVERSATION = uuid.uuid4().hex


@pytest.fixture
def secret(user, team) -> None:
    secret_create(by=user, team=team, name="DEPLOY_TOKEN", value=VALUE)


def action(arguments: dict):
    from conversations.events import ActionEvent

    return ActionEvent(tool_call_id="call-1", tool="terminal", arguments=json.dumps(arguments))


def test_a_post_tool_use_hook_reads_the_observation_redacted(user, team, secret, tmp_path):
    from conversations.events import ObservationEvent

    hook_create(by=user, team=team, name="record", event="PostToolUse", command="cat > seen.json")
    observation = ObservationEvent(
        tool_call_id="call-1", tool="terminal", content=f"token is {VALUE}", exit_code=0
    )
    hook_points.post_tool_use(
        team_id=team.pk, conversation_id=CONVERSATION, action=action({"command": "env"}),
        observation=observation, cwd=str(tmp_path),
    )  # fmt: skip
    seen = (tmp_path / "seen.json").read_text()
    assert VALUE not in seen
    assert json.loads(seen)["observation"]["content"] == "token is <secret:DEPLOY_TOKEN>"


def test_a_pre_tool_use_hook_reads_the_arguments_redacted(user, team, secret, tmp_path):
    hook_create(by=user, team=team, name="record", event="PreToolUse", command="cat > seen.json")
    arguments = {"command": f"curl -H 'X-Token: {VALUE}' example.com"}
    hook_points.pre_tool_use(
        team_id=team.pk, conversation_id=CONVERSATION, action=action(arguments),
        arguments=arguments, cwd=str(tmp_path),
    )  # fmt: skip
    seen = (tmp_path / "seen.json").read_text()
    assert VALUE not in seen and "<secret:DEPLOY_TOKEN>" in seen


def test_a_notification_is_redacted_before_it_leaves(
    user, team, secret, monkeypatch, django_capture_on_commit_callbacks
):
    notification_set(by=user, team=team, url="https://hooks.example.com/services/T1/B2/x")
    sent: list[dict] = []
    monkeypatch.setattr(notify, "_enqueue", sent.append)
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        notify_status_on_commit(
            conversation_id=str(uuid.uuid4()), team_id=team.pk, status="error",
            reason=f"model error: bad key {VALUE}", title=f"deploy with {VALUE}",
        )  # fmt: skip
    (kwargs,) = sent  # what goes through the broker to the delivering task
    assert VALUE not in json.dumps(kwargs)
    payload = build_payload(
        conversation_id=kwargs["conversation_id"], status=kwargs["status"],
        reason=kwargs["reason"], title=kwargs["title"], occurred_at=kwargs["occurred_at"],
    )  # fmt: skip
    assert VALUE not in json.dumps(payload)
    assert payload["conversation"]["reason"] == "model error: bad key <secret:DEPLOY_TOKEN>"
