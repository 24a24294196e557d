"""ACP turns driven slice by slice against the fixture agent (a real process in the sandbox):
translation into events, permission requests through the approval inbox, failures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conversations.events import (
    POLICY_DECIDER,
    AcpPromptEvent,
    AcpSessionEvent,
    AcpStateEvent,
    AcpTurnEvent,
    ActionDecisionEvent,
    ActionEvent,
    AgentErrorEvent,
    AgentMessageEvent,
    AgentThoughtEvent,
    ObservationEvent,
    PlanEvent,
    RunFinishedEvent,
    Status,
    UserMessageEvent,
)
from orchestration import run_control, services
from orchestration.control import approvals
from orchestration.external import pool
from tests.acp_bridge.turns import (
    drive_in_thread,
    events,
    join_clean,
    of,
    row,
    start,
    use_fixture,
)
from tests.conftest import wait_for
from tests.runs import drive

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fixture_agent(settings) -> None:
    use_fixture(settings)


def test_a_streamed_turn_becomes_aggregated_events_in_order(user, dispatched):
    conversation = start(user, "stream")
    assert row(conversation).agent == "fixture"
    drive(dispatched)
    log = events(conversation)
    kinds = [type(e).__name__ for e in log]
    assert kinds.index("AcpPromptEvent") < kinds.index("AcpSessionEvent")
    session = of(conversation, AcpSessionEvent)[0]
    assert (session.agent, session.how) == ("fixture", "new")
    # The commands update arrived before session/new answered: buffered, then recorded.
    assert of(conversation, AcpStateEvent)[0].commands[0].name == "stream"
    assert [e.text for e in of(conversation, AgentThoughtEvent)] == ["thinking"]
    assert [e.text for e in of(conversation, AgentMessageEvent)] == ["one two three"]
    action = of(conversation, ActionEvent)[0]
    assert (action.tool, action.kind, action.title) == ("read", "read", "Read notes")
    observation = of(conversation, ObservationEvent)[0]
    assert (observation.tool_call_id, observation.content) == ("call-1", "ok")
    plan = of(conversation, PlanEvent)[0]
    assert [(i.content, i.status) for i in plan.entries] == [
        ("look", "pending"), ("fix", "in_progress"),
    ]  # fmt: skip
    assert of(conversation, AcpTurnEvent)[0].stop_reason == "end_turn"
    assert kinds.index("AgentThoughtEvent") < kinds.index("AgentMessageEvent") < kinds.index(
        "ActionEvent"
    ) < kinds.index("PlanEvent") < kinds.index("AcpTurnEvent")  # fmt: skip
    assert row(conversation).status == Status.FINISHED


def test_mode_usage_and_cost_are_recorded_on_the_stats(user, dispatched):
    conversation = start(user, "state")
    drive(dispatched)
    states = of(conversation, AcpStateEvent)
    assert any(s.mode == "plan" for s in states)
    assert any((s.context_used, s.context_size) == (1200, 200000) for s in states)
    turn = of(conversation, AcpTurnEvent)[0]
    assert turn.usage is not None and turn.usage.cost_usd == pytest.approx(0.25)
    assert float(row(conversation).cost_usd) == pytest.approx(0.25)


def test_a_terminal_tool_call_records_its_output(user, dispatched):
    conversation = start(user, "run echo hello-from-terminal")
    drive(dispatched)
    action = of(conversation, ActionEvent)[0]
    assert (action.kind, action.title) == ("execute", "Run echo hello-from-terminal")
    observation = of(conversation, ObservationEvent)[0]
    assert "hello-from-terminal" in observation.content and not observation.is_error
    assert [e.text for e in of(conversation, AgentMessageEvent)] == ["ran it"]


def _held(conversation) -> approvals.PendingAction:
    wait_for(lambda: approvals.pending_actions(conversation.pk), message="no permission request")
    return approvals.pending_actions(conversation.pk)[0]


def test_a_permission_request_waits_in_the_inbox_and_the_chosen_option_reaches_the_agent(
    user, dispatched
):
    conversation = start(user, "edit notes.txt hello there")
    turn = drive_in_thread(dispatched)
    pending = _held(conversation)
    assert row(conversation).status == Status.WAITING_FOR_CONFIRMATION
    assert (pending.kind, pending.title) == ("edit", "Edit notes.txt")
    assert [(o.option_id, o.kind) for o in pending.options] == [
        ("yes", "allow_once"), ("always", "allow_always"), ("no", "reject_once"),
    ]  # fmt: skip
    decided = approvals.action_approve(
        conversation_id=conversation.pk, action_id=pending.action_id, by=user, option_id="always"
    )
    assert decided == "approved"
    join_clean(turn)
    workspace = Path(row(conversation).workspace_path)
    assert (workspace / "notes.txt").read_text() == "hello there"
    decision = of(conversation, ActionDecisionEvent)[0]
    assert (decision.by, decision.option_id) == (user.username, "always")
    observation = of(conversation, ObservationEvent)[0]
    assert (
        observation.diffs[0].path == "notes.txt" and observation.diffs[0].new_text == "hello there"
    )
    assert of(conversation, AgentMessageEvent)[-1].text == "edited notes.txt"
    assert row(conversation).status == Status.FINISHED


def test_a_rejected_request_writes_nothing_and_the_call_has_one_result(user, dispatched):
    conversation = start(user, "edit notes.txt nope")
    turn = drive_in_thread(dispatched)
    pending = _held(conversation)
    approvals.action_reject(
        conversation_id=conversation.pk, action_id=pending.action_id, by=user, reason="not now"
    )
    join_clean(turn)
    assert not (Path(row(conversation).workspace_path) / "notes.txt").exists()
    observations = of(conversation, ObservationEvent)
    assert len(observations) == 1 and observations[0].rejected
    assert of(conversation, ActionDecisionEvent)[0].option_id == "no"
    assert of(conversation, AgentMessageEvent)[-1].text == "refused (selected)"
    assert row(conversation).status == Status.FINISHED


def test_an_unknown_option_is_refused_with_the_offered_ones(user, dispatched):
    from common.errors import InvalidInput

    conversation = start(user, "edit notes.txt x")
    turn = drive_in_thread(dispatched)
    pending = _held(conversation)
    with pytest.raises(InvalidInput, match="offered: yes \\(allow_once\\)"):
        approvals.action_approve(
            conversation_id=conversation.pk, action_id=pending.action_id, by=user,
            option_id="maybe",
        )  # fmt: skip
    approvals.action_approve(conversation_id=conversation.pk, action_id=pending.action_id, by=user)
    join_clean(turn)
    assert of(conversation, ActionDecisionEvent)[0].option_id == "yes"


def test_a_crash_is_an_error_event_and_the_next_message_starts_a_new_process(user, dispatched):
    conversation = start(user, "crash")
    drive(dispatched)
    error = of(conversation, AgentErrorEvent)[0]
    assert error.code == "acp_agent_crashed" and "exit" in error.message.lower()
    assert row(conversation).status == Status.ERROR
    services.conversation_post_message(conversation_id=conversation.pk, text="echo", sender=user)
    drive(dispatched)
    sessions = of(conversation, AcpSessionEvent)
    assert [s.how for s in sessions] == ["new", "replayed"]
    report = json.loads(of(conversation, AgentMessageEvent)[-1].text)
    assert report["loaded"] is False
    assert report["prompt"].startswith("You are continuing a conversation")
    assert "User: crash" in report["prompt"] and report["prompt"].endswith("echo")
    assert row(conversation).status == Status.FINISHED


def test_the_next_turn_loads_the_session_when_the_agent_offers_it(user, dispatched, settings):
    use_fixture(settings, env={"FIXTURE_LOAD": "1"})
    conversation = start(user, "echo")
    drive(dispatched)
    first = json.loads(of(conversation, AgentMessageEvent)[-1].text)
    pool.close_all()  # else the warm agent answers (tests/acp_bridge/test_warm.py)
    services.conversation_post_message(conversation_id=conversation.pk, text="echo", sender=user)
    drive(dispatched)
    sessions = of(conversation, AcpSessionEvent)
    assert [s.how for s in sessions] == ["new", "loaded"]
    assert sessions[1].session_id == first["session"] and sessions[1].load_supported
    report = json.loads(of(conversation, AgentMessageEvent)[-1].text)
    assert report == {"session": first["session"], "loaded": True, "prompt": "echo"}
    # What the agent replays while loading is already in the log: not recorded twice.
    assert "replayed" not in [e.text for e in of(conversation, AgentMessageEvent)]
    assert [len(e.message_ids) for e in of(conversation, AcpPromptEvent)] == [1, 1]


def test_garbage_on_stdout_ends_the_turn_with_a_protocol_error(user, dispatched):
    conversation = start(user, "garbage")
    drive(dispatched)
    assert of(conversation, AgentErrorEvent)[0].code == "acp_protocol_error"
    assert row(conversation).status == Status.ERROR


def test_a_hang_past_the_turn_timeout_is_killed_with_its_group(user, dispatched, settings):
    import os

    use_fixture(settings, turn_timeout_seconds=2)
    conversation = start(user, "hang")
    drive(dispatched)
    error = of(conversation, AgentErrorEvent)[0]
    assert error.code == "acp_turn_timeout"
    child = json.loads(of(conversation, AgentMessageEvent)[0].text)["child"]
    # The child ran in the sandbox's PID namespace: its pid there is not ours to probe, so
    # check that no `sleep 600` of this test is left anywhere.
    assert child > 0
    leftovers = [p for p in os.listdir("/proc") if p.isdigit() and _is_sleep_600(p)]
    assert leftovers == []


def _is_sleep_600(pid: str) -> bool:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\x00600\x00"
    except OSError:
        return False


def test_an_interrupt_sends_cancel_and_the_turn_ends_cancelled(user, dispatched):
    conversation = start(user, "slow 100")
    turn = drive_in_thread(dispatched)
    wait_for(lambda: of(conversation, AcpSessionEvent), message="the agent did not start")
    run_control.conversation_interrupt(conversation_id=conversation.pk, by=user)
    join_clean(turn, timeout=20)
    assert of(conversation, AcpTurnEvent)[-1].stop_reason == "cancelled"
    assert row(conversation).status == Status.PAUSED
    finished = of(conversation, RunFinishedEvent)
    assert len(finished) == 1 and finished[0].status == Status.PAUSED


def test_an_agent_that_ignores_cancel_is_killed(user, dispatched):
    conversation = start(user, "ignore-cancel")
    turn = drive_in_thread(dispatched)
    wait_for(lambda: of(conversation, AcpSessionEvent), message="the agent did not start")
    run_control.conversation_interrupt(conversation_id=conversation.pk, by=user)
    join_clean(turn, timeout=30)
    assert of(conversation, AgentErrorEvent)[-1].code == "acp_cancel_ignored"
    assert row(conversation).status == Status.PAUSED


def test_a_turn_lost_with_its_worker_is_ended_and_not_resent(user, dispatched):
    from conversations import store

    conversation = start(user, "echo")
    dispatched.clear()  # the worker "dies" before running it ...
    message_id = of(conversation, UserMessageEvent)[-1].id
    store.append(
        conversation.pk, [AcpPromptEvent(message_ids=[message_id])]
    )  # ... after the prompt
    # The sweeper gives the run a new slice; here: send the recorded one by hand.
    current = row(conversation)
    dispatched.append((str(current.pk), current.run_slice))
    drive(dispatched)
    error = of(conversation, AgentErrorEvent)[-1]
    assert error.code == "acp_turn_lost" and "Send a message" in error.message
    assert of(conversation, AcpSessionEvent) == []  # no agent was started for it
    assert row(conversation).status == Status.ERROR


def test_secrets_are_redacted_from_what_the_agent_says(user, team, dispatched, settings):
    from teams.secrets import secret_create

    secret_create(by=user, team=team, name="API_TOKEN", value="tok-5f3a9c-very-secret")
    conversation = start(user, "echo tok-5f3a9c-very-secret")
    drive(dispatched)
    texts = " ".join(e.text for e in of(conversation, AgentMessageEvent))
    assert "tok-5f3a9c-very-secret" not in texts and "echo" in texts


def test_a_profile_the_policy_does_not_allow_is_refused(user, team):
    from common.errors import InvalidInput
    from teams.policies import policy_update

    policy_update(by=user, team=team, allowed_agent_kinds=["native"])
    with pytest.raises(InvalidInput, match="acp:fixture"):
        start(user, "echo", team=team.pk)


def test_the_policy_grants_a_kind_it_allows_without_asking(user, team, dispatched):
    from teams.models import AuditRecord
    from teams.policies import policy_update

    policy_update(by=user, team=team, acp_auto_allow_kinds=["edit"])
    conversation = start(user, "edit notes.txt granted", team=team.pk)
    drive(dispatched)  # nobody answers: the turn never waits
    assert (Path(row(conversation).workspace_path) / "notes.txt").read_text() == "granted"
    decision = of(conversation, ActionDecisionEvent)[0]
    assert (decision.decision, decision.by, decision.option_id) == (
        "approved",
        POLICY_DECIDER,
        "yes",
    )
    assert not of(conversation, ActionEvent)[0].requires_confirmation
    assert Status.WAITING_FOR_CONFIRMATION not in [
        e.status for e in events(conversation) if hasattr(e, "previous")
    ]
    audit = AuditRecord.objects.get(kind="action.approved", target=str(conversation.pk))
    assert audit.data["by"] == POLICY_DECIDER and audit.data["option"] == "yes"
    assert row(conversation).status == Status.FINISHED


def test_a_kind_the_policy_does_not_grant_still_asks(user, team, dispatched):
    from teams.policies import policy_update

    policy_update(by=user, team=team, acp_auto_allow_kinds=["read", "search"])
    conversation = start(user, "edit notes.txt asked", team=team.pk)
    turn = drive_in_thread(dispatched)
    assert _held(conversation).kind == "edit"
    approvals.action_approve(
        conversation_id=conversation.pk, action_id=_held(conversation).action_id, by=user
    )
    join_clean(turn)
    assert of(conversation, ActionDecisionEvent)[0].by == user.username


def test_no_answer_within_the_policys_timeout_rejects(user, team, dispatched):
    from teams.policies import policy_update

    policy_update(by=user, team=team, acp_permission_timeout_seconds=1)
    conversation = start(user, "edit notes.txt too-late", team=team.pk)
    drive(dispatched)
    decision = of(conversation, ActionDecisionEvent)[0]
    assert (decision.decision, decision.by, decision.option_id) == (
        "rejected",
        POLICY_DECIDER,
        "no",
    )
    assert "within 1 s" in decision.reason
    assert not (Path(row(conversation).workspace_path) / "notes.txt").exists()
    assert approvals.pending_actions(conversation.pk) == []
    assert row(conversation).status == Status.FINISHED


def test_an_interrupt_while_a_request_waits_answers_it_cancelled(user, dispatched):
    conversation = start(user, "edit notes.txt never")
    turn = drive_in_thread(dispatched)
    _held(conversation)
    run_control.conversation_interrupt(conversation_id=conversation.pk, by=user)
    join_clean(turn, timeout=20)
    assert not (Path(row(conversation).workspace_path) / "notes.txt").exists()
    assert approvals.pending_actions(conversation.pk) == []
    decision = of(conversation, ActionDecisionEvent)[0]
    assert decision.decision == "rejected"
    assert row(conversation).status == Status.PAUSED
