"""The agent's pure decision logic: responses to events, actions to observations."""

import json

import pytest

from conversations.events import ActionEvent, ObservationEvent, Usage
from orchestration.step.llm import LLMResponse, ToolCall
from orchestration.step.loop import events_from_response, execute_action, interrupted_observation
from orchestration.step.messages import messages_from_events
from orchestration.tools.base import ToolContext, ToolResult
from orchestration.tools.registry import tools_for
from workspaces.local import LocalWorkspace


@pytest.fixture
def ctx(tmp_path) -> ToolContext:
    return ToolContext("c1", LocalWorkspace(tmp_path / "ws", tmp_path / "state"))


@pytest.fixture
def tools():
    return {t.name: t for t in tools_for(["terminal", "file_editor", "think", "finish"])}


def action(tool: str, arguments: str) -> ActionEvent:
    return ActionEvent(tool_call_id="c", tool=tool, arguments=arguments)


def test_parallel_calls_become_one_batch_with_the_cost_on_the_first():
    usage = Usage(prompt_tokens=5, completion_tokens=1, cost_usd=0.01)
    response = LLMResponse(
        id="r1", content="thinking", usage=usage,
        tool_calls=[ToolCall("a", "think", "{}"), ToolCall("b", "terminal", "{}")],
    )  # fmt: skip
    first, second = events_from_response(response)
    assert (first.batch_index, first.batch_size, first.thought, first.usage) == (
        0, 2, "thinking", usage,
    )  # fmt: skip
    assert (second.batch_index, second.thought, second.usage) == (1, "", None)
    assert first.llm_response_id == second.llm_response_id == "r1"


def test_a_response_without_an_id_still_makes_a_batch_of_its_own():
    """Recovery finds held batches by this id; a provider that sends none must not merge
    every id-less response into one batch."""

    def batch(*names: str) -> list:
        calls = [ToolCall(name, "terminal", "{}") for name in names]
        return events_from_response(LLMResponse(None, "", calls, Usage()))

    first, second = batch("a", "b")
    (third,) = batch("c")
    assert first.llm_response_id and first.llm_response_id == second.llm_response_id
    assert third.llm_response_id and third.llm_response_id != first.llm_response_id


def test_a_plain_answer_becomes_an_agent_message():
    (message,) = events_from_response(LLMResponse("r", "hi", [], Usage()))
    assert message.type == "message.agent" and message.text == "hi"


@pytest.mark.parametrize(
    "tool, arguments, expected",
    [
        ("nope", "{}", "Unknown tool 'nope'. Available tools: file_editor, finish, terminal"),
        ("terminal", "{bad", "are not valid JSON"),
        ("terminal", "[1]", "must be a JSON object, not list"),
        ("terminal", "{}", "Invalid arguments for tool 'terminal':\n- command: Field required"),
        ("terminal", '{"command": "ls", "rm": 1}', "- rm: Extra inputs are not permitted"),
        ("file_editor", '{"command": "view", "path": "../../etc/passwd"}', "outside"),
    ],
)
def test_every_broken_call_becomes_an_error_observation(ctx, tools, tool, arguments, expected):
    outcome = execute_action(action(tool, arguments), tools, ctx)
    assert outcome.observation.is_error
    assert expected in outcome.observation.content
    assert outcome.observation.tool_call_id == "c"
    assert not outcome.finish


def test_a_tool_exception_is_reported_not_raised(ctx, tools):
    class Exploding:
        name = "boom"
        description = "explodes"
        read_only = True
        args_model = tools["think"].args_model

        def run(self, args, ctx) -> ToolResult:
            raise RuntimeError("kaput")

    outcome = execute_action(
        action("boom", json.dumps({"thought": "x"})), {"boom": Exploding()}, ctx
    )
    assert outcome.observation.is_error
    assert outcome.observation.content == "Tool 'boom' failed: RuntimeError: kaput"


def test_finish_ends_the_run_with_its_message(ctx, tools):
    outcome = execute_action(action("finish", '{"message": "all good"}'), tools, ctx)
    assert outcome.finish and outcome.observation.content == "all good"


def test_interrupted_observation_tells_the_model_to_verify():
    observation = interrupted_observation(action("terminal", "{}"))
    assert observation.interrupted and observation.is_error
    assert "verify" in observation.content


def test_messages_group_a_batch_into_one_assistant_message():
    events = [
        ActionEvent(tool_call_id="a", tool="think", arguments="{}", thought="t", batch_size=2),
        ActionEvent(tool_call_id="b", tool="think", arguments="{}", batch_index=1, batch_size=2),
        ObservationEvent(tool_call_id="a", tool="think", content="1"),
        ObservationEvent(tool_call_id="b", tool="think", content="2"),
    ]
    messages = messages_from_events(events)
    assert [m["role"] for m in messages] == ["assistant", "tool", "tool"]
    assert [c["id"] for c in messages[0]["tool_calls"]] == ["a", "b"]
    assert messages[0]["content"] == "t"
