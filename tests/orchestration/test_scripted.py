"""The scripted and demo models, called through LiteLLM's own completion path."""

import json

import litellm
import pytest

from orchestration.step.llm import (
    CONTEXT_WINDOW_EXCEEDED,
    ContextWindowError,
    LiteLLMClient,
    LLMError,
)
from orchestration.step.profiles import BUILTIN_PROFILES
from orchestration.step.scripted import DEMO_DONE, NO_SUMMARY, NOT_A_SCRIPT
from orchestration.step.summary_prompt import summary_request
from tests.runs import script


def ask(model: str, messages: list[dict]):
    return LiteLLMClient(BUILTIN_PROFILES[model]).complete(messages, tools=[])


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def test_registered_as_a_litellm_custom_provider():
    response = litellm.completion(
        model="canvas/scripted", messages=[user(script({"say": "hello"}))]
    )
    assert response.choices[0].message.content == "hello"
    assert response.usage.prompt_tokens > 0


def test_plays_one_turn_per_assistant_message():
    prompt = script(
        {"tool": "think", "args": {"thought": "a"}},
        {"tools": [{"tool": "terminal", "args": {"command": "ls"}},
                   {"tool": "think", "args": {"thought": "b"}}]},
        {"say": "done"},
    )  # fmt: skip
    history = [user(prompt)]
    first = ask("scripted", history)
    assert [(c.name, json.loads(c.arguments)) for c in first.tool_calls] == [
        ("think", {"thought": "a"})
    ]
    history.append({"role": "assistant", "content": None, "tool_calls": []})
    second = ask("scripted", history)
    assert [c.name for c in second.tool_calls] == ["terminal", "think"]
    assert len({c.id for c in second.tool_calls}) == 2
    history.append({"role": "assistant", "content": None, "tool_calls": []})
    third = ask("scripted", history)
    assert third.tool_calls == [] and third.content == "done"
    history.append({"role": "assistant", "content": "done"})
    assert [c.name for c in ask("scripted", history).tool_calls] == ["finish"]


def test_arguments_pass_through_verbatim_even_when_invalid():
    response = ask("scripted", [user(script({"tool": "terminal", "args": "{not json"}))])
    assert response.tool_calls[0].arguments == "{not json"


@pytest.mark.parametrize("text", ["hello", "[1, 2]", '{"no_script": 1}', ""])
def test_a_message_that_is_not_a_script_gets_a_plain_answer(text):
    response = ask("scripted", [user(text)])
    assert response.tool_calls == [] and response.content == NOT_A_SCRIPT


def test_demo_walks_through_its_script_then_says_it_is_done():
    history = [user("anything")]
    names = []
    for _ in range(6):
        response = ask("demo", history)
        names.append(response.tool_calls[0].name)
        history.append({"role": "assistant", "content": None})
    assert names == ["terminal", "file_editor", "terminal", "file_editor", "terminal", "finish"]
    assert ask("demo", history).content == DEMO_DONE


# ---- Condensation ----------------------------------------------------------------------------


def summarise(prompt: str):
    return ask(
        "scripted", summary_request(task=prompt, previous=None, forgotten=[], max_chars=1000)
    )


def test_a_summarising_request_gets_the_scripts_summary():
    assert summarise(script({"say": "hi"}, summary="## Task\nx")).content == "## Task\nx"
    assert summarise(script({"say": "hi"})).content == NO_SUMMARY
    assert summarise(script({"say": "hi"}, summary="")).content == ""
    with pytest.raises(LLMError) as failed:
        summarise(script({"say": "hi"}, summary={"error": "summariser down"}))
    assert "summariser down" in failed.value.message


def test_a_prompt_over_the_scripts_context_window_is_refused_as_a_provider_would():
    prompt = script({"say": "hi"}, context_window=100)
    assert ask("scripted", [user(prompt)]).content == "hi"
    with pytest.raises(ContextWindowError) as refused:
        ask("scripted", [user(prompt), user("x" * 400)])
    assert refused.value.code == CONTEXT_WINDOW_EXCEEDED


def test_a_condensed_history_plays_on_from_the_latest_own_call_id():
    prompt = script(*[{"tool": "think", "args": {"thought": str(i)}} for i in range(6)])
    condensed = [
        user(prompt),
        user("<condensed_history>turns 0 to 3</condensed_history>"),
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_4_0", "type": "function",
             "function": {"name": "think", "arguments": "{}"}},
        ]},
        {"role": "tool", "tool_call_id": "call_4_0", "content": "ok"},
    ]  # fmt: skip
    (call,) = ask("scripted", condensed).tool_calls
    assert json.loads(call.arguments) == {"thought": "5"} and call.id == "call_5_0"
