"""Scripted conversations whose terminal commands run in the sandbox, driven slice by slice."""

from __future__ import annotations

import uuid

import pytest
from django.template.loader import render_to_string

from canvas.event_rows import event_row
from conversations import store
from conversations.events import AgentErrorEvent, ObservationEvent
from orchestration import services
from orchestration.step.runner import UNSANDBOXED
from teams.models import Policy
from tests.escape import CANARY_NAME, assert_contained, escape_script, sandbox_broken
from tests.runs import drive, script

pytestmark = pytest.mark.django_db(transaction=True)

REDIS_PING = "(exec 3<>/dev/tcp/127.0.0.1/6379 && printf 'PING\\r\\n' >&3 && head -c 7 <&3)"


@pytest.fixture(autouse=True)
def canary(monkeypatch) -> None:
    monkeypatch.setenv(CANARY_NAME, f"canary-{uuid.uuid4().hex}")


@pytest.fixture
def unconfirmed(team) -> Policy:
    """Run every command without waiting for a person: the escape script looks risky."""
    return Policy.objects.create(team=team, confirmation_mode="never")


def run_commands(user, team, dispatched, *commands: str) -> tuple[str, list[ObservationEvent]]:
    conversation = services.conversation_create(
        owner=user, team=team, model="scripted",
        prompt=script(
            *({"tool": "terminal", "args": {"command": c}} for c in commands),
            {"tool": "finish", "args": {"message": "done"}},
        ),
    )  # fmt: skip
    drive(dispatched)
    events = [s.event for s in store.load(conversation.pk)]
    results = [e for e in events if isinstance(e, ObservationEvent) and e.tool == "terminal"]
    assert len(results) == len(commands)
    return str(conversation.pk), results


def test_a_conversations_commands_cannot_reach_the_worker(
    user, team, unconfirmed, dispatched, tmp_path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    _, (result,) = run_commands(user, team, dispatched, escape_script(outside=outside))
    assert_contained(result.content, outside=outside)


def test_the_teams_network_reaches_the_runs_commands(
    user, team, unconfirmed, dispatched, settings
) -> None:
    settings.CANVAS_SANDBOX_ALLOW_HOST_NETWORK = True
    _, (closed,) = run_commands(user, team, dispatched, REDIS_PING)
    assert "PONG" not in closed.content
    Policy.objects.filter(pk=unconfirmed.pk).update(network="host")
    _, (open_,) = run_commands(user, team, dispatched, REDIS_PING)
    assert open_.content.startswith("+PONG")


def test_an_unsandboxed_run_says_so_once_and_the_page_shows_it(
    user, team, unconfirmed, dispatched, settings
) -> None:
    settings.CANVAS_SLICE_STEPS = 1  # the mark must not repeat at every slice
    with sandbox_broken(settings, allow_unsandboxed=True):
        conversation_id, _ = run_commands(user, team, dispatched, "true", "true")
    events = [s.event for s in store.load(conversation_id)]
    marks = [e for e in events if isinstance(e, AgentErrorEvent) and e.code == UNSANDBOXED]
    assert len(marks) == 1
    assert "CANVAS_UNSANDBOXED_COMMANDS" in marks[0].message
    (row,) = [event_row(s.seq, s.event) for s in store.load(conversation_id) if s.event in marks]
    html = render_to_string("canvas/conversation_detail.html#event-row", {"row": row})
    assert "Warning: no sandbox" in html and "CANVAS_UNSANDBOXED_COMMANDS" in html


def test_a_sandboxed_run_has_no_such_mark(user, team, unconfirmed, dispatched) -> None:
    conversation_id, _ = run_commands(user, team, dispatched, "true")
    assert not any(
        isinstance(s.event, AgentErrorEvent) and s.event.code == UNSANDBOXED
        for s in store.load(conversation_id)
    )


def test_without_a_sandbox_the_command_refuses_and_the_model_reads_why(
    user, team, unconfirmed, dispatched, settings, tmp_path
) -> None:
    marker = tmp_path / "ran"
    with sandbox_broken(settings, allow_unsandboxed=False):
        _, (result,) = run_commands(user, team, dispatched, f"touch {marker}")
    assert result.is_error
    assert "no working sandbox" in result.content
    assert "CANVAS_UNSANDBOXED_COMMANDS=true" in result.content
    assert not marker.exists()
