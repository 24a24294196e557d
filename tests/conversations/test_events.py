import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from conversations.events import (
    EVENT_ADAPTER,
    AcpPromptEvent,
    AcpSessionEvent,
    AcpStateEvent,
    AcpTurnEvent,
    ActionDecisionEvent,
    ActionEvent,
    ActionStartedEvent,
    AgentErrorEvent,
    AgentMessageEvent,
    AgentThoughtEvent,
    CondensationEvent,
    ObservationEvent,
    PlanEvent,
    RunFinishedEvent,
    RunStartedEvent,
    Status,
    StatusChangeEvent,
    SubagentsSettledEvent,
    SubagentsSpawnedEvent,
    SystemContextEvent,
    SystemPromptEvent,
    UnknownEvent,
    Usage,
    UserMessageBlockedEvent,
    UserMessageCheckedEvent,
    UserMessageEvent,
    event_from_payload,
    event_to_payload,
)

GOLDEN = Path(__file__).parent / "golden" / "events_v1.json"

EXAMPLES = [
    SystemPromptEvent(content="be useful", tools=[{"type": "function", "function": {"name": "t"}}]),
    UserMessageEvent(text="hello", sender="alice"),
    UserMessageCheckedEvent(message_ids=["m1", "m2"]),
    UserMessageBlockedEvent(message_id="m3", hook="no-passwords", reason="no passwords"),
    AgentMessageEvent(text="hi", llm_response_id="r1", usage=Usage(prompt_tokens=3, cost_usd=0.5)),
    ActionEvent(tool_call_id="c1", tool="terminal", arguments='{"command": "ls"}', batch_size=2),
    ObservationEvent(tool_call_id="c1", tool="terminal", content="a\nb", exit_code=0),
    AgentErrorEvent(code="llm_RateLimitError_429", message="slow down"),
    ActionDecisionEvent(
        action_id="a1", tool_call_id="c1", decision="rejected", by="bob", reason="no"
    ),
    ActionStartedEvent(tool_call_id="c1"),
    StatusChangeEvent(status=Status.FINISHED, previous=Status.RUNNING, reason="done"),
    RunStartedEvent(trigger="alice"),
    RunFinishedEvent(run_id="r", status=Status.ERROR, reason="model error"),
    SubagentsSpawnedEvent(
        tool_call_id="c2",
        tool="delegate",
        children=[{"conversation_id": "k1", "name": "a", "subagent_type": "general", "key": "a"}],
    ),
    SubagentsSettledEvent(
        tool_call_id="c2",
        results=[{"conversation_id": "k1", "name": "a", "status": "finished", "answer": "42"}],
        usage=Usage(cost_usd=0.25),
    ),
    ActionEvent(
        tool_call_id="t1",
        tool="edit",
        arguments='{"path": "a.py"}',
        title="Edit a.py",
        kind="edit",
        locations=["a.py:3"],
        requires_confirmation=True,
        options=[{"option_id": "yes", "name": "Allow", "kind": "allow_once"}],
    ),  # fmt: skip
    ObservationEvent(
        tool_call_id="t1",
        tool="edit",
        content="edited",
        diffs=[{"path": "a.py", "old_text": "x", "new_text": "y"}],
    ),  # fmt: skip
    AgentThoughtEvent(text="thinking", message_id="m1"),
    PlanEvent(entries=[{"content": "read", "priority": "high", "status": "completed"}]),
    AcpSessionEvent(agent="claude-code", session_id="s1", how="loaded", load_supported=True),
    AcpStateEvent(mode="plan", commands=[{"name": "init", "description": "set up"}]),
    AcpPromptEvent(message_ids=["m1", "m2"]),
    AcpTurnEvent(stop_reason="end_turn", usage=Usage(prompt_tokens=5, completion_tokens=2)),
    CondensationEvent(
        forgotten_ids=["e1", "e2"],
        summary="## Task\nfix it",
        offset=2,
        trigger="context_window",
        usage=Usage(prompt_tokens=40, completion_tokens=8, cost_usd=0.01),
    ),  # fmt: skip
    SystemContextEvent(text="<context>Today is 2026-12-02 (UTC).</context>", sources=["AGENTS.md"]),
]


@pytest.mark.parametrize("event", EXAMPLES, ids=lambda e: e.type)
def test_every_event_type_round_trips_through_the_adapter(event):
    payload = json.loads(json.dumps(event_to_payload(event)))
    assert EVENT_ADAPTER.validate_python(payload) == event
    assert event_from_payload(event.type, payload) == event


def test_every_known_type_has_an_example():
    from conversations.events import KNOWN_TYPES

    assert {e.type for e in EXAMPLES} == KNOWN_TYPES


def test_events_are_immutable_and_reject_unknown_fields():
    event = UserMessageEvent(text="x")
    with pytest.raises(ValidationError):
        event.text = "y"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        UserMessageEvent(text="x", surprise=1)


def test_unknown_tag_loads_as_unknown_event():
    loaded = event_from_payload(
        "future.thing", {"id": "e1", "type": "future.thing", "timestamp": None, "x": 1}
    )
    assert isinstance(loaded, UnknownEvent)
    assert loaded.type == "future.thing"
    assert loaded.payload == {"x": 1}


def test_golden_v1_payloads_still_load():
    """Rows written by schema v1 must load forever; this file is never regenerated."""
    rows = json.loads(GOLDEN.read_text())
    assert {row["type"] for row in rows} >= {e.type for e in EXAMPLES}
    for row in rows:
        event = event_from_payload(row["type"], row["payload"])
        assert event.type == row["type"]
        assert event.id == row["payload"]["id"]


@pytest.mark.parametrize(
    ("raw", "value", "as_object"),
    [
        ('{"command": "ls"}', {"command": "ls"}, {"command": "ls"}),
        ("", {}, {}),
        ("  ", {}, {}),
        ("[1, 2]", [1, 2], None),
        ('"text"', "text", None),
    ],
)
def test_parsed_arguments_reads_the_raw_string_once(raw, value, as_object):
    action = ActionEvent(tool_call_id="c1", tool="terminal", arguments=raw)
    parsed = action.parsed_arguments
    assert (parsed.value, parsed.error, parsed.as_object) == (value, None, as_object)
    # One parse per distinct string, also for a copy with other fields changed.
    assert action.model_copy(update={"risk": "LOW"}).parsed_arguments is parsed
    assert "parsed_arguments" not in action.model_dump()


def test_parsed_arguments_keeps_the_parse_error():
    action = ActionEvent(tool_call_id="c1", tool="terminal", arguments='{"command": ')
    parsed = action.parsed_arguments
    assert parsed.value is None and parsed.as_object is None
    assert isinstance(parsed.error, json.JSONDecodeError)
    assert parsed.error.pos == len(action.arguments)
    changed = action.model_copy(update={"arguments": '{"command": "ls"}'})
    assert changed.parsed_arguments.as_object == {"command": "ls"}
